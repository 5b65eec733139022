"""Image generation (notebook 09, nbkit.imagegen: paintings, sample, mifid): the two domains checked before
any training, each bad input one clear error naming the file or parameter; MiFID against known answers; images.zip
read back here with zipfile and Pillow alone. One run of the notebook on the generated sample proves the rest: the
style learnt, every network's weights and every optimizer's state carried by Keras' JAX trainer, the outputs.
The bundled run on 8 simulated devices is in tests/matrix/test_smoke_runs.py."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest
from conftest import REPO, execute, text_outputs
from PIL import Image

from nbkit import staging, tfrecord
from nbkit.errors import DataError, ParameterError
from nbkit.imagegen import mifid, paintings
from nbkit.imagegen import sample as painting_sample
from nbkit.images import writer

# Cells the test adds to the notebook: the state before training, and after it what changed, as JSON.
BEFORE = (
    "import numpy as _np\n"
    "_before = {id(v): _np.array(v.value) for v in model.variables + model.non_trainable_variables}"
)
AFTER = """import json as _json
_moved = lambda variables: any(not _np.array_equal(_before[id(v)], _np.array(v.value)) for v in variables)
_seeds = lambda layer: [v for v in layer.non_trainable_variables if "seed" in v.path]
_seeded = (*NETWORKS[:2], "diff_augment")
print("STATE " + _json.dumps({
    "weights_moved": {n: _moved(getattr(model, n).trainable_variables) for n in NETWORKS},
    "adam_steps": {n: int(model.adams[n].iterations.numpy()) for n in NETWORKS},
    "adam_moments_moved": {n: _moved(model.adams[n].variables[2:]) for n in NETWORKS},
    "seeds_moved": {n: bool(_seeds(getattr(model, n))) and _moved(_seeds(getattr(model, n))) for n in _seeded},
    "unused_optimizer_steps": int(model.optimizer.iterations.numpy()),
    "steps": EPOCHS * steps_per_epoch}))"""


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return painting_sample._make(tmp_path_factory.mktemp("painter") / "data")


@pytest.fixture(scope="module")
def notebook_run(sample, tmp_path_factory) -> tuple[str, Path]:
    """Notebook 09's smoke run on the sample, with the two cells above added around its training."""
    tmp = tmp_path_factory.mktemp("run09")
    notebook = jupytext.read(REPO / "notebooks" / "09_monet_cyclegan.py")
    cells = notebook.cells
    built = next(i for i, c in enumerate(cells) if "model = CycleGan()" in c.source)
    trained = next(i for i, c in enumerate(cells) if "model.fit(" in c.source)
    cells.insert(trained + 1, nbformat.v4.new_code_cell(AFTER))
    cells.insert(built + 1, nbformat.v4.new_code_cell(BEFORE))
    path = tmp / "09_checked.ipynb"
    nbformat.write(notebook, path)
    out = text_outputs(execute(tmp, path, DATA_ROOT=str(sample), OUTPUT_DIR=str(tmp / "out")))
    return out, tmp / "out"


def test_the_train_step_carries_every_network_and_optimizer(notebook_run):
    out, _ = notebook_run
    state = json.loads(next(line for line in out.splitlines() if line.startswith("STATE "))[6:])
    assert all(state["weights_moved"].values()), state
    assert all(state["adam_moments_moved"].values()), state
    assert set(state["adam_steps"].values()) == {state["steps"]} and state["steps"] > 0, state
    assert all(state["seeds_moved"].values()), state  # Dropout's (the generators') and DiffAugment's seeds
    assert state["unused_optimizer_steps"] == 0  # the optimizer fit() asks for never ran: the four Adams did


def test_images_zip_holds_one_picture_per_photo_and_the_style_was_learnt(notebook_run, sample):
    """Read back with zipfile and Pillow alone. The sample's paintings are other photos under a known style: on
    these photos (whose styled versions the networks never saw) the generated pictures must be at least 30% closer
    (mean absolute error) to the true styled pictures than the photos themselves are, at the 64 px trained."""
    _, folder = notebook_run
    photos = {p.stem: np.asarray(Image.open(p).convert("RGB")) for p in (sample / "photo_jpg").glob("*.jpg")}
    assert not [p for p in folder.iterdir() if p.suffix == ".jpg"]  # nothing loose beside the zip
    errors, baseline = [], []
    with zipfile.ZipFile(folder / "images.zip") as archive:
        names = [entry.filename for entry in archive.infolist()]
        assert sorted(names) == sorted(f"{name}.jpg" for name in photos)
        for name in names:
            with Image.open(io.BytesIO(archive.read(name))) as picture:
                assert (picture.format, picture.size, picture.mode) == ("JPEG", (256, 256), "RGB")
                generated = np.asarray(picture, np.float32)
            photo = photos[name[:-4]]
            truth = painting_sample.style(photo).astype(np.float32)
            at_64 = Image.fromarray(photo).resize((64, 64), Image.BILINEAR).resize((256, 256), Image.BILINEAR)
            errors.append(np.abs(generated - truth).mean())
            baseline.append(np.abs(np.asarray(at_64, np.float32) - truth).mean())
    assert np.mean(errors) <= 0.7 * np.mean(baseline), (np.mean(errors), np.mean(baseline))


def test_the_run_writes_its_outputs_and_says_what_it_did(notebook_run):
    out, folder = notebook_run
    published = json.loads((folder / ".published-run.json").read_text())["published"]
    assert {"images.zip", "metrics.json", "losses.png", "paintings.png"} <= set(published)
    assert "images.zip: 60 JPEGs of 256x256 RGB" in out and "each decoded and read back" in out
    assert "on the stand-in, random projections of 32x32 pixels" in out
    assert "XLA_FLAGS=--xla_backend_optimization_level=1" in out  # accel.setup on a CPU
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["mifid"] > 0 and metrics["images"] == 60 and metrics["image_size"] == 64
    assert set(metrics["history"]) == {"monet_gen_loss", "photo_gen_loss", "monet_disc_loss", "photo_disc_loss"}
    assert all(len(values) == metrics["epochs"] for values in metrics["history"].values())


def test_a_run_started_again_resumes_from_the_checkpoint_and_paints_the_same(notebook_run, sample, tmp_path):
    """After the tests above (they read the first run's outputs). The same settings again: nothing left to train,
    the checkpoint's weights and Adam states loaded, and the same pictures painted, byte for byte."""
    out, folder = notebook_run
    steps = json.loads(next(line for line in out.splitlines() if line.startswith("STATE "))[6:])["steps"]
    again = text_outputs(execute(tmp_path, "09_monet_cyclegan.ipynb", DATA_ROOT=str(sample), OUTPUT_DIR=str(folder)))
    assert "finished earlier: 6 epochs done" in again and "Epoch 1/" not in again
    assert f"Adam steps: monet_generator {steps}, photo_generator {steps}, monet_discriminator {steps}" in again
    with (
        zipfile.ZipFile(folder / ".previous-run" / "images.zip") as first,
        zipfile.ZipFile(folder / "images.zip") as second,
    ):
        assert [(e.filename, e.CRC) for e in first.infolist()] == [(e.filename, e.CRC) for e in second.infolist()]


# ---- the data, checked before any training ------------------------------------------------------


def copy_of(sample: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(sample, tmp_path / "data"))


def test_the_sample_is_the_competitions_layout(sample):
    data = paintings.load(str(sample))
    assert len(data.monet.names) == 40 and len(data.photo.names) == 60
    assert data.monet.folder.name == "monet_tfrec" and data.monet.sizes == {(256, 256)}
    assert sorted(p.name for p in (sample / "photo_tfrec").iterdir()) == [f"photo0{i}-20.tfrec" for i in range(3)]
    record = tfrecord.decode_example(next(tfrecord.read_records(sample / "monet_tfrec" / "monet00-20.tfrec")))
    assert set(record) == {"image_name", "image", "target"} and record["target"] == [b"monet"]
    assert (sample / "monet_jpg" / f"{record['image_name'][0].decode()}.jpg").read_bytes() == record["image"][0]


def test_two_folders_of_pictures_of_any_size_work(tmp_path):
    for domain, size in (("monet", (50, 40)), ("photo", (90, 70))):
        (tmp_path / domain).mkdir()
        for i in range(3):
            Image.new("RGB", size, (i * 40, 0, 0)).save(tmp_path / domain / f"p{i}.png")
    data = paintings.load(str(tmp_path))
    assert data.photo.names == ["p0", "p1", "p2"] and data.photo.sizes == {(90, 70)}


@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_a_missing_or_empty_domain_is_named(sample, tmp_path, damage):
    import shutil

    data = copy_of(sample, tmp_path)
    for folder in ("monet_tfrec", "monet_jpg"):
        shutil.rmtree(data / folder)
    if damage == "empty":
        (data / "monet_tfrec").mkdir()
    with pytest.raises(DataError, match="monet_tfrec holds no pictures" if damage == "empty" else "no monet_tfrec/"):
        paintings.load(str(data))


def test_record_counts_that_differ_from_the_file_name_are_named(sample, tmp_path):
    data = copy_of(sample, tmp_path)
    (data / "photo_tfrec" / "photo01-20.tfrec").rename(data / "photo_tfrec" / "photo01-21.tfrec")
    with pytest.raises(DataError, match=r"photo01-21.tfrec holds 20 records, but its name says 21"):
        paintings.load(str(data))


def test_a_damaged_record_file_is_named(sample, tmp_path):
    data = copy_of(sample, tmp_path)
    path = data / "photo_tfrec" / "photo01-20.tfrec"
    path.write_bytes(path.read_bytes()[:-100])  # cut inside the last record
    with pytest.raises(DataError, match=r"photo01-20.tfrec is damaged after record 19 \(.*\): download or write it"):
        paintings.load(str(data))
    records = [writer.encode_example({"image": encoded("JPEG")})] * 20  # no image_name
    writer.write_records(path, records)
    with pytest.raises(DataError, match=r"photo01-20.tfrec: record 0 has no image_name and image \(bytes\)"):
        paintings.load(str(data))


def rewrite_first_record(path: Path, image: bytes | None = None, **features) -> None:
    records = [tfrecord.decode_example(raw) for raw in tfrecord.read_records(path)]
    records[0].update({"image": [image or records[0]["image"][0]], **{k: [v] for k, v in features.items()}})
    writer.write_records(path, [writer.encode_example({k: v[0] for k, v in r.items()}) for r in records])


def encoded(format: str, size: int = 256, colour=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buffer, format)
    return buffer.getvalue()


def test_a_picture_of_another_size_in_the_records_is_named(sample, tmp_path):
    data = copy_of(sample, tmp_path)
    rewrite_first_record(data / "monet_tfrec" / "monet01-20.tfrec", encoded("JPEG", 128))
    with pytest.raises(DataError, match=r"monet_tfrec: monet01-20.tfrec record 0 is 128x128, the others 256x256"):
        paintings.load(str(data))


def test_a_picture_that_cannot_be_decoded_is_named(sample, tmp_path):
    data = copy_of(sample, tmp_path)
    rewrite_first_record(data / "photo_tfrec" / "photo02-20.tfrec", b"\xff\xd8 not a jpeg")
    with pytest.raises(DataError, match=r"photo_tfrec: photo02-20.tfrec record 0 cannot be decoded"):
        paintings.load(str(data))


def two_folders(tmp_path: Path, photos: dict[str, bytes]) -> Path:
    """monet/ of three PNGs, photo/ of `photos` (file name -> bytes)."""
    for domain, files in (("monet", {f"m{i}.png": encoded("PNG", 64, (i, 0, 0)) for i in range(3)}), ("photo", photos)):
        (tmp_path / domain).mkdir(parents=True)
        for name, data in files.items():
            (tmp_path / domain / name).write_bytes(data)
    return tmp_path


def test_a_picture_training_cannot_decode_is_named_at_the_data_check(sample, tmp_path):
    """Issue 50 #12: a TIFF saved as .jpg (Pillow reads it, tf.io.decode_image does not) stops at the data check,
    named, in a folder and in TFRecords; before, the first training step died in tf.data without naming it."""
    folders = two_folders(tmp_path / "folders", {"a.jpg": encoded("JPEG", 64), "b.jpg": encoded("TIFF", 64)})
    with pytest.raises(DataError, match=r"photo: b.jpg cannot be decoded by tf.io.decode_image, as training decodes"):
        paintings.load(str(folders))
    data = copy_of(sample, tmp_path)
    rewrite_first_record(data / "monet_tfrec" / "monet01-20.tfrec", encoded("TIFF"))
    with pytest.raises(DataError, match=r"monet_tfrec: monet01-20.tfrec record 0 cannot be decoded by tf.io"):
        paintings.load(str(data))


@pytest.mark.parametrize("name", ["../../evil/0123", "a\\b", ".hidden", "", "x\0y", "n" * 201])
def test_a_picture_name_that_is_not_a_file_name_is_refused_naming_the_record(sample, tmp_path, name):
    """Issue 50 #1: an image_name is a file name in images.zip: a dataset must never steer where unzip writes."""
    data = copy_of(sample, tmp_path)
    rewrite_first_record(data / "photo_tfrec" / "photo01-20.tfrec", image_name=name.encode())
    with pytest.raises(DataError, match=r"photo01-20.tfrec: record 0's image_name is .* cannot name a file of images"):
        paintings.load(str(data))
    pictures = [(name, np.zeros((256, 256, 3), np.uint8))]
    with pytest.raises(DataError, match="a picture's name is .* cannot name a file of images.zip"):
        paintings.write_zip(tmp_path / "images.zip", pictures, 1)
    assert not (tmp_path / "images.zip").exists()


def test_a_sub_folder_named_like_a_picture_is_named(tmp_path):
    """Issue 50 #17: photo/album.jpg/ was a raw IsADirectoryError."""
    folders = two_folders(tmp_path, {"a.jpg": encoded("JPEG", 64)})
    (folders / "photo" / "album.jpg").mkdir()
    with pytest.raises(DataError, match=r"photo: album.jpg is a folder, not a picture: move it out of photo/"):
        paintings.load(str(folders))


def test_a_data_root_that_is_a_file_is_said(tmp_path):
    """Issue 50 #15: it said "does not exist"."""
    (tmp_path / "gan-getting-started.zip").write_bytes(b"PK")
    with pytest.raises(DataError, match=r"gan-getting-started.zip' is a file, not a folder: give the folder that"):
        paintings.load(str(tmp_path / "gan-getting-started.zip"))


def photos(*names: str) -> paintings._Pictures:
    return paintings._Pictures("photo", Path("photo"), list(names), [b""] * len(names), [f"{n}.jpg" for n in names])


def test_images_outside_kaggles_range_stop_the_full_profile_only():
    many = photos(*(f"p{i}" for i in range(7038)))
    with pytest.raises(ParameterError, match="IMAGES=6999: Kaggle takes 7,000 to 10,000"):
        paintings.check_image_count(6999, many, full=True)
    with pytest.raises(ParameterError, match="IMAGES=10001"):
        paintings.check_image_count(10001, many, full=True)
    assert "60 pictures of 60 photos" in paintings.check_image_count(60, photos(*map(str, range(60))), full=False)[1]
    names, line = paintings.check_image_count(8000, many, full=True)
    assert "962 of them the photos mirrored" in line and names[7037:7039] == ["p7037", "p0-mirrored"]


def test_more_images_than_the_photos_give_stop_before_training():
    """Issue 50 #2: IMAGES=7000 from 60 photos wrote 120 different pictures, each repeated byte for byte. Each photo
    gives two (as it is, mirrored); more stops at the data check, saying how many photos it needs."""
    sixty = photos(*(f"p{i}" for i in range(60)))
    names, line = paintings.check_image_count(120, sixty, full=False)
    assert len(set(names)) == 120 and line == "images.zip: 120 pictures of 60 photos, 60 of them the photos mirrored"
    with pytest.raises(DataError, match=r"IMAGES=121, but 60 photos give 120 different pictures .*at least 61 photos"):
        paintings.check_image_count(121, sixty, full=False)
    with pytest.raises(
        DataError, match=r"IMAGES=7,000, but 60 photos give 120 .*at least 3,500 photos, or fewer IMAGES"
    ):
        paintings.check_image_count(7000, sixty, full=True)
    source = (REPO / "notebooks" / "09_monet_cyclegan.py").read_text()
    assert source.index("paintings.check_image_count(IMAGES, data.photo,") < source.index("model.fit(")
    assert "p[:, ::-1] if i >= photo_count else p" in source and "yield zip_names[i], picture" in source


@pytest.mark.parametrize(
    "names, clash",
    [
        (["x", "X"], "photo: x.jpg and X.jpg would both be X.jpg in images.zip"),  # x.jpg and x.png; ignoring case
        (["x", "y", "x-mirrored"], "photo: x-mirrored.jpg and x.jpg mirrored would both be x-mirrored.jpg"),
    ],
)
def test_names_that_are_or_become_equal_stop_at_the_data_check(names, clash):
    """Issue 50 #13: two photos of one name (x.jpg and x.png, TFRecords sharing a name) or a name the mirrored
    copies take (x-mirrored beside x) gave "images.zip: 61 entries (60 names)" after the whole training."""
    with pytest.raises(DataError, match=re.escape(clash)):
        paintings.check_image_count(2 * len(names), photos(*names), full=False)


def test_a_folder_with_x_jpg_and_x_png_and_records_sharing_a_name_are_named(sample, tmp_path):
    folders = two_folders(tmp_path / "folders", {"x.jpg": encoded("JPEG", 64), "x.png": encoded("PNG", 64)})
    with pytest.raises(DataError, match=r"photo: x.jpg and x.png would both be x.jpg in images.zip"):
        paintings.check_image_count(2, paintings.load(str(folders)).photo, full=False)
    data = copy_of(sample, tmp_path)
    first = tfrecord.decode_example(next(tfrecord.read_records(data / "photo_tfrec" / "photo00-20.tfrec")))
    rewrite_first_record(data / "photo_tfrec" / "photo02-20.tfrec", image_name=first["image_name"][0])
    with pytest.raises(DataError, match=r"photo00-20.tfrec record 0 and photo02-20.tfrec record 0 would both be"):
        paintings.check_image_count(60, paintings.load(str(data)).photo, full=False)


def test_a_checkpoint_of_other_pictures_stops_like_other_settings(sample, tmp_path):
    """Issue 50 #3: the checkpoint's settings record what it was trained on (the counts and a digest of every
    picture and name): another DATA_ROOT of the same counts stops, naming the difference and RESUME='restart'."""
    from nbkit.handoff import resume

    data = copy_of(sample, tmp_path)
    rewrite_first_record(data / "photo_tfrec" / "photo00-20.tfrec", encoded("JPEG"))
    trained, other = paintings.load(str(sample)).fingerprint(), paintings.load(str(data)).fingerprint()
    assert trained.startswith("40 monet and 60 photo pictures, sha256 ") and other != trained
    assert paintings.load(str(sample)).fingerprint() == trained  # the same pictures: the same
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "epoch-0003.weights.h5").write_bytes(b"")
    state = {"version": 1, "settings": {"pictures": trained}, "epochs_done": 3, "weights_file": "epoch-0003.weights.h5"}
    (folder / "training-state.json").write_text(json.dumps({**state, "history": {}}))
    assert resume.TrainingRun(folder, {"pictures": trained}).epochs_done == 3
    with pytest.raises(
        DataError, match=rf"other settings \(pictures: checkpoint '{trained}', now '{other}'\)\. Set RESUME='restart'"
    ):
        resume.TrainingRun(folder, {"pictures": other})
    source = (REPO / "notebooks" / "09_monet_cyclegan.py").read_text()
    assert '"pictures": data.fingerprint()' in source.split("resume.TrainingRun(")[0].split("settings = {")[-1]


def test_without_inception_weights_the_advice_is_in_09s_terms(monkeypatch, tmp_path):
    """Issue 50 #16: offline, the full profile's fallback to the stand-in named WEIGHTS, a parameter 09 lacks."""
    import keras

    from nbkit import backbones

    def InceptionV3(**kwargs):  # what keras.applications raises offline
        raise Exception(f"URL fetch failure on https://storage.googleapis.com/x/{mifid._INCEPTION_FILE}: None")

    monkeypatch.setattr(keras.applications, "InceptionV3", InceptionV3)
    with pytest.raises(DataError) as error:
        backbones.backbone("InceptionV3", (299, 299, 3), "imagenet", search=[tmp_path])
    said = mifid.without_inception(error.value)
    assert "WEIGHTS" not in said and said.startswith("the stand-in, random projections of 32x32 pixels (Could not")
    assert f"attach a dataset holding {mifid._INCEPTION_FILE} with 'Add Input'" in said and "/kaggle/input" in said
    assert "mifid.without_inception(error)" in (REPO / "notebooks" / "09_monet_cyclegan.py").read_text()


def test_an_output_dir_inside_data_root_is_refused(sample):
    with pytest.raises(ParameterError, match="OUTPUT_DIR=.* lies inside DATA_ROOT"):
        staging.start(str(sample / "out"), data_root=str(sample))


# ---- images.zip ---------------------------------------------------------------------------------


def pictures(count: int, size: int = 256):
    rng = np.random.default_rng(0)
    for i in range(count):
        yield f"p{i:03d}", rng.integers(0, 255, (size, size, 3), dtype=np.uint8)


def test_the_zip_is_written_streamed_and_read_back(tmp_path):
    said = paintings.write_zip(tmp_path / "images.zip", pictures(70), 70)
    assert said.startswith("images.zip: 70 JPEGs of 256x256 RGB")
    with zipfile.ZipFile(tmp_path / "images.zip") as archive:
        assert [e.filename for e in archive.infolist()] == [f"p{i:03d}.jpg" for i in range(70)]
        assert {e.compress_type for e in archive.infolist()} == {zipfile.ZIP_STORED}
        assert Image.open(io.BytesIO(archive.read("p005.jpg"))).size == (256, 256)


def test_a_zip_over_the_limit_stops_and_leaves_nothing(tmp_path):
    with pytest.raises(DataError, match=r"images.zip would take about .* GB for 7,000 pictures, over the"):
        paintings.write_zip(tmp_path / "images.zip", pictures(7000), 7000, limit=10**8)
    assert not list(tmp_path.iterdir())


def test_a_zip_with_pictures_of_another_size_or_count_fails_its_check(tmp_path):
    with pytest.raises(DataError, match=r"p000.jpg: a picture of uint8 \(64, 64, 3\), not uint8 \(256, 256, 3\) RGB"):
        paintings.write_zip(tmp_path / "images.zip", pictures(3, size=64), 3)
    assert not (tmp_path / "images.zip").exists()
    floats = ((name, picture / 127.5 - 1) for name, picture in pictures(3))  # the generator's [-1, 1], not converted
    with pytest.raises(DataError, match=r"p000.jpg: a picture of float64 \(256, 256, 3\), not uint8"):
        paintings.write_zip(tmp_path / "images.zip", floats, 3)
    with pytest.raises(DataError, match="3 entries .* not 4"):
        paintings.write_zip(tmp_path / "images.zip", pictures(3), 4)
    paintings.write_zip(tmp_path / "images.zip", pictures(3), 3)
    data = bytearray((tmp_path / "images.zip").read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte inside the second picture, as a bad disk would change it
    (tmp_path / "images.zip").write_bytes(data)
    with pytest.raises(DataError, match="p001.jpg does not read back as written"):
        paintings._check_zip(tmp_path / "images.zip", 3)


# ---- MiFID ----------------------------------------------------------------------------------------


def test_the_frechet_distance_of_two_gaussians_is_its_closed_form():
    # Diagonal covariances: |mu1 - mu2|^2 + sum (sqrt(a) - sqrt(b))^2.
    a, b = np.array([1.0, 4.0, 9.0]), np.array([4.0, 1.0, 1.0])
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    expected = 5.0 + ((np.sqrt(a) - np.sqrt(b)) ** 2).sum()
    assert mifid._frechet_distance(mu1, np.diag(a), mu2, np.diag(b)) == pytest.approx(expected, rel=1e-9)
    rotation = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0]  # the same, rotated
    rotated = mifid._frechet_distance(
        rotation @ mu1, rotation @ np.diag(a) @ rotation.T, rotation @ mu2, rotation @ np.diag(b) @ rotation.T
    )
    assert rotated == pytest.approx(expected, rel=1e-6)


def test_mifid_punishes_copies_and_shifted_sets():
    rng = np.random.default_rng(0)
    real = rng.normal(1.0, 1.0, (400, 16))
    same_distribution = mifid.score(real, rng.normal(1.0, 1.0, (400, 16)))
    shifted = mifid.score(real, rng.normal(1.5, 1.0, (400, 16)))
    copies = mifid.score(real, real[:300] * 1.01)
    assert same_distribution["memorization_distance"] >= 0.1  # no memorization: MiFID is FID
    assert same_distribution["mifid"] == pytest.approx(same_distribution["fid"])
    assert shifted["mifid"] > 5 * same_distribution["mifid"]
    assert copies["memorization_distance"] < 1e-6 and copies["mifid"] > 1e3 * same_distribution["mifid"]
    with pytest.raises(DataError, match="two .pictures, features. arrays of one width"):
        mifid.score(real, real[:, :8])
