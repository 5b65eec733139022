"""Bad inputs a user can give notebook 02, each stopping with one clear error before training (on
the JAX path, Kaggle's TPU path, where TensorFlow used to fail loudly), and a run that dies leaving the
previous run's outputs exactly as they were."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import papermill
import pytest
from conftest import BAD_DATA_CASES, REPO, execute, kill_notebook_when, record_items

from nbkit import backbones
from nbkit.errors import DataError, ParameterError
from nbkit.images import flowers, layout, writer
from nbkit.images import sample as flower_sample

JAX8 = {"BACKEND": "jax", "SIMULATE_DEVICES": 8}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return flower_sample.make_sample(tmp_path_factory.mktemp("flowers"), 104)


def rewrite(root: Path, split: str, change) -> None:
    """Replace `split` of the data under `root` with `change(records)`."""
    labeled = split != "test"
    items = record_items(layout.find_files(root, 192, split), labeled=labeled)
    shutil.rmtree(layout.split_folder(root, 192, split))
    key = "class" if labeled else "id"
    writer.write_split([{"image": jpeg, key: value} for jpeg, value in change(items)], root, 192, split)


def damaged(jpeg: bytes) -> bytes:
    return jpeg[:600] + b"\0" * 2000 + jpeg[2600:]


def empty_val(root: Path) -> None:
    shutil.rmtree(layout.split_folder(root, 192, "val"))
    Path(layout.split_folder(root, 192, "val")).mkdir()
    writer.write_records(Path(layout.split_folder(root, 192, "val")) / "00-192x192-0.tfrec", [])


# Spoilt data, stopped by `flowers.load_data`, the notebooks' first read of the data: every record of
# every split is read and checked there, before any model is built. (case, spoil, words of the DataError)
DATA_CASES = [
    (
        "train label 150",
        lambda r: rewrite(r, "train", lambda i: i[:40] + [(i[40][0], 150)] + i[41:]),
        "record 40 has class 150, outside 0..103",
    ),
    (
        "val label -1",
        lambda r: rewrite(r, "val", lambda i: [(i[0][0], -1)] + i[1:]),
        "record 0 has class -1, outside 0..103",
    ),
    (
        "damaged JPEG late in a file",
        lambda r: rewrite(r, "train", lambda i: i[:50] + [(damaged(i[50][0]), i[50][1])] + i[51:]),
        "the image cannot be decoded",
    ),
    (
        "repeated test id",
        lambda r: rewrite(r, "test", lambda i: i[:9] + [(i[9][0], i[3][1])] + i[10:]),
        "repeats the test id",
    ),
    ("empty validation split", empty_val, "The val split (1 files in"),
    ("DATA_ROOT one level too deep", None, "is inside the data's layout: set DATA_ROOT="),
]


@pytest.mark.parametrize("case, spoil, words", DATA_CASES, ids=[c[0] for c in DATA_CASES])
def test_bad_data_stops_at_the_notebooks_first_read_of_it(made, tmp_path, case, spoil, words):
    root = shutil.copytree(made, tmp_path / "data")
    if spoil:
        spoil(root)
    data_root = root / "tfrecords-jpeg-192x192" if case == "DATA_ROOT one level too deep" else root
    with pytest.raises(DataError) as raised:
        flowers.load_data(str(data_root))
    assert words in str(raised.value)


@pytest.mark.parametrize("params, words", BAD_DATA_CASES)
def test_a_data_root_or_image_size_that_is_not_there_is_named(made, params, words):
    data_root = str(made) if params["DATA_ROOT"] == "sample" else params["DATA_ROOT"]
    with pytest.raises(DataError, match=re.escape(words)):
        flowers.load_data(data_root, params.get("IMAGE_SIZE", 0))


@pytest.mark.parametrize(
    "per_replica_batch, replicas, words",
    [
        (27, 8, "global batch of 216, more than the 208 images of the val split"),
        (100_000, 1, "global batch of 100000, more than the 208 images of the val split"),
    ],
)
def test_a_batch_the_data_cannot_fill_is_refused_with_what_to_pass(made, per_replica_batch, replicas, words):
    data = flowers.load_data(str(made))
    with pytest.raises(ParameterError, match=re.escape(words)):
        data.check_batch(per_replica_batch, replicas)
    assert data.check_batch(26, 8) == 208  # the largest that fits


def test_a_model_name_misspelt_or_in_the_wrong_case_is_named_with_its_spelling():
    with pytest.raises(ParameterError, match=re.escape("Did you mean 'EfficientNetB0'?")):
        backbones.check_name("efficientnetb0")
    with pytest.raises(ParameterError, match=re.escape("MODEL='EfficientNetB9' is not offered")):
        backbones.check_name("EfficientNetB9")
    backbones.check_name("EfficientNetB0")


@pytest.mark.parametrize(
    "notebook, calls",
    [
        (
            "02_flowers_classifier.py",
            ["flowers.load_data(", "data.check_batch(", "model = build_model()", "model.fit("],
        ),
        ("05_train_on_tpu.py", ["flowers.load_data(", "data.check_batch(", "resume.TrainingRun(", "model.fit("]),
    ],
)
def test_the_notebooks_check_model_name_data_and_batch_before_resuming_or_training(notebook, calls):
    """The checks above are the calls 02 and 05 make, in this order: a misspelt MODEL is named before the
    data is read, and bad data or batch before a checkpoint is looked at or a model built."""
    source = (REPO / "notebooks" / notebook).read_text()
    calls = ["backbones.check_name(MODEL)", *calls]
    positions = [source.find(call) for call in calls]
    assert -1 not in positions and positions == sorted(positions), dict(zip(calls, positions))


# The same stops through a whole notebook run, where they meet the notebook's own code: the test split
# read before training, the global batch of 64 simulated replicas, WEIGHTS in the full profile.
# (case, how the data is spoilt or None, parameters, error type, words of its message)
CASES = [
    (
        "damaged JPEG in the test split",
        lambda r: rewrite(r, "test", lambda i: i[:-1] + [(damaged(i[-1][0]), i[-1][1])]),
        JAX8,
        "DataError",
        "the image cannot be decoded",
    ),
    (
        "64 simulated devices",
        None,
        {"BACKEND": "jax", "SIMULATE_DEVICES": 64},
        "ParameterError",
        "global batch of 1024, more than the 208 images of the val split",
    ),
    (
        "weights that are a text file",
        None,
        {"MODEL": "EfficientNetB0", "WEIGHTS": "TEXT_FILE", "PROFILE": "full"},  # smoke trains small_cnn
        "DataError",
        "is not efficientnetb0_notop.h5",
    ),
]


@pytest.mark.parametrize("case, spoil, params, error, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_stops_before_training_with_one_clear_error(made, tmp_path, case, spoil, params, error, words):
    root = shutil.copytree(made, tmp_path / "data")
    if spoil:
        spoil(root)
    if params.get("WEIGHTS") == "TEXT_FILE":
        (tmp_path / "weights.h5").write_text("not weights")
        params = {**params, "WEIGHTS": str(tmp_path / "weights.h5")}
    with pytest.raises(papermill.PapermillExecutionError) as raised:
        execute(
            tmp_path,
            "02_flowers_classifier.ipynb",
            **{"DATA_ROOT": str(root), "OUTPUT_DIR": str(tmp_path / "o"), **params},
        )
    assert raised.value.ename == error, raised.value.evalue
    assert words in raised.value.evalue
    assert "model.fit" not in raised.value.source  # stopped before any training
    assert not (tmp_path / "o").exists() or not [p for p in (tmp_path / "o").iterdir() if not p.name.startswith(".")]


def test_an_output_dir_that_is_a_file_is_refused(made, tmp_path):
    (tmp_path / "outputs").write_text("a file")
    with pytest.raises(papermill.PapermillExecutionError) as raised:
        execute(tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(made), OUTPUT_DIR=str(tmp_path / "outputs"))
    assert raised.value.ename == "ParameterError" and "is a file, not a folder" in raised.value.evalue
    assert (tmp_path / "outputs").read_text() == "a file"


def snapshot(folder: Path) -> dict[str, bytes]:
    """The folder's files, but nbkit's own records: the lock file a killed run leaves (its lock died with the
    run) and .published-run.json (which names the files there that nbkit did not write)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name not in NBKIT_RECORDS}


NBKIT_RECORDS = (".run.lock", ".published-run.json")


def test_a_run_killed_late_leaves_the_previous_outputs_as_they_were(made, tmp_path):
    output_dir = tmp_path / "flowers"
    output_dir.mkdir()
    for name in ("submission.csv", "metrics.json", "model.keras", "confusion_matrix.png", "learning_rate.png"):
        (output_dir / name).write_bytes(f"the previous run's {name}".encode())  # what a finished run left
    before = snapshot(output_dir)
    staged = output_dir / ".incomplete-run" / "learning_rate.png"  # written just before training starts
    kill_notebook_when(
        tmp_path,
        "02_flowers_classifier.ipynb",
        staged.exists,
        within_s=300,
        what="the second run wrote no outputs",
        after_s=3,  # well into training
        DATA_ROOT=str(made),
        OUTPUT_DIR=str(output_dir),
        EPOCHS=30,
    )
    assert snapshot(output_dir) == before  # not one byte of the earlier run's outputs changed
    theirs = json.loads((output_dir / ".published-run.json").read_text())["theirs"]
    assert theirs == sorted(before)  # written by hand here, so not nbkit's: a finished run would keep them in .kept/
    # The killed run's own files stay aside; the next run moves them to .failed-run/ and says so
    # (test_atomic, and the resumed 05 in test_handoff).
    assert staged.exists()
