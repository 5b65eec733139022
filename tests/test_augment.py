"""One augmentation for both of notebook 02's stacks (nbkit.images.augment): the tf.data pipeline and
its NumPy twin draw the same for the same image in the same epoch for the same seed: identical flips,
the standard set's warp and colour equal within rounding; and the test-time views likewise. (Notebook
04 augments with torchvision in its own cells.)"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_data

from nbkit import batching
from nbkit.images import augment, layout, ordered, pipeline, sample


def test_draws_are_balanced_unrelated_to_position_and_the_same_on_numpy_and_tensorflow():
    import tensorflow as tf

    positions = np.arange(20_000, dtype=np.int64)
    flips = augment.flips(7, 3, positions)
    assert 0.48 < flips.mean() < 0.52
    assert 0.45 < (flips[1:] == flips[:-1]).mean() < 0.55  # neighbours agree about half the time
    assert 0.45 < (flips == augment.flips(7, 4, positions)).mean() < 0.55  # a new epoch draws anew
    assert 0.45 < (flips == augment.flips(8, 3, positions)).mean() < 0.55  # so does another seed
    on_tf = augment.flips(7, tf.constant(3, tf.int64), tf.constant(positions)).numpy()
    assert np.array_equal(flips, on_tf)
    assert [augment.flips(7, 3, int(p)) for p in positions[:50]] == flips[:50].tolist()  # plain ints too
    drawn = augment.draws(7, 3, positions, lambda value: value / augment.PRIME)
    for name, (low, high) in augment.RANGES.items():
        assert low <= drawn[name].min() and drawn[name].max() < high, name
        assert abs(drawn[name].mean() - (low + high) / 2) < 0.02 * (high - low), name
    assert abs(np.corrcoef(drawn["zoom"], drawn["degrees"])[0, 1]) < 0.05  # each from its own stream


@pytest.fixture(scope="module")
def asymmetric(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    return sample.make_sample(root, 6, image_sizes=(64,), train_per_class=4, val_per_class=1, test_images=2)


def flips_seen(images, originals):
    """For each image, (its position in file order, flipped?) by nearest content match."""
    seen = []
    for image in images.astype(np.int32):
        distances = [(np.abs(image - o).mean(), p, False) for p, o in enumerate(originals)]
        distances += [(np.abs(image - o[:, ::-1]).mean(), p, True) for p, o in enumerate(originals)]
        best = min(distances)
        assert best[0] < 3, "an image matches no record"
        seen.append(best[1:])
    return dict(seen)


@pytest.mark.parametrize("epoch", [0, 2])
def test_the_pipeline_flips_the_images_augment_flips_says(asymmetric, epoch):
    import tensorflow as tf

    files = layout.find_files(asymmetric, 64, "train")
    items = check_data(asymmetric, 64, 6, names=["train"], keep_items=True)["train"].items
    originals = [tf.io.decode_jpeg(jpeg).numpy().astype(np.int32) for jpeg, _ in items]
    plan = batching.Plan(per_replica_batch=4, replicas=1, steps_per_epoch=6, steps_per_execution=1)
    dataset = pipeline.train_batches(files, 64, plan, 11, first_epoch=epoch)
    images = np.concatenate([x.numpy() for x, _ in dataset.take(6)])
    keras_flips = flips_seen(images, originals)
    assert len(keras_flips) == len(items) == 24  # every record seen once in the epoch
    assert keras_flips == {p: bool(augment.flips(11, epoch, p)) for p in range(len(items))}
    assert 0 < sum(keras_flips.values()) < len(items)


def test_the_standard_set_is_the_same_numbers_and_pixels_in_both_stacks(asymmetric):
    import tensorflow as tf

    items = check_data(asymmetric, 64, 6, names=["train"], keep_items=True)["train"].items
    originals = np.stack([tf.io.decode_jpeg(jpeg).numpy() for jpeg, _ in items])
    positions = np.arange(len(items), dtype=np.int64)
    by_tensorflow = pipeline._augmented(tf.constant(originals), tf.constant(2, tf.int64), positions, 5, "standard")
    by_numpy = np.stack([augment.apply(image, 5, 2, p, "standard") for p, image in enumerate(originals)])
    difference = np.abs(by_tensorflow.numpy().astype(int) - by_numpy)
    assert difference.max() <= 1 and difference.mean() < 0.01  # float32 rounding, nothing more
    assert np.abs(by_numpy.astype(int) - originals).mean() > 10  # and it did change the images


def test_test_time_views_are_the_same_in_both_stacks_and_the_first_is_the_image(asymmetric):
    import tensorflow as tf

    items = check_data(asymmetric, 64, 6, names=["train"], keep_items=True)["train"].items
    originals = np.stack([tf.io.decode_jpeg(jpeg).numpy() for jpeg, _ in items[:6]])
    for index, name in enumerate(augment.VIEWS):
        by_tensorflow = ordered.view(tf.constant(originals), index).numpy()
        by_numpy = np.stack([augment.view(image, index) for image in originals])
        assert np.abs(by_tensorflow.astype(int) - by_numpy).max() <= 1, name
    assert np.array_equal(augment.view(originals[0], 0), originals[0])
    assert np.array_equal(augment.view(originals[0], 1), originals[0][:, ::-1])
