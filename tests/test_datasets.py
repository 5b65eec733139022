"""Where data is read from (nbkit.inputs.datasets, and the flowers notebooks' DATA_ROOT in
nbkit.images.flowers): a given folder, the attached Kaggle input, or the generated sample outside Kaggle."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbkit.env import _Environment
from nbkit.errors import DataError
from nbkit.images import flowers
from nbkit.inputs import datasets


def kaggle_env(tmp_path: Path, tpu_vm: bool = False) -> _Environment:
    return _Environment("kaggle", tmp_path / "input", tmp_path / "working", tpu_vm)


def local_env(tmp_path: Path) -> _Environment:
    return _Environment("local", tmp_path / "data", tmp_path / "out", False)


def test_dataset_attached_on_kaggle_is_read_from_kaggle_input(tmp_path):
    (tmp_path / "input" / "my-tfrecords").mkdir(parents=True)
    found = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / "my-tfrecords")
    assert found.reason == f"alice/my-tfrecords is attached in {tmp_path / 'input'}"


def test_a_dataset_in_the_newer_mount_folder_is_found(tmp_path):
    (tmp_path / "input" / "datasets" / "alice" / "my-tfrecords").mkdir(parents=True)
    found = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path))
    assert found.path == str(tmp_path / "input" / "datasets" / "alice" / "my-tfrecords")


def test_dataset_not_attached_on_kaggle_says_add_input(tmp_path):
    with pytest.raises(DataError, match="attach alice/missing with 'Add Input' \\(if it is private, only its owner"):
        datasets.locate("auto", "alice/missing", environment=kaggle_env(tmp_path))


def test_explicit_data_root(tmp_path, monkeypatch):
    assert datasets.locate(str(tmp_path), "a/b").reason == "DATA_ROOT was given"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert datasets.locate("~", "a/b").path == str(tmp_path)  # ~ expanded
    with pytest.raises(DataError, match="does not exist"):
        datasets.locate(str(tmp_path / "nope"), "a/b")


def test_outside_kaggle_the_fallback_stands_in_or_it_is_an_error(tmp_path):
    stand_in = lambda environment: datasets.DataSource(str(tmp_path), "a stand-in")  # noqa: E731
    found = datasets.locate("auto", "alice/x", fallback=stand_in, environment=local_env(tmp_path))
    assert found.path == str(tmp_path)
    assert found.reason == "not on Kaggle (local) and kagglehub is off (NBKIT_KAGGLEHUB=off), so a stand-in for alice/x"
    with pytest.raises(DataError, match="alice/x is not here \\(local\\) and kagglehub is off .*: set DATA_ROOT"):
        datasets.locate("auto", "alice/x", environment=local_env(tmp_path))


@pytest.mark.parametrize("mount", [flowers._COMPETITION, f"competitions/{flowers._COMPETITION}"])
def test_flowers_data_on_kaggle_is_the_attached_competition(tmp_path, mount):
    (tmp_path / "input" / mount).mkdir(parents=True)
    found = flowers.locate_data("auto", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / mount) and "is attached" in found.reason
    with pytest.raises(DataError, match="Add Input"):
        flowers.locate_data("auto", environment=kaggle_env(tmp_path / "elsewhere"))


def test_flowers_sample_is_generated_once_outside_kaggle(tmp_path, monkeypatch):
    from nbkit.images import sample

    made = []
    monkeypatch.setattr(
        sample, "make_sample", lambda root, num_classes: made.append(root) or (root / "written").touch()
    )
    first = flowers.locate_data("auto", environment=local_env(tmp_path))
    second = flowers.locate_data("sample", environment=local_env(tmp_path))
    assert len(made) == 1 and first.path == second.path == str(tmp_path / "out" / "sample-data")
    assert "generated sample" in first.reason and second.reason.startswith(
        "DATA_ROOT='sample', so the generated sample"
    )
