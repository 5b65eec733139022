"""The tf.data input of the Keras flowers notebooks: fast training batches, ordered validation and
prediction batches. Images stay uint8 (the model rescales on the accelerator: a quarter of the bytes).

Training (see bench/): records are shuffled and batched while still serialized (small), then each
batch is parsed in one call and its images decoded (and flipped) one by one while in the CPU cache,
batches in parallel. When the decoded images fit in memory they are decoded once and kept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import tfrecord
from nbkit.env import available_memory
from nbkit.errors import DataError
from nbkit.images import augment, layout


def _features(labeled: bool) -> dict[str, Any]:
    """The tf.Example spec: `image` + `class` (labeled) or `image` + `id` (test)."""
    import tensorflow as tf

    key = {"class": tf.io.FixedLenFeature([], tf.int64)} if labeled else {"id": tf.io.FixedLenFeature([], tf.string)}
    return {"image": tf.io.FixedLenFeature([], tf.string), **key}


def decode_image(jpeg: Any, image_size: int) -> Any:
    """JPEG bytes to a uint8 [image_size, image_size, 3] tensor; the explicit shape is what TPUs need."""
    import tensorflow as tf

    return tf.reshape(tf.io.decode_jpeg(jpeg, channels=3), [image_size, image_size, 3])


def _flipped(image: Any, flip: Any) -> Any:
    # Per image, under a condition: a copy only for the flipped half. (tf.where over the batch
    # copies everything and, broadcast, was 7x slower than the whole cached pipeline.)
    import tensorflow as tf

    return tf.cond(flip, lambda: tf.reverse(image, [1]), lambda: image)


def decode_batch(serialized: Any, image_size: int, labeled: bool, flips: Any = None) -> tuple[Any, Any]:
    """A batch of serialized records to (uint8 images [n, size, size, 3], labels or ids).

    One vectorized parse per batch; each image is decoded (and flipped where `flips` says) while it
    is still in the CPU cache.
    """
    import tensorflow as tf

    examples = tf.io.parse_example(serialized, _features(labeled))
    jpegs = examples["image"]
    flips = tf.zeros_like(jpegs, tf.bool) if flips is None else flips

    def decode(item: Any) -> Any:
        jpeg, flip = item
        return _flipped(decode_image(jpeg, image_size), flip)

    spec = tf.TensorSpec([image_size, image_size, 3], tf.uint8)
    images = tf.map_fn(decode, (jpegs, flips), fn_output_signature=spec)
    return images, examples["class" if labeled else "id"]


def flip_images(images: Any, flips: Any) -> Any:
    """Flip left-right the images of a uint8 batch where `flips` (one bool per image) says."""
    import tensorflow as tf

    spec = tf.TensorSpec(images.shape[1:], images.dtype)
    return tf.map_fn(lambda item: _flipped(*item), (images, flips), fn_output_signature=spec)


def fits_in_memory(num_bytes: int, share: float = 0.25) -> bool:
    """True when `num_bytes` is at most `share` of the memory available now (Linux; else False)."""
    available = available_memory()
    return available is not None and num_bytes <= share * available


def compression(files: Sequence[str]) -> str:
    """The compression of `files` ("", "GZIP" or "ZLIB"), which tf.data must be told; one for all of them."""
    kinds = {name: tfrecord.compression(name) for name in files}
    if len(set(kinds.values())) > 1:
        shown = ", ".join(f"{Path(name).name}: {kind or 'none'}" for name, kind in kinds.items())
        raise DataError(f"The files of one split are compressed in different ways ({shown}): write them all alike.")
    return next(iter(kinds.values()), "")


def positioned_records(files: Sequence[str], ordered: bool) -> Any:
    """(position in file order, serialized record) of `files`, several files read at once. The
    position comes from the counts in the file names, whatever order the reads interleave in."""
    import numpy as np
    import tensorflow as tf

    counts = [layout.count_in_name(name) for name in files]
    starts = np.cumsum([0] + counts[:-1]).astype(np.int64)
    kind = compression(files)
    return tf.data.Dataset.from_tensor_slices((list(files), starts)).interleave(
        lambda name, start: tf.data.TFRecordDataset(name, compression_type=kind).enumerate(start),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=ordered,  # training reads files as they come; seeded runs keep one order
    )


def in_file_order(files: Sequence[str]) -> Any:
    """The serialized records of `files`, one file after the other (validation, prediction)."""
    import tensorflow as tf

    kind = compression(files)
    return tf.data.Dataset.from_tensor_slices(list(files)).flat_map(
        lambda name: tf.data.TFRecordDataset(name, compression_type=kind)
    )


def train_batches(
    files: Sequence[str],
    image_size: int,
    plan: Any,
    seed: int | None = None,
    first_epoch: int = 0,
    shuffle_buffer: int = 2048,
) -> Any:
    """Shuffled, augmented (`augment.flips`) (image uint8, label) batches of `plan.global_batch`,
    `plan.steps_per_epoch` of them per epoch (so data epochs and Keras epochs stay aligned), epoch
    after epoch without end.

    When the decoded images take at most a quarter of the free memory, every image is decoded once,
    here, and kept in memory; epochs then only shuffle and flip them.

    With a `seed`, the batches of epoch e depend only on (seed, e), so a run resumed at `first_epoch`
    sees exactly what an uninterrupted run saw there. Without one, every call shuffles differently.
    """
    import tensorflow as tf

    repeatable = seed is not None
    seed = seed if repeatable else random.SystemRandom().randrange(2**31)
    global_batch, batches_per_epoch = plan.global_batch, plan.steps_per_epoch
    count = layout.count_items(files)
    passes = -(-global_batch // max(1, count))  # an epoch needs at least one full batch
    cache = fits_in_memory(count * image_size * image_size * 3)
    records = positioned_records(files, ordered=repeatable)
    if cache:
        records = _decoded_cache(records, image_size)

    def epoch(index: Any) -> Any:
        # The order must follow `seed` alone, not a global seed set by keras.utils.set_random_seed;
        # a global seed of 0 would even break the trace (TF compares (0, tensor) == (0, 0)).
        tf.compat.v1.get_default_graph().seed = None
        shuffled = records.repeat(passes).shuffle(shuffle_buffer, seed=seed * 1_000_003 + index)
        # Full batches only: every replica gets the same per-replica batch, shapes stay static.
        batches = shuffled.batch(global_batch, drop_remainder=True).take(batches_per_epoch)
        return batches.map(lambda positions, batch: (index, positions, batch))

    def finish(epoch_index: Any, positions: Any, batch: Any) -> Any:
        flips = augment.flips(seed, epoch_index, positions)
        if not cache:
            return decode_batch(batch, image_size, True, flips)
        images, labels = batch
        return flip_images(images, flips), labels

    stream = tf.data.Dataset.range(first_epoch, 2**62).flat_map(epoch)
    return stream.map(finish, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _decoded_cache(records: Any, image_size: int) -> Any:
    """(position, (image, label)) of every record, decoded once into memory, in the order read."""
    import tensorflow as tf

    def decode(positions: Any, serialized: Any) -> Any:
        return positions, decode_batch(serialized, image_size, True)

    decoded = records.batch(256).map(decode, num_parallel_calls=tf.data.AUTOTUNE).unbatch().cache()
    # Fill the cache now, in one pass: an epoch cut short (batches_per_epoch) would leave it
    # incomplete, and tf.data then drops it and decodes again every epoch.
    decoded.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
    return decoded


def val_batches(files: Sequence[str], image_size: int, global_batch: int) -> Any:
    """(image, label) batches in file order, cached in memory after the first epoch (full batches only)."""
    import tensorflow as tf

    batches = in_file_order(files).batch(global_batch, drop_remainder=True)
    dataset = batches.map(lambda batch: decode_batch(batch, image_size, True), num_parallel_calls=tf.data.AUTOTUNE)
    # The batch count is known from the file names; telling tf.data lets Keras stop without a warning.
    known = tf.data.experimental.assert_cardinality(layout.count_items(files) // global_batch)
    return dataset.apply(known).cache().prefetch(tf.data.AUTOTUNE)


def keys_in_order(files: Sequence[str], labeled: bool) -> Any:
    """The labels (int64) or ids (str) of `files`, in file order, as a NumPy array."""
    import numpy as np
    import tensorflow as tf

    key = "class" if labeled else "id"
    spec = {key: _features(labeled)[key]}
    keys = in_file_order(files).map(
        lambda raw: tf.io.parse_single_example(raw, spec)[key], num_parallel_calls=tf.data.AUTOTUNE
    )
    found = list(keys.as_numpy_iterator())
    return np.array(found if labeled else [k.decode() for k in found])


# The views test-time augmentation averages over, in this order (TTA=n takes the first n).
VIEWS = ("as is", "flipped", "zoomed", "flipped and zoomed")
ZOOM = 0.875  # the zoomed views: the central 87.5%, scaled back up


def view(images: Any, index: int) -> Any:
    """View `index` of VIEWS of a uint8 batch [n, size, size, 3] (0: the batch itself)."""
    import tensorflow as tf

    name = VIEWS[index]
    if "zoomed" in name:
        size = images.shape[1]
        cropped = tf.image.central_crop(images, ZOOM)
        images = tf.saturate_cast(tf.round(tf.image.resize(cropped, [size, size], method="bilinear")), tf.uint8)
    if "flipped" in name:
        images = tf.reverse(images, [2])
    return images


def images_in_order(
    files: Sequence[str], image_size: int, labeled: bool, global_batch: int, view_index: int = 0
) -> tuple[Any, Any]:
    """Every image of `files` in file order (as view `view_index` of VIEWS), padded to whole global
    batches, and their labels or ids.

    Returns (dataset of image batches, numpy array of labels or ids). Predict on the dataset and
    keep the first len(labels) rows: padding lets every replica get a full batch.
    """
    import tensorflow as tf

    keys = keys_in_order(files, labeled)

    def padded(batch: Any) -> Any:
        images, _ = decode_batch(batch, image_size, labeled)
        images = view(images, view_index) if view_index else images
        images = tf.pad(images, [[0, global_batch - tf.shape(images)[0]], [0, 0], [0, 0], [0, 0]])
        return tf.ensure_shape(images, [global_batch, image_size, image_size, 3])

    images = in_file_order(files).batch(global_batch).map(padded, num_parallel_calls=tf.data.AUTOTUNE)
    batches = tf.data.experimental.assert_cardinality(-(-len(keys) // global_batch))
    return images.apply(batches).prefetch(tf.data.AUTOTUNE), keys
