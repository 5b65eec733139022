"""nbkit.tfrecord, the TFRecord reader and writer without TensorFlow, checked against TensorFlow itself."""

from __future__ import annotations

import filecmp
import struct

import pytest

from nbkit import data, tfrecord
from nbkit.errors import DataError


def test_crc32c_of_the_standard_check_string():
    assert tfrecord._crc32c_python(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert tfrecord.crc32c(b"123456789") == 0xE3069283  # whichever implementation is installed


def test_examples_are_serialized_as_tensorflow_serializes_them():
    import tensorflow as tf

    features = {"image": b"\xff\xd8jpeg", "class": 103, "id": "0a1b", "big": [-1, 2**40, 0], "floats": [0.5, -2.0]}
    ours = tfrecord.encode_example(features)
    theirs = tf.train.Example.FromString(ours)
    assert theirs.features.feature["big"].int64_list.value == [-1, 2**40, 0]
    assert theirs.features.feature["floats"].float_list.value == [0.5, -2.0]
    assert theirs.features.feature["id"].bytes_list.value == [b"0a1b"]
    assert ours == theirs.SerializeToString(deterministic=True)
    assert tfrecord.decode_example(theirs.SerializeToString()) == {
        "big": [-1, 2**40, 0], "class": [103], "floats": [0.5, -2.0], "id": [b"0a1b"], "image": [b"\xff\xd8jpeg"]}


def test_unsupported_feature_values_are_refused():
    with pytest.raises(DataError, match="Feature 'mixed'"):
        tfrecord.encode_example({"mixed": [1, "a"]})


def test_the_sample_is_the_same_files_as_with_tensorflow(tmp_path):
    sizes = {"train_per_class": 2, "val_per_class": 1, "test_images": 5, "num_classes": 6}
    data.make_sample(tmp_path / "tf", **sizes)
    tfrecord.make_sample(tmp_path / "pure", **sizes)
    files = sorted(p.relative_to(tmp_path / "tf") for p in (tmp_path / "tf").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "pure") for p in (tmp_path / "pure").rglob("*"))
    assert any(str(f).endswith(".tfrec") for f in files)
    assert [f for f in files if (tmp_path / "tf" / f).is_file() and not filecmp.cmp(tmp_path / "tf" / f, tmp_path / "pure" / f, shallow=False)] == []


def test_reads_what_tensorflow_reads(tmp_path):
    root = data.make_sample(tmp_path, train_per_class=1, val_per_class=1, test_images=4, num_classes=5)
    for split in data.SPLITS:
        files = data.find_files(root, 192, split)
        labeled = split != "test"
        key = "class" if labeled else "id"
        expected = [(r["image"], r[key]) for r in data.read_records(files, labeled)]
        assert tfrecord.read_split(files, 192, labeled) == expected


@pytest.fixture
def sample(tmp_path):
    return tfrecord.make_sample(tmp_path / "sample", train_per_class=1, val_per_class=1, test_images=3, num_classes=4)


def damage(path, offset: int, replacement: bytes | None = None, cut: bool = False) -> None:
    content = path.read_bytes()
    path.write_bytes(content[:offset] if cut else content[:offset] + replacement + content[offset + len(replacement):])


@pytest.mark.parametrize(
    "offset, replacement, cut, problem",
    [
        (100, None, True, "record 0 is cut short"),
        (5, None, True, "record 0 has a 5-byte header"),
        (0, b"\x09", False, "record 0 has a bad length checksum"),
        (40, b"\x00\x01", False, "record 0 has a bad data checksum"),
    ],
)
def test_a_damaged_file_is_named(sample, offset, replacement, cut, problem):
    path = sorted((sample / "tfrecords-jpeg-192x192" / "val").glob("*.tfrec"))[0]
    damage(path, offset, replacement, cut)
    with pytest.raises(DataError, match="re-download or regenerate it") as error:
        tfrecord.checked_splits(sample, 192)
    assert str(error.value).startswith(f"{path}: {problem}")


def test_crc_checks_can_be_skipped(sample):
    path = sorted((sample / "tfrecords-jpeg-192x192" / "val").glob("*.tfrec"))[0]
    damage(path, 40, b"\x00\x01")
    assert len(list(tfrecord.read_records(path, check_crc=False))) == 1


def test_records_that_are_not_examples_or_lack_features_are_named(tmp_path, sample):
    garbage = tfrecord.write_records(tmp_path / "garbage.tfrec", [b"\x0a\xff"])
    with pytest.raises(DataError, match="record 0 is not a tf.train.Example"):
        tfrecord.read_split([str(garbage)], 192, labeled=True)
    test_files = data.find_files(sample, 192, "test")
    with pytest.raises(DataError, match=r"is not a labeled record \(needs one image and one class; has \['id', 'image'\]\)"):
        tfrecord.read_split(test_files, 192, labeled=True)


def test_wrong_image_size_and_lying_names_are_refused(sample):
    with pytest.raises(DataError, match="its images are 192x192, not 331x331"):
        tfrecord.read_split(data.find_files(sample, 192, "val"), 331, labeled=True)
    path = sorted((sample / "tfrecords-jpeg-192x192" / "train").glob("*.tfrec"))[0]
    path.rename(path.with_name(path.name.replace(path.name.split("-")[-1], "9.tfrec")))
    with pytest.raises(DataError, match="The train file names promise"):
        tfrecord.checked_splits(sample, 192)


def test_writing_leaves_no_partial_file_and_counts_in_names(tmp_path):
    records = [{"image": b"x" * 10, "class": i} for i in range(5)]
    written = tfrecord.write_split(records, tmp_path, 192, "train", shards=2)
    assert [p.name for p in written] == ["00-192x192-3.tfrec", "01-192x192-2.tfrec"]
    assert sorted(p.name for p in written[0].parent.iterdir()) == [p.name for p in written]
    raw = written[1].read_bytes()
    assert struct.unpack("<Q", raw[:8])[0] == len(tfrecord.flower_example(records[3]))


def test_the_sample_is_made_without_tensorflow(run_python, tmp_path):
    result = run_python(
        f"""
        import sys
        from nbkit import tfrecord
        root = tfrecord.resolve_root("sample", sample_dir={str(tmp_path / 's')!r})
        print(root.reason, sorted(tfrecord.checked_splits(root.path, 192)), "tensorflow" in sys.modules)
        """
    )
    assert result.stdout.strip().endswith("['test', 'train', 'val'] False")
    assert "generated sample" in result.stdout
