"""The validation and prediction inputs (tf.data): every image in file order, with its label or id,
in whole batches; and the views that test-time augmentation averages over."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nbkit.images import augment, layout, warp
from nbkit.images.augment import VIEWS
from nbkit.images.decode import decode_batch, features, in_file_order


def val_batches(files: Sequence[str], image_size: int, global_batch: int, rows: slice = slice(None)) -> Any:
    """(image, label) batches in file order, cached in memory after the first epoch (full batches only);
    of each, only `rows` (`plan.local_rows`: the rows this process feeds on a pod slice)."""
    import tensorflow as tf

    batches = in_file_order(files).batch(global_batch, drop_remainder=True).map(lambda batch: batch[rows])
    dataset = batches.map(lambda batch: decode_batch(batch, image_size, True), num_parallel_calls=tf.data.AUTOTUNE)
    # The batch count is known from the file names; telling tf.data lets Keras stop without a warning.
    known = tf.data.experimental.assert_cardinality(layout.count_items(files) // global_batch)
    return dataset.apply(known).cache().prefetch(tf.data.AUTOTUNE)


def keys_in_order(files: Sequence[str], labeled: bool) -> Any:
    """The labels (int64) or ids (str) of `files`, in file order, as a NumPy array."""
    import numpy as np
    import tensorflow as tf

    key = "class" if labeled else "id"
    spec = {key: features(labeled)[key]}
    keys = in_file_order(files).map(
        lambda raw: tf.io.parse_single_example(raw, spec)[key], num_parallel_calls=tf.data.AUTOTUNE
    )
    found = list(keys.as_numpy_iterator())
    return np.array(found if labeled else [k.decode() for k in found])


def view(images: Any, index: int) -> Any:
    """View `index` of `augment.VIEWS` of a uint8 batch [n, size, size, 3] (0: the batch itself)."""
    import tensorflow as tf

    if "zoomed" in VIEWS[index]:
        transform = tf.constant([augment.view_transform(images.shape[1])], tf.float32)
        images = warp.to_uint8(warp.warp(images, tf.tile(transform, [tf.shape(images)[0], 1])))
    return tf.reverse(images, [2]) if "flipped" in VIEWS[index] else images


def image_batches(
    files: Sequence[str],
    image_size: int,
    labeled: bool,
    global_batch: int,
    count: int,
    view_index: int = 0,
    rows: slice = slice(None),
) -> Any:
    """The `count` images of `files` in file order (as view `view_index` of VIEWS), padded to whole
    global batches; of each, only `rows` (`plan.local_rows`: this process's, on a pod slice)."""
    import tensorflow as tf

    first, stop, _ = rows.indices(global_batch)

    def padded(batch: Any) -> Any:
        # Pad the serialized records (empty ones decode to nothing), so each process cuts its rows first.
        batch = tf.pad(batch, [[0, global_batch - tf.shape(batch)[0]]])[first:stop]
        found = tf.reduce_sum(tf.cast(tf.strings.length(batch) > 0, tf.int32))
        images, _ = decode_batch(batch[:found], image_size, labeled)
        images = view(images, view_index) if view_index else images
        images = tf.pad(images, [[0, stop - first - found], [0, 0], [0, 0], [0, 0]])
        return tf.ensure_shape(images, [stop - first, image_size, image_size, 3])

    images = in_file_order(files).batch(global_batch).map(padded, num_parallel_calls=tf.data.AUTOTUNE)
    batches = tf.data.experimental.assert_cardinality(-(-count // global_batch))
    return images.apply(batches).prefetch(tf.data.AUTOTUNE)
