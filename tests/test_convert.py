"""The converter: a competition's pictures + CSV -> the kit's TFRecords. Records are read back with
nbkit.tfrecord and Pillow: layout and counts, square upright RGB JPEGs, labels and ids as the CSV
writes them, stratified splits and disjoint folds, the same bytes every time, the description, and
nothing half written. Pictures are tiny and few: the whole file runs in seconds."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, JpegImagePlugin

from nbkit import tfrecord
from nbkit.convert import example, labels, pictures
from nbkit.convert.run import convert
from nbkit.errors import DataError, ParameterError
from nbkit.images import description as descriptions
from nbkit.images import layout, writer
from nbkit.publish import cli

SIZE = 32


def read_split(output: Path, split_name: str, size: int = SIZE) -> list[dict]:
    """Every record of one split, files in name order: {"image": PIL image, "id": str[, "class": int]}."""
    records = []
    for path in sorted((output / f"tfrecords-jpeg-{size}x{size}" / split_name).glob("*.tfrec")):
        for raw in tfrecord.read_records(path):
            features = tfrecord.decode_example(raw)
            record = {"image": Image.open(io.BytesIO(features["image"][0])), "id": features["id"][0].decode()}
            if "class" in features:
                record["class"] = features["class"][0]
            record["file"] = path.name
            records.append(record)
    return records


def csv_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))[1:]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def cassava(tmp_path_factory):
    return example._make_example(tmp_path_factory.mktemp("competition") / "cassava", per_class=12, test_pictures=6)


def convert_cassava(cassava: Path, output: Path, **options) -> Path:
    arguments = {
        "labels": cassava / "train.csv",
        "test": cassava / "test_images",
        "sample_submission": cassava / "sample_submission.csv",
        "class_names": cassava / "label_num_to_disease_map.json",
        "workers": 1,
        **options,
    }
    return convert(cassava / "train_images", output, SIZE, **arguments)


@pytest.fixture(scope="module")
def converted(cassava, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KAGGLE_USERNAME", "alice")
        return convert_cassava(cassava, tmp_path_factory.mktemp("one") / "cassava-tfrecords")


# ---- the records ---------------------------------------------------------------------------------


def test_layout_names_and_counts(converted):
    description = descriptions.load(converted)
    for split_name, count in {"train": 50, "val": 10, "test": 6}.items():
        files = layout.find_files(converted, SIZE, split_name)
        records = read_split(converted, split_name)
        in_file = [sum(r["file"] == Path(f).name for r in records) for f in files]  # records read back
        assert [Path(f).name for f in files] == [f"{i:02d}-32x32-{n}.tfrec" for i, n in enumerate(in_file)]
        assert sum(in_file) == count == description.counts[split_name] == len(records)
        assert len(files) == min(count, writer._MIN_SHARDS)  # the seeds' rule: 16 files when there are enough records


def test_every_record_is_a_square_rgb_jpeg_with_id_and_class_only_when_labeled(converted):
    for split_name in layout.SPLITS:
        for record in read_split(converted, split_name):
            image = record["image"]
            assert (image.format, image.mode, image.size) == ("JPEG", "RGB", (SIZE, SIZE))
            assert ("class" in record) == (split_name != "test")


def test_labels_and_ids_are_the_csvs(converted, cassava):
    description = descriptions.load(converted)
    assert description.label_values == (0, 1, 2, 3, 4)
    assert description.classes == example._DISEASES
    assert (description.id_column, description.label_column) == ("image_id", "label")
    truth = {picture_id: int(label) for picture_id, label in csv_rows(cassava / "train.csv")}
    labeled = read_split(converted, "train") + read_split(converted, "val")
    assert sorted(r["id"] for r in labeled) == sorted(truth)  # ids as written, with ".jpg" / ".png"
    assert all(description.label_values[r["class"]] == truth[r["id"]] for r in labeled)
    # Test records in the sample submission's order, ids as it writes them.
    assert [r["id"] for r in read_split(converted, "test")] == [
        i for i, _ in csv_rows(cassava / "sample_submission.csv")
    ]
    # The sample submission travels with the data, and the notebooks find it through the description.
    assert (converted / "sample_submission.csv").read_bytes() == (cassava / "sample_submission.csv").read_bytes()
    assert descriptions.load(converted).sample_submission == str(converted / "sample_submission.csv")


def test_the_validation_split_is_stratified_and_files_mix_classes(converted):
    train, val = read_split(converted, "train"), read_split(converted, "val")
    assert {r["class"] for r in val} == {r["class"] for r in train} == set(range(5))
    assert all(sum(r["class"] == c for r in val) == round(12 * 0.2) for c in range(5))
    order = [r["class"] for r in train]
    assert order != sorted(order) and len({r["class"] for r in train[:6]}) > 1  # shuffled, not class by class


def test_a_nearest_centroid_beats_chance_on_the_example(converted):
    # The example must be learnable: a model far simpler than a CNN already beats 1 in 5.
    def arrays(split_name):
        records = read_split(converted, split_name)
        return np.stack([np.asarray(r["image"], np.float32).ravel() for r in records]), [r["class"] for r in records]

    (x, y), (vx, vy) = arrays("train"), arrays("val")
    centroids = np.stack([x[np.array(y) == c].mean(0) for c in range(5)])
    predicted = np.argmin(((vx[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert np.mean(predicted == np.array(vy)) > 0.5


def test_same_bytes_again_and_with_two_workers(converted, cassava, tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    again = convert_cassava(cassava, tmp_path / "cassava-tfrecords", workers=2)
    assert snapshot(again) == snapshot(converted)


def test_description_and_dataset_metadata(converted):
    text = (converted / descriptions.DESCRIPTION_FILE).read_text()
    assert str(converted.parent) not in text and "/" not in json.dumps(json.loads(text)["converted_with"])
    description = descriptions.load(converted)
    assert description.image_sizes == (SIZE,) and description.metric == "accuracy" and description.folds == ()
    assert description.converted_with["labels"] == "train.csv" and description.converted_with["skipped"] == []
    saved = json.loads(text)  # read with json, against what the example holds
    assert (saved["classes"], saved["label_values"]) == (list(example._DISEASES), [0, 1, 2, 3, 4])
    assert saved["submission"] == {"id_column": "image_id", "label_column": "label"} and saved["metric"] == "accuracy"
    assert saved["counts"] == {"train": 50, "val": 10, "test": 6} and saved["image_sizes"] == [SIZE]
    assert saved["sample_submission"] == "sample_submission.csv"
    metadata = json.loads((converted / "dataset-metadata.json").read_text())
    assert metadata["id"] == "alice/cassava-tfrecords" and metadata["licenses"] == [{"name": "CC0-1.0"}]
    assert metadata["title"] == saved["title"] and 6 <= len(metadata["title"]) <= 50
    assert metadata["resources"][0]["path"] == descriptions.DESCRIPTION_FILE


def test_a_description_reads_back_as_written(tmp_path):
    written = descriptions.Description(
        title="Mixed labels",
        classes=("healthy", "sick", "one hundred three"),
        label_values=("H", "S", 103),  # a str and an int label value stay what they are
        image_sizes=(32, 64),
        id_column="image_id",
        label_column="diagnosis",
        metric="qwk",
        folds=(("00-32x32-2.tfrec",), ("01-32x32-2.tfrec",)),
        counts={"train": 4},
    )
    descriptions.write(tmp_path, written)
    assert json.loads((tmp_path / descriptions.DESCRIPTION_FILE).read_text())["label_values"] == ["H", "S", 103]
    assert descriptions.load(tmp_path) == written


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda text: text[:-5], "is not valid JSON"),
        (lambda text: "[1, 2]", "is not an nbkit dataset description"),
        (lambda text: text.replace('"format_version": 1', '"format_version": 7'), "has format_version 7; this nbkit"),
        (lambda text: text.replace('"metric"', '"scored_by"'), "lacks 'metric' or has it in another form"),
        (lambda text: text.replace('"classes": [', '"classes": [], "was": ['), "it names no classes"),
    ],
    ids=["not-json", "not-a-description", "other-version", "missing-key", "no-classes"],
)
def test_a_damaged_description_is_refused_with_what_to_do(tmp_path, change, message):
    descriptions.write(tmp_path, descriptions.Description("t", ("a", "b"), (0, 1), (32,)))
    path = tmp_path / descriptions.DESCRIPTION_FILE
    path.write_text(change(path.read_text()))
    with pytest.raises(DataError, match=message) as error:
        descriptions.load(tmp_path)
    assert str(path) in str(error.value) and "convert the data again" in str(error.value).lower()


def test_folds_are_disjoint_stratified_files(cassava, tmp_path):
    output = convert_cassava(
        cassava, tmp_path / "folds-out", folds=3, title="Cassava in three folds", sample_submission=None
    )
    assert all(r["id"].endswith(".jpg") for r in read_split(output, "test"))  # as train.csv writes ids
    description = descriptions.load(output)
    assert not (output / f"tfrecords-jpeg-{SIZE}x{SIZE}" / "val").exists() and len(description.folds) == 3
    records = read_split(output, "train")
    files = {f for fold in description.folds for f in fold}
    assert files == {r["file"] for r in records} and len(files) >= writer._MIN_SHARDS
    fold_of_file = {f: i for i, fold in enumerate(description.folds) for f in fold}
    ids_by_fold = [{r["id"] for r in records if fold_of_file[r["file"]] == i} for i in range(3)]
    assert sum(map(len, ids_by_fold)) == len(set().union(*ids_by_fold)) == 60  # each picture in one fold
    for i in range(3):
        in_fold = [r["class"] for r in records if fold_of_file[r["file"]] == i]
        assert all(in_fold.count(c) == 4 for c in range(5))  # 12 per class over 3 folds
    assert description.converted_with["folds"] == 3 and description.converted_with["val_fraction"] is None


def test_folder_form_with_name_labels_and_stem_ids(tmp_path):
    source = example._make_example(tmp_path / "flowers", per_class=4, test_pictures=3, num_classes=3, form="folders")
    output = convert(source / "train_images", tmp_path / "out", SIZE, test=source / "test_images", workers=1)
    description = descriptions.load(output)
    assert description.label_values == ("cbb", "cbsd", "cgm") == description.classes  # alphabetical
    labeled = read_split(output, "train") + read_split(output, "val")
    assert all(r["id"].split("/")[0] == description.label_values[r["class"]] for r in labeled)  # id: class/file
    order = [r["class"] for r in read_split(output, "train")]
    assert order != sorted(order)  # listed class by class, written shuffled
    assert {r["id"] for r in read_split(output, "test")} == {p.stem for p in (source / "test_images").iterdir()}
    assert (description.id_column, description.label_column) == ("id", "label")


def test_csv_ids_without_extension_match_png_and_jpg(tmp_path):
    source = example._make_example(
        tmp_path / "c", per_class=3, test_pictures=2, ids_with_extension=False, name_labels=True
    )
    output = convert(
        source / "train_images",
        tmp_path / "out",
        SIZE,
        labels=source / "train.csv",
        test=source / "test_images",
        workers=1,
    )
    ids = {r["id"] for r in read_split(output, "train") + read_split(output, "val")}
    assert ids == {i for i, _ in csv_rows(source / "train.csv")} and not any("." in i for i in ids)
    assert descriptions.load(output).label_values == ("cbb", "cbsd", "cgm", "cmd", "healthy")
    # Without a sample submission, test ids are written the way the labels CSV writes ids: no suffix.
    assert {r["id"] for r in read_split(output, "test")} == {i for i, _ in csv_rows(source / "sample_submission.csv")}


def test_the_folder_forms_own_split_is_kept(tmp_path):
    for part, count in (("train", 3), ("valid", 1)):
        for name in ("a", "b"):
            tiny(tmp_path / "src" / part / name, [f"{part}{i}.jpg" for i in range(count)])
    tiny(tmp_path / "src" / "test", ["t.jpg"])  # the test pictures beside them are no class
    output = convert(tmp_path / "src", tmp_path / "out", SIZE, workers=1)
    assert sorted(r["id"] for r in read_split(output, "val")) == ["valid/a/valid0.jpg", "valid/b/valid0.jpg"]
    description = descriptions.load(output)
    assert description.converted_with["split"] == "given" and description.label_values == ("a", "b")
    # train/ alone (no val/ beside it) is split here, and its classes are still a and b
    (tmp_path / "src" / "valid").rename(tmp_path / "elsewhere")
    output = convert(tmp_path / "src", tmp_path / "out", SIZE, workers=1)
    assert descriptions.load(output).label_values == ("a", "b") and descriptions.load(output).counts["val"] == 2


# ---- pictures ------------------------------------------------------------------------------------


def tiny(folder: Path, names: list[str], colour=(200, 40, 40), size=(24, 16)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.new("RGB", size, colour).save(folder / name)
    return folder


def asymmetric(width=96, height=64) -> np.ndarray:
    """A picture whose every turn and flip looks different: a bright top-left corner, a gradient."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[..., 2] = np.linspace(0, 255, width, dtype=np.uint8)[None, :]
    pixels[: height // 3, : width // 4] = (255, 255, 0)
    return pixels


def test_an_exif_turned_picture_converts_like_its_upright_twin(tmp_path):
    upright = asymmetric()
    folder = tmp_path / "src" / "a"
    folder.mkdir(parents=True)
    Image.fromarray(upright).save(folder / "upright.jpg", quality=95)
    for kind in example._STORED_TURN:
        example._save_picture(upright, folder / f"{kind}.jpg", kind)
    Image.fromarray(np.rot90(upright)).save(folder / "turned-no-tag.jpg", quality=95)
    tiny(tmp_path / "src" / "b", ["1.jpg", "2.jpg"])
    output = convert(tmp_path / "src", tmp_path / "out", SIZE, workers=1)
    decoded = {r["id"]: np.asarray(r["image"], np.float32) for s in ("train", "val") for r in read_split(output, s)}
    twin = decoded["a/upright.jpg"]
    for kind in example._STORED_TURN:
        assert np.abs(decoded[f"a/{kind}.jpg"] - twin).mean() < 6, kind
    assert np.abs(decoded["a/turned-no-tag.jpg"] - twin).mean() > 30  # the check can tell a turned picture


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: Image.fromarray(np.full((8, 8), 128 * 257, np.uint16)), (128, 128, 128)),  # 16-bit: scaled
        (lambda: Image.new("I", (8, 8), 65535), (255, 255, 255)),
        (lambda: Image.new("RGBA", (8, 8), (0, 0, 0, 0)), (255, 255, 255)),  # transparent: white
        (lambda: Image.new("LA", (8, 8), (0, 0)), (255, 255, 255)),
        (lambda: Image.new("L", (8, 8), 77), (77, 77, 77)),
        (lambda: Image.new("CMYK", (8, 8), (0, 255, 255, 0)), (255, 0, 0)),
        (lambda: palette_with_transparency(), (255, 255, 255)),
    ],
    ids=["I;16", "I", "RGBA", "LA", "L", "CMYK", "P+transparency"],
)
def test_every_kind_of_picture_becomes_8_bit_rgb(make, expected):
    rgb = pictures._to_rgb(make())
    assert rgb.mode == "RGB" and rgb.getpixel((4, 4)) == expected


def palette_with_transparency():
    image = Image.new("P", (8, 8), 0)
    image.putpalette([10, 20, 30] * 256)
    image.info["transparency"] = 0
    return image


def test_the_example_pictures_of_every_kind_convert(tmp_path, cassava):
    odd = [cassava / "train_images" / name for name, _ in csv_rows(cassava / "train.csv")[: len(example._ODD_KINDS)]]
    assert {Image.open(p).mode for p in odd} == {"RGB", "CMYK", "L", "RGBA", "P", "I;16"}
    for path in odd:
        image = Image.open(io.BytesIO(pictures.square_jpeg(path, SIZE)))
        assert (image.mode, image.size) == ("RGB", (SIZE, SIZE))
        assert 20 < np.asarray(image).mean() < 250, path.name  # neither clipped to white nor black


@pytest.mark.parametrize("fit", pictures.FITS)
def test_fit_resize_crop_pad(tmp_path, fit):
    wide = np.zeros((32, 96, 3), np.uint8)
    wide[:, :32], wide[:, 32:64], wide[:, 64:] = (255, 0, 0), (0, 255, 0), (0, 0, 255)
    Image.fromarray(wide).save(tmp_path / "wide.png")
    square = np.asarray(Image.open(io.BytesIO(pictures.square_jpeg(tmp_path / "wide.png", 48, fit))), np.int32)
    left, middle, top = square[24, 4], square[24, 24], square[2, 24]
    if fit == "resize":  # all three colours, full height
        assert left[0] > 200 and middle[1] > 200 and top[1] > 200
    elif fit == "crop":  # the middle third only
        assert left[1] > 200 and middle[1] > 200 and left[0] < 60
    else:  # letterboxed: black above and below
        assert left[0] > 200 and middle[1] > 200 and top.max() < 40


def test_a_large_jpeg_is_decoded_at_a_reduced_scale(tmp_path, monkeypatch):
    Image.fromarray(asymmetric(1200, 800)).save(tmp_path / "big.jpg")
    scales = []
    draft = JpegImagePlugin.JpegImageFile.draft
    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", lambda self, *a: scales.append(draft(self, *a)))
    image = Image.open(io.BytesIO(pictures.square_jpeg(tmp_path / "big.jpg", 64)))
    assert image.size == (64, 64) and scales and scales[0][1][2] == 1200 / 8  # decoded at 1/8: 150 x 100


# ---- split, order, files, labels -----------------------------------------------------------------


def test_validation_split_keeps_a_training_picture_of_every_class():
    labels_ = [0] * 10 + [1] * 2 + [2]
    validates = labels.validation_split(labels_, 0.9, seed=1)
    assert sum(validates[:10]) == 9 and sum(validates[10:12]) == 1 and not validates[12]
    assert validates == labels.validation_split(labels_, 0.9, seed=1) != labels.validation_split(labels_, 0.9, seed=2)


def test_folds_are_balanced_within_each_class():
    labels_ = [0] * 7 + [1] * 5
    fold_of = labels.folds(labels_, 3, seed=0)
    sizes = [fold_of.count(f) for f in range(3)]
    assert max(sizes) - min(sizes) <= 1
    assert all(
        max(c) - min(c) <= 1
        for c in ([fold_of[:7].count(f) for f in range(3)], [fold_of[7:].count(f) for f in range(3)])
    )


def test_the_file_plan_follows_the_seeds_rule():
    assert pictures._plan([1000], 200_000) == [pictures._balanced(1000, writer._MIN_SHARDS)]  # small: 16 files
    assert len(pictures._plan([100_000], 150_000)[0]) == writer.shard_count(15_000_000_000, 100_000)  # ~100 MB each
    assert [len(files) for files in pictures._plan([200] * 5, 100)] == [4] * 5  # folds share the files
    assert pictures._plan([5], 100) == [[1] * 5]


def test_label_order_integers_numerically_names_alphabetically_or_as_given():
    assert labels.class_list({"10": "", "2": "", "1": ""}).values == (1, 2, 10)
    assert labels.class_list({"rose": "", "daisy": ""}).values == ("daisy", "rose")
    given = labels.class_list({"rose": ""}, ["tulip", "rose", "daisy"])
    assert given.values == ("tulip", "rose", "daisy") and given.index("daisy", "") == 2


# ---- nothing half written, damaged pictures ------------------------------------------------------


def small_folders(root: Path) -> Path:
    tiny(root / "a", ["1.jpg", "2.jpg", "3.PNG"], (200, 40, 40))
    tiny(root / "b", ["1.jpg", "2.jpg", "3.jpg"], (40, 40, 200))
    (root / "b" / ".hidden.jpg").write_bytes(b"not read")
    (root / "b" / "._1.jpg").write_bytes(b"macOS resource fork")
    return root


def test_a_failed_conversion_leaves_the_earlier_output_exactly_as_it_was(tmp_path, capsys):
    source, output = small_folders(tmp_path / "src"), tmp_path / "out"
    convert(source, output, SIZE, workers=1)
    before = snapshot(output)
    good = (source / "a" / "1.jpg").read_bytes()
    (source / "a" / "4.jpg").write_bytes(good[: len(good) // 2])  # cut short
    with pytest.raises(DataError, match=r"a/4\.jpg: cannot decode .*4\.jpg as a picture.*--skip-damaged"):
        convert(source, output, SIZE, workers=2)
    assert snapshot(output) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]  # no staging folder, no stray .tfrec
    capsys.readouterr()
    convert(source, output, SIZE, workers=1, skip_damaged=True)
    assert "skipped a/4.jpg" in capsys.readouterr().out
    description = descriptions.load(output)
    assert description.converted_with["skipped"] == ["a/4.jpg"] and sum(description.counts.values()) == 6


def test_a_killed_conversion_leaves_the_earlier_output_exactly_as_it_was(tmp_path):
    import signal
    import subprocess
    import sys

    source, output = small_folders(tmp_path / "src"), tmp_path / "out"
    convert(source, output, SIZE, workers=1)
    before = snapshot(output)
    os.mkfifo(source / "a" / "4.jpg")  # opening it blocks: the conversion stops there until killed
    command = [
        sys.executable,
        "-m",
        "nbkit",
        "tfrecords",
        str(source),
        str(output),
        "--size",
        str(SIZE),
        "--workers",
        "1",
    ]
    running = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    for line in running.stdout:
        if line.startswith("encoding"):
            break
    running.send_signal(signal.SIGKILL)
    running.wait()
    assert snapshot(output) == before
    staging = [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]
    assert staging == [f".out.tmp-{running.pid}"]  # the killed run's, hidden; the next run deletes it
    (source / "a" / "4.jpg").unlink()
    convert(source, output, SIZE, workers=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


def test_a_killed_conversions_staging_folder_goes_at_the_next_one(tmp_path):
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f".out.tmp-{int(gone.stdout)}"  # atomic.staged_dir's name for it
    (leftover / f"tfrecords-jpeg-{SIZE}x{SIZE}" / "train").mkdir(parents=True)
    (leftover / f"tfrecords-jpeg-{SIZE}x{SIZE}" / "train" / "00-writing.tfrec").write_bytes(b"half")
    running = tmp_path / f".out.tmp-{os.getppid()}"  # a live process's (pytest's parent): kept
    running.mkdir()
    convert(small_folders(tmp_path / "src"), tmp_path / "out", SIZE, workers=1)
    assert not leftover.exists() and running.exists()


def test_the_command_line(tmp_path, capsys, cassava):
    code = cli.main(
        [
            "tfrecords",
            str(cassava / "train_images"),
            str(tmp_path / "cli-out"),
            "--size",
            "32",
            "--labels",
            str(cassava / "train.csv"),
            "--test",
            str(cassava / "test_images"),
            "--sample-submission",
            str(cassava / "sample_submission.csv"),
            "--metric",
            "qwk",
            "--workers",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "train: 50 records in 16 files" in out and out.endswith("--dir-mode zip\n")
    assert f"kaggle datasets create -p {tmp_path / 'cli-out'} --dir-mode zip" in out
    assert descriptions.load(tmp_path / "cli-out").metric == "qwk"
    assert cli.main(["tfrecords", str(tmp_path / "nowhere"), str(tmp_path / "o"), "--size", "32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbkit tfrecords: ParameterError: SOURCE") and err.count("\n") == 1


# ---- bad input: one clear error each -------------------------------------------------------------


def labels_csv(root: Path, rows: list[tuple[str, str]], header=("image_id", "label"), name="train.csv") -> Path:
    with open(root / name, "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    return root / name


def csv_case(rows, **options):
    def call(root: Path):
        tiny(root / "pics", ["a.jpg", "b.jpg", "c.png", "d.jpg"])
        return convert(root / "pics", root / "out", SIZE, labels=labels_csv(root, rows), workers=1, **options)

    return call


GOOD_ROWS = [("a.jpg", "0"), ("b.jpg", "1"), ("c", "0"), ("d.jpg", "1")]


def folders_case(**options):
    def call(root: Path):
        return convert(
            small_folders(root / "src"),
            options.pop("output", root / "out"),
            options.pop("size", SIZE),
            workers=1,
            **options,
        )

    return call


def sample_case(make_test, sample_rows):
    def call(root: Path):
        test = tiny(root / "test", ["t1.jpg", "t2.jpg"])
        make_test(test)
        sample = labels_csv(root, sample_rows, ("id", "label"), "sample.csv")
        return convert(small_folders(root / "src"), root / "out", SIZE, test=test, sample_submission=sample, workers=1)

    return call


def empty_class_folder(root: Path):
    (small_folders(root / "src") / "c").mkdir()
    return convert(root / "src", root / "out", SIZE, workers=1)


def output_is_a_file(root: Path):
    (root / "out").write_text("a file")
    return convert(small_folders(root / "src"), root / "out", SIZE, workers=1)


def output_holds_other_things(root: Path):
    tiny(root / "out", ["holiday.jpg"])
    return convert(small_folders(root / "src"), root / "out", SIZE, workers=1)


BAD_INPUTS = [
    ("a CSV id with no picture", csv_case([*GOOD_ROWS, ("e.jpg", "1")]), DataError, "line 6: no picture 'e.jpg'"),
    ("a picture with no CSV line", csv_case(GOOD_ROWS[:3]), DataError, "pics/d.jpg"),
    (
        "an empty label",
        csv_case([("a.jpg", ""), *GOOD_ROWS[1:]]),
        DataError,
        "train.csv line 2 (id 'a.jpg') has an empty label",
    ),
    (
        "a repeated id",
        csv_case([*GOOD_ROWS, ("b.jpg", "0")]),
        DataError,
        "line 6 (id 'b.jpg') repeats the id of line 3",
    ),
    ("the same picture twice", csv_case([*GOOD_ROWS, ("a", "0")]), DataError, "names the same picture as line 2"),
    ("a missing column", csv_case(GOOD_ROWS, label_column="disease"), DataError, "'image_id', 'label'"),
    (
        "an unknown label",
        csv_case(GOOD_ROWS, class_names=["0", "2"]),
        DataError,
        "line 3 (id 'b.jpg'): label '1' is not one",
    ),
    ("folds for one picture a class", csv_case(GOOD_ROWS, folds=3), ParameterError, "has only 2 pictures"),
    ("one fold", csv_case(GOOD_ROWS, folds=1), ParameterError, "--folds 1"),
    ("a tiny size", folders_case(size=16), ParameterError, "--size 16"),
    ("an absurd size", folders_case(size=100_000), ParameterError, "--size 100000"),
    ("a zero val fraction", folders_case(val_fraction=0), ParameterError, "--val-fraction 0"),
    ("a huge val fraction", folders_case(val_fraction=0.95), ParameterError, "--val-fraction 0.95"),
    ("an unknown fit", folders_case(fit="stretch"), ParameterError, "--fit 'stretch'"),
    ("a bad dataset id", folders_case(dataset_id="Alice/My Data"), ParameterError, "DATASET_ID='Alice/My Data'"),
    ("an empty class folder", empty_class_folder, DataError, "holds no pictures"),
    ("a missing source", lambda t: convert(t / "nowhere", t / "out", SIZE), ParameterError, "does not exist"),
    ("a missing CSV", lambda t: convert(t, t / "out", SIZE, labels=t / "no.csv"), ParameterError, "--labels"),
    ("a missing test folder", folders_case(test="/no/such/test"), ParameterError, "--test /no/such/test"),
    ("OUTPUT is a file", output_is_a_file, ParameterError, "is a file"),
    ("OUTPUT holds other things", output_holds_other_things, ParameterError, "holiday.jpg"),
    (
        "a test picture not in the sample submission",
        sample_case(lambda t: tiny(t, ["t3.jpg"]), [("t1", "a"), ("t2", "a")]),
        DataError,
        "test/t3.jpg",
    ),
    (
        "a sample submission id with no picture",
        sample_case(lambda t: None, [("t1", "a"), ("t2", "a"), ("t9", "a")]),
        DataError,
        "line 4: no picture 't9'",
    ),
    (
        "a sample submission line without an id",
        sample_case(lambda t: None, [("t1", "a"), ("", "a"), ("t2", "a")]),
        DataError,
        "sample.csv line 3 has no id",
    ),
]


@pytest.mark.parametrize("case, call, error, words", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_each_bad_input_stops_with_a_clear_error(tmp_path, case, call, error, words):
    with pytest.raises(error) as raised:
        call(tmp_path)
    assert words in str(raised.value)
    assert not list(tmp_path.rglob("*.tfrec"))


def test_a_notebook_that_converts_carries_the_writer_but_not_the_example():
    from nbkit.publish import bundle

    needed = bundle._modules_needed(["from nbkit.convert.run import convert"])
    assert {"convert/run", "convert/pictures", "images/writer", "tfrecord"} <= set(needed)
    assert "convert/example" not in needed and not [m for m in needed if m.startswith(("accel", "handoff/"))]


# ---- bad or unusual input that once gave a wrong result or lost data (issue 35) -----------------


def test_labels_differing_in_number_form_are_one_class_and_in_letter_case_an_error(tmp_path):
    # "1", "01" and "1.0" are the number 1 (a spreadsheet writes 1.0): one class, written 1.
    classes = labels.class_list({"1": "line 2", "1.0": "line 3", "2.00": "line 4", "03": "line 5"})
    assert classes.values == (1, 2, 3) and classes.index("1.0", "") == classes.index("1", "") == 0
    # "Healthy" and "healthy": which spelling is the class is not the converter's to guess.
    rows = [("a.jpg", "Healthy"), ("b.jpg", "sick"), ("c", "healthy"), ("d.jpg", "sick")]
    with pytest.raises(DataError, match=r"'Healthy' \(train.csv line 2 .*'healthy' \(train.csv line 4.*letter case"):
        csv_case(rows)(tmp_path)


def test_links_inside_source_never_read_a_picture_twice(tmp_path, capsys):
    source = small_folders(tmp_path / "src")
    elsewhere = tiny(tmp_path / "elsewhere", ["e1.jpg", "e2.jpg"])
    (source / "a" / "loop").symlink_to(source)  # back into SOURCE: every class again, under a
    (source / "b" / "copy.jpg").symlink_to(source / "a" / "1.jpg")  # a's picture, again, under b
    (source / "a" / "more").symlink_to(elsewhere)  # outside SOURCE: read, once
    (source / "b" / "more").symlink_to(elsewhere)  # the same pictures again, under b
    (elsewhere / "self").symlink_to(elsewhere)  # a loop outside SOURCE
    output = convert(source, tmp_path / "out", SIZE, workers=1)
    ids = sorted(r["id"] for r in read_split(output, "train") + read_split(output, "val"))
    assert ids == ["a/1.jpg", "a/2.jpg", "a/3.PNG", "a/more/e1.jpg", "a/more/e2.jpg", "b/1.jpg", "b/2.jpg", "b/3.jpg"]
    said = capsys.readouterr().out
    assert "left out 4 links" in said and "loop" in said and "copy.jpg" in said


def test_files_of_kinds_not_read_are_counted_and_said(tmp_path, capsys):
    source = small_folders(tmp_path / "src")
    Image.new("RGB", (8, 8)).save(source / "a" / "moving.gif")
    (source / "b" / "phone.heic").write_bytes(b"\0\0\0\x18ftypheic")
    (source / "b" / "notes.txt").write_text("not a picture")
    output = convert(source, tmp_path / "out", SIZE, workers=1)
    assert sum(descriptions.load(output).counts.values()) == 6
    said = capsys.readouterr().out
    assert "left out 3 files" in said and "1 .gif" in said and "1 .heic" in said and "1 .txt" in said


def test_a_test_folder_that_holds_training_pictures_is_refused(tmp_path):
    source = small_folders(tmp_path / "src")
    with pytest.raises(ParameterError, match="--test .* holds 6 of the training pictures"):
        convert(source, tmp_path / "out", SIZE, test=source, workers=1)
    test = tiny(tmp_path / "test", ["t.jpg"])
    (test / "linked.jpg").symlink_to(source / "b" / "2.jpg")
    with pytest.raises(ParameterError, match="holds 1 of the training pictures"):
        convert(source, tmp_path / "out", SIZE, test=test, workers=1)
    assert not (tmp_path / "out").exists()


def test_a_test_folder_inside_source_is_named_as_the_test_set_not_a_class(tmp_path, capsys):
    source = small_folders(tmp_path / "src")
    tiny(source / "c", ["1.jpg", "2.jpg"])
    output = convert(source, tmp_path / "out", SIZE, test=source / "c", workers=1)  # c: a class, given as --test
    said = capsys.readouterr().out
    assert "c/ in SOURCE is --test: the test set, not a class; the 2 classes: a, b" in said
    assert descriptions.load(output).label_values == ("a", "b") and descriptions.load(output).counts["test"] == 2
    convert(source, tmp_path / "out", SIZE, test=tmp_path / "src" / ".." / "src" / "c", workers=1)  # the same folder
    assert "c/ in SOURCE is --test" in capsys.readouterr().out
    apart = tiny(tmp_path / "test", ["t.jpg"])
    convert(source, tmp_path / "out", SIZE, test=apart, workers=1)
    assert "is --test" not in capsys.readouterr().out  # a test folder apart from SOURCE: nothing to say


def test_converting_again_replaces_only_what_the_converter_wrote(tmp_path):
    source, output = small_folders(tmp_path / "src"), tmp_path / "out"
    convert(source, output, SIZE, workers=1, dataset_id="alice/pictures")
    metadata = json.loads((output / "dataset-metadata.json").read_text())
    edited = {**metadata, "subtitle": "my own words", "licenses": [{"name": "CC-BY-4.0"}]}
    (output / "dataset-metadata.json").write_text(json.dumps(edited))
    convert(source, output, SIZE, workers=1)  # the user's edits stay
    assert json.loads((output / "dataset-metadata.json").read_text()) == edited
    convert(source, output, SIZE, workers=1, dataset_id="alice/other-pictures")  # asked for: written anew
    assert json.loads((output / "dataset-metadata.json").read_text())["id"] == "alice/other-pictures"
    # Anything else in OUTPUT (notes, a run's outputs) would be deleted: refused, each named, nothing lost.
    (output / "README.md").write_text("my notes")
    (output / "train-on-tpu" / "model-package").mkdir(parents=True)
    (output / "train-on-tpu" / "metrics.json").write_text("{}")
    before = snapshot(output)
    with pytest.raises(ParameterError, match=r"holds README.md, train-on-tpu, which the converter did not write"):
        convert(source, output, SIZE, workers=1)
    assert snapshot(output) == before


def test_a_test_picture_is_never_skipped_and_empty_files_stop_before_encoding(tmp_path, capsys):
    source = small_folders(tmp_path / "src")
    test = tiny(tmp_path / "test", ["t1.jpg", "t2.jpg"])
    good = (test / "t1.jpg").read_bytes()
    (test / "t2.jpg").write_bytes(good[: len(good) // 2])  # cut short: the submission still needs it
    with pytest.raises(DataError, match=r"test/t2.jpg: cannot decode .* Replace it: a test picture cannot be left out"):
        convert(source, tmp_path / "out", SIZE, test=test, skip_damaged=True, workers=1)
    (test / "t2.jpg").write_bytes(b"")  # empty: found before any picture is encoded
    capsys.readouterr()
    with pytest.raises(DataError, match=r"1 pictures are empty files \(0 bytes\): test/t2.jpg"):
        convert(source, tmp_path / "out", SIZE, test=test, skip_damaged=True, workers=1)
    assert "encoding" not in capsys.readouterr().out
    # An empty training picture: an error before encoding, or with --skip-damaged left out and listed.
    (test / "t2.jpg").write_bytes(good)
    (source / "a" / "4.jpg").write_bytes(b"")
    with pytest.raises(DataError, match=r"empty files \(0 bytes\): a/4.jpg"):
        convert(source, tmp_path / "out", SIZE, test=test, workers=1)
    assert "encoding" not in capsys.readouterr().out
    output = convert(source, tmp_path / "out", SIZE, test=test, skip_damaged=True, workers=1)
    assert descriptions.load(output).converted_with["skipped"] == ["a/4.jpg"]


def test_a_semicolon_csv_and_ids_in_another_unicode_form_are_read(tmp_path):
    decomposed = "cafe\u0301"  # é as e + accent, as macOS writes file names
    tiny(tmp_path / "pics", [f"{decomposed} {i}.jpg" for i in range(4)])
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter=";").writerows(
            [("image_id", "label"), *[(f"caf\u00e9 {i}.jpg", i % 2) for i in range(4)]]
        )
    output = convert(tmp_path / "pics", tmp_path / "out", SIZE, labels=tmp_path / "train.csv", workers=1)
    records = read_split(output, "train") + read_split(output, "val")
    assert sorted((r["id"], r["class"]) for r in records) == [(f"caf\u00e9 {i}.jpg", i % 2) for i in range(4)]
    (tmp_path / "train.csv").write_text((tmp_path / "train.csv").read_text().replace(";", "|"))
    with pytest.raises(DataError, match=r"its columns are 'image_id\|label'. Separate its columns with `,`, `;` or"):
        convert(tmp_path / "pics", tmp_path / "out", SIZE, labels=tmp_path / "train.csv", workers=1)
    (tmp_path / "train.csv").write_text("image_id,label\ncafe 0.jpg,healthy, or not\n")  # issue 45 #9: shifted cells
    with pytest.raises(DataError, match=r"train.csv line 2 has 3 cells, the header 2: quote a cell that holds a ','"):
        convert(tmp_path / "pics", tmp_path / "out", SIZE, labels=tmp_path / "train.csv", workers=1)


def test_an_output_where_nothing_can_be_written_stops_before_any_work(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ParameterError, match="a-file is not a folder you may write in"):
        convert(small_folders(tmp_path / "src"), tmp_path / "a-file" / "out", SIZE, workers=1)
    if os.geteuid() != 0:  # root writes into a read-only folder all the same
        (tmp_path / "locked").mkdir(mode=0o500)
        with pytest.raises(ParameterError, match="locked is not a folder you may write in"):
            convert(tmp_path / "src", tmp_path / "locked" / "out", SIZE, workers=1)


def test_a_class_removed_from_the_description_is_named_as_the_cause(tmp_path):
    from nbkit.images import checks

    output = convert(small_folders(tmp_path / "src"), tmp_path / "out", SIZE, workers=1)
    described = json.loads((output / descriptions.DESCRIPTION_FILE).read_text())
    described["classes"], described["label_values"] = ["a"], ["a"]  # b removed by hand
    (output / descriptions.DESCRIPTION_FILE).write_text(json.dumps(described))
    dataset = descriptions.load(output)
    with pytest.raises(DataError, match="If a class was removed from the data's nbkit-dataset.json, put it back"):
        checks.check_splits(layout.split_files(output, SIZE, names=["train"]), SIZE, dataset.num_classes)


def test_the_command_line_checks_what_it_needs_before_any_work(tmp_path, capsys, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "PIL" else find_spec(name, *a))
    code = cli.main(["tfrecords", str(small_folders(tmp_path / "src")), str(tmp_path / "out"), "--size", "32"])
    captured = capsys.readouterr()
    assert code == 1 and not captured.out and not (tmp_path / "out").exists()
    assert "needs PIL" in captured.err and "`.venv/bin/python -m nbkit tfrecords ...`" in captured.err


def test_the_summary_says_how_to_publish_with_this_environments_kaggle(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    source = small_folders(tmp_path / "src")
    convert(source, tmp_path / "out", SIZE, workers=1)
    said = capsys.readouterr().out
    assert "INSERT_USERNAME_HERE/out-tfrecords" in said and "convert again with --dataset-id <you>/<slug>" in said
    kaggle = Path(sys.executable).with_name("kaggle")
    assert f"publish: {kaggle if kaggle.exists() else 'kaggle'} datasets create -p" in said
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")  # logged in now: the owner-less id is not kept
    convert(source, tmp_path / "out", SIZE, workers=1)
    assert json.loads((tmp_path / "out" / "dataset-metadata.json").read_text())["id"] == "alice/out-tfrecords"


def test_every_command_the_readme_shows_runs_as_written_after_make_demo():
    import re
    import shlex

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    commands = [c.split(" #")[0].strip() for b in blocks for c in b.replace("\\\n", " ").splitlines()]
    commands += re.findall(r"`((?:\.venv/bin/|make |python)[^`]*)`", readme)
    for command in filter(None, commands):
        if command.startswith(("#", "for ", "done", "git clone", "make")):
            continue
        assert command.startswith(".venv/bin/") and "..." not in command, command
        words = shlex.split(command.split(" && ")[-1])
        if words[:3] == [".venv/bin/python", "-m", "nbkit"] and " / " not in command:
            cli._parser().parse_args(words[3:])  # a real command with real options (exits 2 otherwise)


def test_the_readmes_conversion_and_publish_commands_run_as_written(tmp_path, monkeypatch):
    """The README's "your own competition" block, run word for word from a folder holding its `cassava/`
    (the converter's example, written in Cassava's files) and this environment as `.venv`: the
    conversion, then `kaggle datasets create` into a stub Kaggle, which receives the converted files."""
    import re
    import secrets
    import shlex
    import subprocess
    import sys
    import zipfile

    from kaggle_stub import StubServer

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if "nbkit tfrecords cassava/" in b]
    lines = [line.split(" #")[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    commands = [line for line in lines if line.startswith((".venv/bin/python -m nbkit", ".venv/bin/kaggle"))]
    assert [c.split()[:4] for c in commands] == [
        [".venv/bin/python", "-m", "nbkit", "tfrecords"],
        [".venv/bin/kaggle", "datasets", "create", "-p"],
    ]
    example._make_example(tmp_path / "cassava", per_class=5, test_pictures=3)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    routes = {
        "/api/v1/blobs.BlobApiService/StartBlobUpload": lambda body, headers: (
            200,
            {"token": f"token-{body['name']}", "createUrl": f"http://storage.example.invalid/upload/{body['name']}"},
        ),
        "PUT /upload/*": lambda body, headers: (200, {}),
        "/api/v1/datasets.DatasetApiService/CreateDataset": lambda body, headers: (
            200,
            {"ref": "alice/cassava", "url": "https://www.kaggle.com/datasets/alice/cassava", "status": "ok"},
        ),
    }
    for name in ("KAGGLE_API_TOKEN", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kaggle-config"))
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    monkeypatch.setenv("KAGGLE_KEY", secrets.token_hex(16))
    with StubServer(routes) as stub:
        monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "LOCALHOST")
        monkeypatch.setenv("HTTP_PROXY", stub.url)
        for command in commands:
            done = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    uploads = {r.path.rsplit("/", 1)[1]: r.raw for r in stub.requests if r.method == "PUT"}
    converted = tmp_path / "out" / "cassava"
    assert uploads["nbkit-dataset.json"] == (converted / "nbkit-dataset.json").read_bytes()
    (folder,) = [p for p in converted.iterdir() if p.name.startswith("tfrecords-jpeg-")]
    with zipfile.ZipFile(io.BytesIO(uploads[f"{folder.name}.zip"])) as archive:
        zipped = {name for name in archive.namelist() if not name.endswith("/")}
    assert zipped == {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert uploads["sample_submission.csv"] == (converted / "sample_submission.csv").read_bytes()
    metadata = json.loads((converted / "dataset-metadata.json").read_text())  # what the CLI sends it as
    created = next(r for r in stub.requests if r.path.endswith("/CreateDataset")).body
    assert f"{created['ownerSlug']}/{created['slug']}" == metadata["id"] == "alice/cassava"
    assert sorted(f["token"] for f in created["files"]) == sorted(f"token-{name}" for name in uploads)
