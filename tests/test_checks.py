"""Every record read once before training (nbkit.flowers.checks): counts, features, image size, names
that lie, missing splits and sizes; and the data fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nbkit.errors import DataError, ParameterError
from nbkit.flowers import checks, layout, sample


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    return sample.make_sample(root, image_sizes=(64,), train_per_class=3, val_per_class=1, test_images=7, num_classes=5)


def test_checked_splits_count_every_record_and_keep_them_when_asked(made):
    splits = checks.checked_splits(made, 64)
    assert {s.name: s.count for s in splits.values()} == {"train": 15, "val": 5, "test": 7}
    assert splits["test"].files == layout.find_files(made, 64, "test") and splits["test"].items is None
    assert checks.describe(splits) == "train 15, val 5, test 7 images"
    kept = checks.check_split(made, 64, "test", keep_items=True)
    assert kept.items == checks.read_items(kept.files, labeled=False) and not kept.labeled


def test_a_file_whose_name_lies_is_named(made, tmp_path):
    lying = Path(layout.split_folder(tmp_path, 64, "test"))
    lying.mkdir(parents=True)
    shutil.copy(layout.find_files(made, 64, "test")[0], lying / "00-64x64-99.tfrec")
    with pytest.raises(DataError, match=r"00-64x64-99.tfrec: its name promises 99 records but it holds \d"):
        checks.check_split(tmp_path, 64, "test")


def test_wrong_image_size_and_wrong_record_kind(made, tmp_path):
    shutil.copytree(made / "tfrecords-jpeg-64x64", tmp_path / "tfrecords-jpeg-192x192")
    with pytest.raises(DataError, match="its images are 64x64, not 192x192.*IMAGE_SIZE"):
        checks.check_split(tmp_path, 192, "train")
    val = tmp_path / "tfrecords-jpeg-192x192" / "val"
    shutil.rmtree(val)
    shutil.copytree(tmp_path / "tfrecords-jpeg-192x192" / "test", val)
    with pytest.raises(DataError, match="record 0 is not a labeled record"):
        checks.check_split(tmp_path, 192, "val")


def test_missing_root_size_and_split_are_clear(made, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        layout.find_files(tmp_path / "nowhere", 192, "train")
    with pytest.raises(DataError, match=r"No \.tfrec files .*tfrecords-jpeg-64x64.*pick IMAGE_SIZE"):
        layout.find_files(made, 512, "train")
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
    assert checks.check_split(tmp_path, 64, "train").count == 15


def test_name_without_count_is_an_error():
    with pytest.raises(DataError, match="train.tfrec"):
        layout.count_items(["a/00-192x192-12.tfrec", "a/train.tfrec"])


def test_fingerprint_changes_with_the_files(made, tmp_path):
    files = layout.find_files(made, 64, "train")
    assert checks.fingerprint(files) == checks.fingerprint(list(reversed(files)))  # order does not matter
    copies = [shutil.copy(name, tmp_path) for name in files]
    assert checks.fingerprint(copies) == checks.fingerprint(files)  # names and contents, not folders
    with open(copies[0], "r+b") as f:
        f.seek(-3, 2)
        f.write(b"xyz")
    assert checks.fingerprint(copies) != checks.fingerprint(files)
    assert checks.fingerprint(copies[1:]) != checks.fingerprint(files)
    with pytest.raises(DataError, match="does not exist"):
        checks.fingerprint([str(tmp_path / "gone-3.tfrec")])
