"""The TFRecord reader and writer without TensorFlow (nbkit.tfrecord, nbkit.images.writer), checked against
TensorFlow itself: same bytes, same records, and every kind of damage named with file and record."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import record_items

from nbkit import tfrecord as codec
from nbkit.errors import DataError, ParameterError
from nbkit.images import layout, sample, writer


def test_crc32c_of_the_standard_check_string():
    assert codec._crc32c_python(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert codec._crc32c(b"123456789") == 0xE3069283  # whichever implementation is installed


def test_examples_are_serialized_as_tensorflow_serializes_them():
    import tensorflow as tf

    features = {"image": b"\xff\xd8jpeg", "class": 103, "id": "0a1b", "big": [-1, 2**40, 0], "floats": [0.5, -2.0]}
    ours = writer.encode_example(features)
    theirs = tf.train.Example.FromString(ours)
    assert theirs.features.feature["big"].int64_list.value == [-1, 2**40, 0]
    assert theirs.features.feature["floats"].float_list.value == [0.5, -2.0]
    assert theirs.features.feature["id"].bytes_list.value == [b"0a1b"]
    assert ours == theirs.SerializeToString(deterministic=True)
    assert codec.decode_example(theirs.SerializeToString()) == {
        "big": [-1, 2**40, 0],
        "class": [103],
        "floats": [0.5, -2.0],
        "id": [b"0a1b"],
        "image": [b"\xff\xd8jpeg"],
    }


def test_unsupported_feature_values_are_refused():
    with pytest.raises(ParameterError, match="Feature 'mixed'"):
        writer.encode_example({"mixed": [1, "a"]})


def test_tensorflow_reads_the_written_files_and_would_write_the_same_bytes(tmp_path):
    import tensorflow as tf

    records = [{"image": sample._encode_jpeg(np.full((8, 8, 3), 40 * i, np.uint8)), "class": i} for i in range(5)]
    written = writer.write_split(records, tmp_path, 8, "train", shards=2)
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "class": tf.io.FixedLenFeature([], tf.int64)}
    read = [tf.io.parse_single_example(raw, spec) for raw in tf.data.TFRecordDataset([str(p) for p in written])]
    assert [int(r["class"]) for r in read] == list(range(5))
    assert [r["image"].numpy() for r in read] == [r["image"] for r in records]
    theirs = tmp_path / "tf.tfrec"
    with tf.io.TFRecordWriter(str(theirs)) as tf_writer:
        for record in records[:3]:
            example = tf.train.Example.FromString(writer.encode_example(record))
            tf_writer.write(example.SerializeToString(deterministic=True))
    assert theirs.read_bytes() == written[0].read_bytes()


def test_pillow_jpegs_are_tensorflows_jpegs():
    import tensorflow as tf

    image = sample._sample_image(7, 64, np.random.default_rng(0))
    assert sample._encode_jpeg(image) == tf.io.encode_jpeg(image, quality=90).numpy()


def test_written_files_are_byte_identical_in_every_process(tmp_path, run_python):
    write = (
        "from nbkit.images import writer; writer.write_split([{{'image': b'jpeg', 'class': 3}}], {root!r}, 32, 'train')"
    )
    roots = [tmp_path / str(i) for i in range(3)]
    for root in roots:
        run_python(write.format(root=str(root)))
    contents = {open(layout.find_files(root, 32, "train")[0], "rb").read() for root in roots}
    assert len(contents) == 1
    raw = contents.pop()
    assert raw.index(b"class") < raw.index(b"image")  # sorted keys


def test_round_trip_keeps_images_labels_and_ids_in_order(tmp_path):
    records = [{"image": bytes([i]) * 10, "id": f"id{i:03d}"} for i in range(10)]
    written = writer.write_split(records, tmp_path, 32, "test", shards=3)
    assert [p.name for p in written] == ["00-32x32-4.tfrec", "01-32x32-4.tfrec", "02-32x32-2.tfrec"]
    assert record_items(layout.find_files(tmp_path, 32, "test"), labeled=False) == [
        (r["image"], r["id"]) for r in records
    ]
    assert sorted(p.name for p in written[0].parent.iterdir()) == [p.name for p in written]  # no partial files left
    assert struct.unpack("<Q", written[1].read_bytes()[:8])[0] == len(writer.encode_example(records[4]))


def test_shard_count_rule():
    assert writer.shard_count(total_bytes=5 * 2**20, num_records=832) == 16  # small: enough files to read in parallel
    assert writer.shard_count(total_bytes=5 * 2**30, num_records=50000) == 52  # large: ~100 MB per file
    assert writer.shard_count(total_bytes=1000, num_records=3) == 3  # never more files than records
    with pytest.raises(ParameterError, match="No records to write"):
        writer.write_split([], "anywhere", 32, "train")


@pytest.fixture
def val_file(tmp_path):
    root = sample.make_sample(tmp_path / "sample", train_per_class=1, val_per_class=1, test_images=3, num_classes=4)
    return sorted((root / "tfrecords-jpeg-192x192" / "val").glob("*.tfrec"))[0]


def damage(path, offset: int, replacement: bytes | None = None, cut: bool = False) -> None:
    content = path.read_bytes()
    path.write_bytes(content[:offset] if cut else content[:offset] + replacement + content[offset + len(replacement) :])


@pytest.mark.parametrize(
    "offset, replacement, cut, problem",
    [
        (100, None, True, "record 0 is cut short"),
        (5, None, True, "record 0 has a 5-byte header"),
        (0, b"\x09", False, "record 0 has a bad length checksum"),
        (40, b"\x00\x01", False, "record 0 has a bad data checksum"),
    ],
)
def test_a_damaged_file_is_named(val_file, offset, replacement, cut, problem):
    damage(val_file, offset, replacement, cut)
    with pytest.raises(DataError, match="re-download or regenerate it") as error:
        record_items([str(val_file)], labeled=True)
    assert str(error.value).startswith(f"{val_file}: {problem}")


def test_records_that_are_not_examples_or_lack_features_are_named(tmp_path):
    garbage = writer.write_records(tmp_path / "garbage.tfrec", [b"\x0a\xff"])
    with pytest.raises(DataError, match="garbage.tfrec: record 0 is not a tf.train.Example"):
        record_items([str(garbage)], labeled=True)
    test_file = writer.write_records(tmp_path / "test.tfrec", [writer.encode_example({"image": b"x", "id": "a"})])
    with pytest.raises(
        DataError, match=r"record 0 is not a labeled record \(needs one image and one class; has \['id', 'image'\]\)"
    ):
        record_items([str(test_file)], labeled=True)


@pytest.fixture
def compressed(tmp_path):
    """The same records written by TensorFlow plain, GZIP and ZLIB: {compression: path}, and the records."""
    import tensorflow as tf

    records = [writer.encode_example({"image": bytes([i]) * (3000 * i + 7), "class": i}) for i in range(12)]
    paths = {}
    for kind in ("", "GZIP", "ZLIB"):
        paths[kind] = tmp_path / f"{kind or 'plain'}-12.tfrec"
        with tf.io.TFRecordWriter(str(paths[kind]), options=kind or None) as tf_writer:
            for record in records:
                tf_writer.write(record)
    return paths, records


def test_gzip_and_zlib_files_written_by_tensorflow_read_as_the_plain_file(compressed):
    paths, records = compressed
    for kind, path in paths.items():
        assert codec.compression(path) == kind
        assert list(codec.read_records(path)) == records, kind
    assert paths["GZIP"].read_bytes()[:2] == b"\x1f\x8b" and paths["GZIP"].stat().st_size < paths[""].stat().st_size


@pytest.mark.parametrize("kind", ["GZIP", "ZLIB"])
def test_a_truncated_compressed_file_is_named(compressed, kind):
    path = compressed[0][kind]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError) as error:
        list(codec.read_records(path))
    assert str(error.value).startswith(f"{path}: its {kind} data breaks off in record ")
    assert str(error.value).endswith("The file is truncated or corrupt: re-download or regenerate it.")


def test_compression_of_a_plain_file_even_a_damaged_one_is_none(val_file):
    assert codec.compression(val_file) == ""
    damage(val_file, 0, b"\x09")  # a bad length checksum: still plain, and reading it says so
    assert codec.compression(val_file) == ""


def test_records_lists_every_visible_file_under_a_folder_sorted(tmp_path):
    from nbkit.inputs import records

    for name in ("b/01.tfrec", "a/00.tfrec", "a/.partial-02.tfrec", "a/notes.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert records.list_files(str(tmp_path)) == [f"{tmp_path}/a/00.tfrec", f"{tmp_path}/b/01.tfrec"]
    with pytest.raises(DataError, match=r"No \*\.csv files under"):
        records.list_files(str(tmp_path), ".csv")
    with pytest.raises(DataError, match="nowhere: no such file or folder. Check the path"):
        records.list_files(str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="00.tfrec: not a folder"):
        records.list_files(f"{tmp_path}/a/00.tfrec")


def test_a_split_tells_tensorflow_its_compression_and_refuses_files_compressed_differently(compressed):
    from nbkit.images import checks

    paths = compressed[0]
    split = checks.Split("train", [str(paths["GZIP"])] * 2, 24, [])
    assert split.compression == "GZIP"
    mixed = checks.Split("train", [str(paths["GZIP"]), str(paths[""])], 24, [])
    with pytest.raises(DataError, match=r"compressed in different ways \(GZIP-12.tfrec: GZIP, plain-12.tfrec: none\)"):
        print(mixed.compression)
