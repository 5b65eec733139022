"""The competition TFRecord format: sample generation, writing, finding, counting and reading back."""

import numpy as np
import pytest

from nbkit import data
from nbkit.errors import DataError


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    return data.make_sample(root, image_sizes=(64, 96), train_per_class=3, val_per_class=1, test_images=7, num_classes=5)


def test_there_are_104_distinct_classes():
    assert len(data.CLASSES) == 104 == len(set(data.CLASSES))


def test_sample_has_the_competition_layout_and_names(sample):
    for size in (64, 96):
        for split in data.SPLITS:
            folder = sample / f"tfrecords-jpeg-{size}x{size}" / split
            names = sorted(p.name for p in folder.iterdir())
            assert names and all(data.COUNT_IN_NAME.search(n) for n in names), names
            assert names[0].startswith(f"00-{size}x{size}-")


def test_counts_from_names_equal_records_read(sample):
    for split, labeled in (("train", True), ("val", True), ("test", False)):
        files = data.find_files(sample, 64, split)
        assert data.count_items(files) == len(data.read_records(files, labeled=labeled))
    assert data.count_items(data.find_files(sample, 64, "train")) == 15


def test_round_trip_keeps_images_and_labels(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    images = [data.sample_image(label, 32, rng) for label in range(6)]
    records = [{"image": tf.io.encode_png(img).numpy(), "class": i} for i, img in enumerate(images)]  # lossless
    written = data.write_tfrecords(records, tmp_path, 32, "train", shards=4)
    assert [p.name for p in written] == ["00-32x32-2.tfrec", "01-32x32-2.tfrec", "02-32x32-2.tfrec"]
    back = data.read_records(data.find_files(tmp_path, 32, "train"), labeled=True)
    assert [r["class"] for r in back] == list(range(6))
    for original, record in zip(images, back):
        assert np.array_equal(tf.io.decode_image(record["image"]).numpy(), original)


def test_test_split_keeps_ids_in_order(tmp_path):
    records = [{"image": b"jpeg", "id": f"id{i:03d}"} for i in range(10)]
    data.write_tfrecords(records, tmp_path, 32, "test", shards=3)
    back = data.read_records(data.find_files(tmp_path, 32, "test"), labeled=False)
    assert [r["id"] for r in back] == [f"id{i:03d}" for i in range(10)]


def test_sample_is_deterministic_and_the_same_at_every_size(sample, tmp_path):
    again = data.make_sample(tmp_path, image_sizes=(64,), train_per_class=3, val_per_class=1, test_images=7, num_classes=5)
    first = data.read_records(data.find_files(sample, 64, "train"), labeled=True)
    second = data.read_records(data.find_files(again, 64, "train"), labeled=True)
    assert [r["image"] for r in first] == [r["image"] for r in second]
    larger = data.read_records(data.find_files(sample, 96, "test"), labeled=False)
    assert [r["id"] for r in larger] == [r["id"] for r in data.read_records(data.find_files(sample, 64, "test"), False)]


def test_shard_count_rule():
    assert data.shard_count(total_bytes=5 * 2**20, num_records=832) == 16  # small: enough files to read in parallel
    assert data.shard_count(total_bytes=5 * 2**30, num_records=50000) == 52  # large: ~100 MB per file
    assert data.shard_count(total_bytes=1000, num_records=3) == 3  # never more files than records


def test_missing_root_and_missing_size_are_clear(sample, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        data.find_files(tmp_path / "nowhere", 192, "train")
    with pytest.raises(DataError, match=r"No \.tfrec files .*tfrecords-jpeg-64x64"):
        data.find_files(sample, 512, "train")
    with pytest.raises(DataError, match="split='training'"):
        data.find_files(sample, 64, "training")


def test_name_without_count_is_an_error():
    with pytest.raises(DataError, match="train.tfrec"):
        data.count_items(["a/00-192x192-12.tfrec", "a/train.tfrec"])


def test_truncated_file_names_the_file(sample, tmp_path):
    files = data.find_files(sample, 64, "train")
    broken = tmp_path / "00-64x64-3.tfrec"
    broken.write_bytes(open(files[0], "rb").read()[:-7])  # cut the last record short
    with pytest.raises(DataError, match="00-64x64-3.tfrec"):
        data.read_records([str(broken)], labeled=True)


def test_records_missing_a_feature_name_the_file(tmp_path):
    data.write_tfrecords([{"image": b"x", "id": "a"}], tmp_path, 32, "test")
    files = data.find_files(tmp_path, 32, "test")
    with pytest.raises(DataError, match="00-32x32-1.tfrec"):
        data.read_records(files, labeled=True)  # test records have no "class"
