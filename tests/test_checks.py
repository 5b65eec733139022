"""Every record read once before training (nbkit.images.checks): counts, features, image size, names
that lie, missing splits and sizes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import check_data, record_items

from nbkit.errors import DataError, ParameterError
from nbkit.images import checks, layout, sample


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    return sample.make_sample(root, image_sizes=(64,), train_per_class=3, val_per_class=1, test_images=7, num_classes=5)


def items_of(root, split: str, size: int = 64) -> list:
    return check_data(root, size, 5, names=[split], keep_items=True)[split].items


def test_check_splits_count_every_record_and_keep_them_when_asked(made):
    splits = check_data(made, 64, 5)
    assert {s.name: s.count for s in splits.values()} == {"train": 15, "val": 5, "test": 7}
    assert splits["test"].files == layout.find_files(made, 64, "test") and splits["test"].items is None
    assert checks.describe(splits) == "train 15, val 5, test 7 images"
    kept = check_data(made, 64, 5, names=["test"], keep_items=True)["test"]
    assert len(kept.items) == 7 and all(isinstance(key, str) for _, key in kept.items) and not kept.labeled
    train = items_of(made, "train")
    assert sorted(label for _, label in train) == sorted(list(range(5)) * 3)


def test_a_file_whose_name_lies_is_named(made, tmp_path):
    lying = Path(layout.split_folder(tmp_path, 64, "test"))
    lying.mkdir(parents=True)
    shutil.copy(layout.find_files(made, 64, "test")[0], lying / "00-64x64-99.tfrec")
    with pytest.raises(DataError, match=r"00-64x64-99.tfrec: its name promises 99 records but it holds \d"):
        check_data(tmp_path, 64, 5, names=["test"])


def test_wrong_image_size_and_wrong_record_kind(made, tmp_path):
    shutil.copytree(made / "tfrecords-jpeg-64x64", tmp_path / "tfrecords-jpeg-192x192")
    with pytest.raises(DataError, match="record 0: the image is 64x64, but every image in the 192x192 folder"):
        check_data(tmp_path, 192, 5, names=["train"])
    val = tmp_path / "tfrecords-jpeg-192x192" / "val"
    shutil.rmtree(val)
    shutil.copytree(tmp_path / "tfrecords-jpeg-192x192" / "test", val)
    with pytest.raises(DataError, match="record 0 is not a labeled record"):
        check_data(tmp_path, 192, 5, names=["val"])


def test_missing_root_size_and_split_are_clear(made, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        layout.find_files(tmp_path / "nowhere", 192, "train")
    with pytest.raises(
        DataError, match=r"No tfrecords-jpeg-512x512 folder in .*set IMAGE_SIZE to one of the sizes there, 64"
    ):
        layout.find_files(made, 512, "train")
    assert layout.choose_size(made, 0) == 64 and layout.choose_size(made, 64) == 64
    with pytest.raises(DataError, match=r"No tfrecords-jpeg-<size>x<size> folder in"):
        layout.choose_size(tmp_path, 0)
    shutil.copytree(made / "tfrecords-jpeg-64x64" / "train", tmp_path / "tfrecords-jpeg-64x64" / "train")
    with pytest.raises(DataError, match="the val split is missing or empty") as error:
        layout.find_files(tmp_path, 64, "val")
    assert "IMAGE_SIZE" not in str(error.value)  # the size is right; a split is missing
    with pytest.raises(ParameterError, match="split='training'"):
        layout.find_files(made, 64, "training")


def test_hidden_partial_files_are_not_data(made, tmp_path):
    folder = Path(layout.split_folder(tmp_path, 64, "train"))
    shutil.copytree(layout.split_folder(made, 64, "train"), folder)
    (folder / ".partial-09-64x64-5.tfrec").write_bytes(b"half written")
    assert all(not Path(f).name.startswith(".") for f in layout.find_files(tmp_path, 64, "train"))
    assert check_data(tmp_path, 64, 5, names=["train"])["train"].count == 15


def test_name_without_count_is_an_error():
    with pytest.raises(DataError, match="train.tfrec"):
        layout.count_in_name("a/train.tfrec")


def rewritten(made, tmp_path, split, change):
    """A copy of the sample whose `split` records went through `change(items) -> items`."""
    from nbkit.images import writer

    root = tmp_path / "copy"
    shutil.copytree(made, root)
    folder = Path(layout.split_folder(root, 64, split))
    items = items_of(root, split)
    shutil.rmtree(folder)
    key = "class" if split != "test" else "id"
    writer.write_split([{"image": jpeg, key: value} for jpeg, value in change(items)], root, 64, split, shards=2)
    return root


def damaged_middle(jpeg: bytes) -> bytes:
    return jpeg[:600] + b"\0" * 2000 + jpeg[2600:]


@pytest.mark.parametrize(
    "split, change, message",
    [
        ("train", lambda items: items[:5] + [(items[5][0], 150)] + items[6:], "record 5 has class 150, outside 0..4"),
        ("val", lambda items: [(items[0][0], -1)] + items[1:], "record 0 has class -1, outside 0..4"),
        (
            "train",
            lambda items: items[:6] + [(damaged_middle(items[6][0]), items[6][1])] + items[7:],
            "record 6: the image cannot be decoded",
        ),
        ("test", lambda items: items[:4] + [(items[4][0], items[1][1])] + items[5:], "repeats the test id"),
        (
            "val",
            lambda items: items[:2] + [(items[2][0][:-300], items[2][1])] + items[3:],
            "record 2: the image cannot be decoded",
        ),
    ],
    ids=["train-label", "val-label", "damaged-jpeg-mid-file", "duplicate-test-id", "truncated-jpeg"],
)
def test_every_record_is_checked_not_only_each_files_first(made, tmp_path, split, change, message):
    root = rewritten(made, tmp_path, split, change)
    with pytest.raises(DataError, match=message) as error:
        check_data(root, 64, 5, names=[split])
    assert f"tfrecords-jpeg-64x64/{split}/0" in str(error.value)  # names the file


def test_tensorflow_refuses_the_jpegs_the_check_refuses(made):
    import tensorflow as tf

    jpeg = items_of(made, "train")[0][0]
    for bad in (damaged_middle(jpeg), jpeg[:-300]):
        with pytest.raises(DataError, match="x: the image cannot be decoded"):
            checks._check_image(bad, 64, "x")
        with pytest.raises(tf.errors.InvalidArgumentError, match="(?i)jpeg"):
            tf.io.decode_jpeg(bad).numpy()


def test_a_split_without_records_is_refused(made, tmp_path):
    from nbkit.images import writer

    shutil.copytree(made, tmp_path / "copy")
    folder = Path(layout.split_folder(tmp_path / "copy", 64, "val"))
    shutil.rmtree(folder)
    folder.mkdir()
    writer.write_records(folder / "00-64x64-0.tfrec", [])
    with pytest.raises(DataError, match="The val split .* holds no records"):
        check_data(tmp_path / "copy", 64, 5, names=["val"])


@pytest.mark.parametrize("inside", ["tfrecords-jpeg-64x64", "tfrecords-jpeg-64x64/train"])
def test_a_data_root_one_level_too_deep_names_the_folder_to_give(made, inside):
    with pytest.raises(DataError, match=f"is inside the data's layout: set DATA_ROOT='{made}'"):
        layout.choose_size(made / inside, 0)


@pytest.mark.parametrize(
    "features, labeled, message",
    [
        (
            {"image": b"jpeg", "id": 7},
            False,
            "feature 'id' holds 1 int64 value, but a test record needs one bytes value",
        ),
        (
            {"image": b"jpeg", "class": b"3"},
            True,
            "feature 'class' holds 1 bytes value, but a labeled record needs one int64",
        ),
        (
            {"image": b"jpeg", "class": 3.0},
            True,
            "feature 'class' holds 1 float value, but a labeled record needs one int64",
        ),
        ({"image": b"jpeg", "class": [1, 2]}, True, "feature 'class' holds 2 int64 values, but a labeled record needs"),
        ({"image": [], "class": 1}, True, "feature 'image' holds no value, but a labeled record needs one bytes value"),
        (
            {"image": 5, "id": "a"},
            False,
            "feature 'image' holds 1 int64 value, but a test record needs one bytes value",
        ),
        ({"image": b"jpeg", "id": b"\xff\xfe"}, False, "feature 'id' is not UTF-8 text"),
    ],
)
def test_a_feature_of_the_wrong_type_is_named_with_file_and_record(tmp_path, features, labeled, message):
    from nbkit.images import writer

    path = writer.write_records(tmp_path / "00-8x8-1.tfrec", [writer.encode_example(features)])
    with pytest.raises(DataError) as error:
        record_items([path], labeled=labeled)
    assert str(error.value).startswith(f"{path}: record 0: {message}")


def test_data_without_a_test_split_loads_without_one_unless_the_test_split_is_asked_for(made, tmp_path):
    """Issue 35 #22: data converted without --test (a code competition's) trains and validates; no test split."""
    from nbkit.images import checks as data
    from nbkit.images import description

    root = shutil.copytree(made, tmp_path / "no-test")
    shutil.rmtree(layout.split_folder(root, 64, "test"))
    dataset = description.Description("t", tuple("abcde"), tuple(range(5)), (64,))
    loaded = data.load(str(root), "given", dataset)
    assert loaded.test is None and (loaded.train.count, loaded.val.count) == (15, 5)
    assert loaded.describe().endswith("64x64 images: train 15, val 5 images (no test split: no submission)")
    assert data.load(str(made), "given", dataset).test.count == 7
    with pytest.raises(DataError, match="the test split is missing or empty"):  # 06 predicts: it needs one
        data.load(str(root), "given", dataset, names=["test"])


def test_fold_minus_one_on_folded_data_says_the_data_is_folded_and_which_folds_there_are(made, tmp_path):
    """Issue 35 #18: FOLD=-1 on folded data (no val split) was told the val split is missing: re-download."""
    root = shutil.copytree(made, tmp_path / "folded")
    shutil.rmtree(layout.split_folder(root, 64, "val"))
    names = [Path(f).name for f in layout.find_files(root, 64, "train")]
    folds = [names[:1], names[1:]] if len(names) > 1 else [names, []]
    with pytest.raises(
        ParameterError, match="FOLD=-1, but this data was converted into 2 folds.*set FOLD to a fold from 0 to 1"
    ):
        layout.split_files(root, 64, folds, -1)
    assert layout.split_files(root, 64, folds, 0)["val"] == [
        str(Path(layout.split_folder(root, 64, "train")) / names[0])
    ]
    with pytest.raises(DataError, match="the val split is missing"):  # unfolded data without val: as before
        layout.split_files(root, 64, (), -1)
