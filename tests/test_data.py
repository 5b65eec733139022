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


def test_train_dataset_gives_full_uint8_batches(sample):
    images, labels = next(iter(data.train_dataset(data.find_files(sample, 64, "train"), 64, global_batch=4)))
    assert tuple(images.shape) == (4, 64, 64, 3) and images.dtype.name == "uint8"
    assert set(labels.numpy()) <= set(range(5))


def epochs_of(dataset, epochs, steps):
    batches = [(x.numpy(), y.numpy()) for x, y in dataset.take(epochs * steps)]
    return [batches[e * steps:(e + 1) * steps] for e in range(epochs)]


def test_seeded_train_dataset_repeats_exactly_and_resumes_at_any_epoch(sample):
    files = data.find_files(sample, 64, "train")  # 15 images: 3 batches of 4 per epoch
    steps = 3
    whole = epochs_of(data.train_dataset(files, 64, 4, seed=5), 4, steps)
    again = epochs_of(data.train_dataset(files, 64, 4, seed=5), 4, steps)
    resumed = epochs_of(data.train_dataset(files, 64, 4, seed=5, first_epoch=2), 2, steps)
    for a, b in zip(sum(whole, []), sum(again, [])):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    for a, b in zip(sum(whole[2:], []), sum(resumed, [])):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # Epochs differ from each other (new order and augmentation), and another seed differs.
    assert not np.array_equal(whole[0][0][0], whole[1][0][0])
    other = epochs_of(data.train_dataset(files, 64, 4, seed=6), 1, steps)
    assert not np.array_equal(whole[0][0][0], other[0][0][0])


def test_batches_per_epoch_cuts_each_epoch_so_the_next_starts_on_time(sample):
    files = data.find_files(sample, 64, "train")  # 3 full batches of 4 per pass
    whole = epochs_of(data.train_dataset(files, 64, 4, seed=5, batches_per_epoch=2), 2, 2)
    second = epochs_of(data.train_dataset(files, 64, 4, seed=5, first_epoch=1, batches_per_epoch=2), 1, 2)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(whole[1], second[0]))


def test_an_epoch_is_one_pass_over_the_training_images(sample):
    files = data.find_files(sample, 64, "train")
    labels = [r["class"] for r in data.read_records(files, labeled=True)]
    first_epoch = epochs_of(data.train_dataset(files, 64, 5, seed=1, augmented=False), 1, 3)[0]
    assert sorted(np.concatenate([y for _, y in first_epoch]).tolist()) == sorted(labels)


def test_fingerprint_changes_with_the_files(sample, tmp_path):
    import shutil

    files = data.find_files(sample, 64, "train")
    assert data.fingerprint(files) == data.fingerprint(list(reversed(files)))  # order does not matter
    copies = [shutil.copy(name, tmp_path) for name in files]
    assert data.fingerprint(copies) == data.fingerprint(files)  # names and contents, not folders
    with open(copies[0], "r+b") as f:
        f.seek(-3, 2)
        f.write(b"xyz")
    assert data.fingerprint(copies) != data.fingerprint(files)
    assert data.fingerprint(copies[1:]) != data.fingerprint(files)
    with pytest.raises(DataError, match="does not exist"):
        data.fingerprint([str(tmp_path / "gone-3.tfrec")])


def test_checked_splits_reads_all_and_catches_names_that_lie(sample, tmp_path):
    import shutil

    files, counts = data.checked_splits(sample, 64)
    assert counts == {"train": 15, "val": 5, "test": 7}
    assert files["test"] == data.find_files(sample, 64, "test")
    lying = data.split_folder(tmp_path, 64, "test")
    lying.mkdir(parents=True)
    shutil.copy(files["test"][0], lying / "00-64x64-99.tfrec")
    with pytest.raises(DataError, match="test file names promise 99 records"):
        data.checked_splits(tmp_path, 64, splits=("test",))


def test_val_dataset_is_ordered_with_known_length(sample):
    files = data.find_files(sample, 64, "val")  # 5 images
    val = data.val_dataset(files, 64, global_batch=2)
    assert len(val) == 2  # whole batches only, length known to Keras
    labels = np.concatenate([y.numpy() for _, y in val])
    expected = [r["class"] for r in data.read_records(files, labeled=True)][:4]
    assert labels.tolist() == expected


def test_images_in_order_pads_and_keeps_ids(sample):
    files = data.find_files(sample, 64, "test")  # 7 images
    images, ids = data.images_in_order(files, 64, labeled=False, global_batch=4)
    batches = list(images)
    assert len(batches) == 2 and all(tuple(b.shape) == (4, 64, 64, 3) for b in batches)
    assert ids.tolist() == [r["id"] for r in data.read_records(files, labeled=False)]
    assert not batches[-1].numpy()[3:].any()  # the padding is blank and comes last


def test_check_files_counts_and_catches_bad_files(sample, tmp_path):
    files = data.find_files(sample, 64, "train")
    assert data.check_files(files, 64, labeled=True) == data.count_items(files)
    broken = tmp_path / "00-64x64-3.tfrec"
    broken.write_bytes(open(files[0], "rb").read()[:-7])
    with pytest.raises(DataError, match="00-64x64-3.tfrec is truncated or corrupt"):
        data.check_files([str(broken)], 64, labeled=True)
    with pytest.raises(DataError, match="images are 64x64, not 192x192.*IMAGE_SIZE"):
        data.check_files(files, 192, labeled=True)
    with pytest.raises(DataError, match="needs image \\+ class"):
        data.check_files(data.find_files(sample, 64, "test"), 64, labeled=True)


def test_resolve_root_explicit_missing_and_sample(tmp_path, sample):
    assert data.resolve_root(str(sample)).path == str(sample)
    with pytest.raises(DataError, match="DATA_ROOT=.*does not exist"):
        data.resolve_root(str(tmp_path / "nowhere"))
    assert data.resolve_root("gs://bucket/flowers").path == "gs://bucket/flowers"


def test_resolve_root_generates_the_sample_once(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(data, "make_sample", lambda root: made.append(root) or (root / "tfrecords-jpeg-192x192" / "test").mkdir(parents=True))
    first = data.resolve_root("auto", sample_dir=tmp_path / "s")
    second = data.resolve_root("sample", sample_dir=tmp_path / "s")
    assert made == [tmp_path / "s"] and first.path == second.path == str(tmp_path / "s")
    assert "generated sample" in first.reason and first.reason == second.reason


def kaggle_environment(input_dir):
    from nbkit import env

    return env.Environment("kaggle", input_dir, input_dir.parent / "working", tpu_vm=True, tpu_address=None, internet=False)


def test_resolve_root_on_kaggle_uses_the_attached_input(tmp_path):
    (tmp_path / "input" / data.COMPETITION).mkdir(parents=True)
    found = data.resolve_root("auto", environment=kaggle_environment(tmp_path / "input"))
    assert found.path == str(tmp_path / "input" / data.COMPETITION) and "attached" in found.reason


def test_resolve_root_on_kaggle_without_input_says_what_to_attach(tmp_path):
    with pytest.raises(DataError, match="Add Input"):
        data.resolve_root("auto", environment=kaggle_environment(tmp_path / "input"))


def test_resolve_root_for_a_remote_tpu_asks_kaggle_for_the_gcs_path(tmp_path, monkeypatch):
    import sys
    import types

    fake = types.ModuleType("kaggle_datasets")
    fake.KaggleDatasets = lambda: types.SimpleNamespace(get_gcs_path=lambda slug: f"gs://kds-fake/{slug}")
    monkeypatch.setitem(sys.modules, "kaggle_datasets", fake)
    found = data.resolve_root("auto", needs_gcs=True, environment=kaggle_environment(tmp_path / "input"))
    assert found.path == f"gs://kds-fake/{data.COMPETITION}" and "GCS" in found.reason


def test_images_in_order_keeps_each_image_with_its_key(tmp_path):
    import tensorflow as tf

    # Two files of five records each: the parallel, ordered read interleaves them.
    records = [{"image": tf.io.encode_jpeg(np.full((16, 16, 3), 20 * i, np.uint8)).numpy(), "id": str(i)} for i in range(10)]
    data.write_tfrecords(records, tmp_path, 16, "test", shards=2)
    images, ids = data.images_in_order(data.find_files(tmp_path, 16, "test"), 16, labeled=False, global_batch=4)
    pixels = np.concatenate([batch.numpy() for batch in images])[: len(ids)]
    assert sorted(ids.tolist(), key=int) == [str(i) for i in range(10)]
    assert [round(float(p.mean()) / 20) for p in pixels] == [int(i) for i in ids]


def test_written_files_are_byte_identical_in_every_process(tmp_path, run_python):
    # Protobuf serializes the feature map in an order that changes from process to process; the
    # writer sorts the keys, so the same records give the same bytes (and the same fingerprint).
    write = ("from nbkit import data; data.write_tfrecords([{{'image': b'jpeg-bytes', 'class': 3}}], {root!r}, 32, 'train')")
    roots = [tmp_path / str(i) for i in range(4)]  # unsorted order comes out in about half the processes
    for root in roots:
        run_python(write.format(root=str(root)))
    files = [data.find_files(root, 32, "train")[0] for root in roots]
    contents = {open(name, "rb").read() for name in files}
    assert len(contents) == 1
    raw = contents.pop()
    assert raw.index(b"class") < raw.index(b"image")  # sorted keys
