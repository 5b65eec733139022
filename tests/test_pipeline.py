"""The training stream (nbkit.images.pipeline) gives exactly the images and labels of the simple
readings, flipped or not; it is the same cached or not, resumes at any epoch, follows its seed alone;
each replica's share comes from its own files, so a process feeding some replicas gets exactly its
part of the global batch. And the ordered inputs of validation and prediction (nbkit.images.ordered)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, record_items

from nbkit import batching
from nbkit.errors import DataError
from nbkit.images import decode, layout, ordered, pipeline
from nbkit.images import sample as flower_sample

sys.path.insert(0, str(REPO / "bench"))
import input_pipeline as bench  # noqa: E402  (the starter-style pipeline the benchmark compares with)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    # 20 training images in 16 files; 5 validation images.
    root = tmp_path_factory.mktemp("flowers")
    return flower_sample.make_sample(root, 5, image_sizes=(64,), train_per_class=4, val_per_class=1, test_images=3)


def plan(per_replica, replicas, steps, local=()):
    return batching.Plan(per_replica, replicas, steps, 1, local_replicas=local)


def train(files, per_replica, steps, *, replicas=1, cached=True, monkeypatch=None, **options):
    """`pipeline.train_batches`, with the decoded cache or (monkeypatching the memory rule) without."""
    if not cached:
        monkeypatch.setattr(pipeline, "fits_in_memory", lambda num_bytes: False)
    local = options.pop("local", ())
    return pipeline.train_batches(
        files, 64, plan(per_replica, replicas, steps, local), options.pop("seed", 3), **options
    )


def batches(dataset, count):
    found = [(x.numpy(), y.numpy()) for x, y in dataset.take(count)]
    return np.concatenate([x for x, _ in found]), np.concatenate([y for _, y in found])


def unflipped(images):
    """Each image, or its mirror image, whichever sorts first: the same for an image and its flip."""
    return [min(image.tobytes(), image[:, ::-1].tobytes()) for image in images]


def as_multiset(images, labels):
    return sorted(zip(labels.tolist(), unflipped(images)))


def plain_decode(files, size):
    """The simplest reading: one record at a time, in file order, `decode_image` on each."""
    import tensorflow as tf

    items = record_items(files, labeled=True)
    images = np.stack([decode.decode_image(tf.constant(jpeg), size).numpy() for jpeg, _ in items])
    return images, np.array([label for _, label in items])


def flipped_share(images, reference):
    """The share of `images` that equal their reference's mirror (matched by content)."""
    originals = {image.tobytes() for image in reference}
    return np.mean([image.tobytes() not in originals for image in images])


@pytest.mark.parametrize("cached", [False, True])
def test_an_epoch_is_every_image_once_as_the_starter_pipeline_reads_them(sample, cached, monkeypatch):
    files = layout.find_files(sample, 64, "train")
    images, labels = batches(train(files, 5, 4, cached=cached, monkeypatch=monkeypatch), 4)
    starter = [(x.numpy(), y.numpy()) for x, y in bench.starter_records(files, 64, 64)]
    starter_images = np.stack([np.round(x * 255).astype(np.uint8) for x, _ in starter])  # it divides by 255
    assert images.dtype == np.uint8 and images.shape == (20, 64, 64, 3)
    assert as_multiset(images, labels) == as_multiset(starter_images, np.array([y for _, y in starter]))
    reference, _ = plain_decode(files, 64)
    assert 0.2 <= flipped_share(images, reference) <= 0.8  # flips, each label kept with its image


def test_cached_and_uncached_give_the_same_batches_every_epoch(sample, monkeypatch):
    files = layout.find_files(sample, 64, "train")
    cached = batches(train(files, 4, 5, seed=7), 15)
    uncached = batches(train(files, 4, 5, cached=False, monkeypatch=monkeypatch, seed=7), 15)
    assert np.array_equal(cached[0], uncached[0]) and np.array_equal(cached[1], uncached[1])
    epochs = cached[0].reshape(3, 20, -1)
    assert not np.array_equal(epochs[0], epochs[1])  # a new order and new flips every epoch


def test_a_resumed_run_sees_what_the_uninterrupted_run_saw_and_another_seed_differs(sample):
    files = layout.find_files(sample, 64, "train")
    whole = batches(train(files, 4, 5, seed=7), 15)
    resumed = batches(train(files, 4, 5, seed=7, first_epoch=2), 5)
    assert np.array_equal(whole[0][40:], resumed[0]) and np.array_equal(whole[1][40:], resumed[1])
    assert not np.array_equal(whole[0][:20], batches(train(files, 4, 5, seed=8), 5)[0])


@pytest.mark.parametrize("cached", [True, False])
def test_each_replica_reads_its_own_files_and_a_process_gets_its_part_of_the_global_batch(
    sample, tmp_path, monkeypatch, cached
):
    files = layout.find_files(sample, 64, "train")  # 10 files of 2 records
    shares = pipeline.replica_files(files, 4)
    assert sorted(f for share in shares for f in share) == sorted(files)  # each file to one replica
    assert max(map(layout.count_items, shares)) - min(map(layout.count_items, shares)) <= 2
    options = {"replicas": 4, "seed": 5, "cached": cached, "monkeypatch": monkeypatch}
    everything = batches(train(files, 2, 3, **options), 6)  # one process, 4 replicas
    # Each process as a pod host that holds only its replicas' files: reading another's would fail.
    own = []
    for local in ((0, 1), (2, 3)):
        host = tmp_path / f"host{local[0]}"
        host.mkdir()
        for replica in local:
            for name in shares[replica]:
                (host / Path(name).name).symlink_to(name)
        names = [str(host / Path(name).name) for name in files]  # the whole list, as every host is given it
        own.append(batches(train(names, 2, 3, local=local, **options), 6))
    first, second = own
    for step in range(6):
        rows = slice(8 * step, 8 * step + 8)
        local = slice(4 * step, 4 * step + 4)
        assert np.array_equal(everything[0][rows], np.concatenate([first[0][local], second[0][local]]))
        assert np.array_equal(everything[1][rows], np.concatenate([first[1][local], second[1][local]]))
    with pytest.raises(DataError, match="10 training files for 16 replicas: each replica reads its own files"):
        pipeline.replica_files(files, 16)


SEEDED_BATCHES = """
    import hashlib
    import keras
    from nbkit import batching
    from nbkit.images import layout, pipeline

    for global_seed in (None, 0, 5):  # no global seed, then two: none may change the order
        if global_seed is not None:
            keras.utils.set_random_seed(global_seed)
        if not {cached}:
            pipeline.fits_in_memory = lambda num_bytes: False
        files = layout.find_files({root!r}, 64, "train")
        dataset = pipeline.train_batches(files, 64, batching.Plan(5, 1, 4, 1), seed=3, recipe="standard")
        print(hashlib.sha256(b"".join(x.numpy().tobytes() + y.numpy().tobytes() for x, y in dataset.take(6))).hexdigest())
"""


@pytest.mark.parametrize("cached", [False, True])
def test_the_order_and_augmentation_follow_the_seed_not_a_global_seed(sample, run_python, cached):
    digests = run_python(SEEDED_BATCHES.format(root=str(sample), cached=cached)).stdout.split()[-3:]
    assert len(digests) == 3 and len(set(digests)) == 1, digests


def test_gzip_records_are_read_like_plain_ones(sample, tmp_path):
    import tensorflow as tf

    for split in ("train", "val"):
        folder = tmp_path / "tfrecords-jpeg-64x64" / split
        folder.mkdir(parents=True)
        for path in layout.find_files(sample, 64, split):
            with tf.io.TFRecordWriter(str(folder / path.rsplit("/", 1)[1]), options="GZIP") as out:
                for raw in tf.data.TFRecordDataset(path):
                    out.write(raw.numpy())
    for split, read in (
        ("train", lambda f: batches(train(f, 4, 5), 5)),
        ("val", lambda f: batches(ordered.val_batches(f, 64, 5), 1)),
    ):
        plain, gzipped = read(layout.find_files(sample, 64, split)), read(layout.find_files(tmp_path, 64, split))
        assert np.array_equal(plain[0], gzipped[0]) and np.array_equal(plain[1], gzipped[1]), split


def test_val_batches_are_in_file_order_with_known_length(sample):
    files = layout.find_files(sample, 64, "val")  # 5 images
    val = ordered.val_batches(files, 64, global_batch=2)
    assert len(val) == 2  # whole batches only, length known to Keras
    labels = np.concatenate([y.numpy() for _, y in val])
    assert labels.tolist() == [label for _, label in record_items(files, labeled=True)][:4]


def test_image_batches_pad_and_keep_file_order_with_the_keys(tmp_path):
    import tensorflow as tf

    from nbkit.images import writer

    # Three files: each image's brightness encodes its id, so pairing and order can be checked.
    records = [
        {"image": tf.io.encode_jpeg(np.full((16, 16, 3), 20 * i, np.uint8)).numpy(), "id": str(i)} for i in range(10)
    ]
    writer.write_split(records, tmp_path, 16, "test", shards=3)
    files = layout.find_files(tmp_path, 16, "test")
    ids = ordered.keys_in_order(files, labeled=False)
    images = ordered.image_batches(files, 16, labeled=False, global_batch=4, count=len(ids))
    found = [batch.numpy() for batch in images]
    assert len(found) == 3 and all(b.shape == (4, 16, 16, 3) for b in found)
    assert ids.tolist() == [str(i) for i in range(10)]  # file order
    pixels = np.concatenate(found)
    assert [round(float(p.mean()) / 20) for p in pixels[:10]] == list(range(10))
    assert not pixels[10:].any()  # the padding is blank and comes last
