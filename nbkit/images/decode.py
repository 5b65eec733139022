"""Reading TFRecords with tf.data, and decoding their JPEGs into uint8 batches (TensorFlow). Images
stay uint8 (the model rescales on the accelerator: a quarter of the bytes to send)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import tfrecord
from nbkit.errors import DataError
from nbkit.images import layout


def features(labeled: bool) -> dict[str, Any]:
    """The tf.Example spec: `image` + `class` (labeled) or `image` + `id` (test)."""
    import tensorflow as tf

    key = {"class": tf.io.FixedLenFeature([], tf.int64)} if labeled else {"id": tf.io.FixedLenFeature([], tf.string)}
    return {"image": tf.io.FixedLenFeature([], tf.string), **key}


def decode_image(jpeg: Any, image_size: int) -> Any:
    """JPEG bytes to a uint8 [image_size, image_size, 3] tensor; the explicit shape is what TPUs need."""
    import tensorflow as tf

    return tf.reshape(tf.io.decode_jpeg(jpeg, channels=3), [image_size, image_size, 3])


def decode_batch(serialized: Any, image_size: int, labeled: bool) -> tuple[Any, Any]:
    """A batch of serialized records to (uint8 images [n, size, size, 3], labels or ids): one vectorized
    parse per batch, then each image decoded while it is in the CPU cache."""
    import tensorflow as tf

    examples = tf.io.parse_example(serialized, features(labeled))
    spec = tf.TensorSpec([image_size, image_size, 3], tf.uint8)
    images = tf.map_fn(lambda jpeg: decode_image(jpeg, image_size), examples["image"], fn_output_signature=spec)
    return images, examples["class" if labeled else "id"]


def compression(files: Sequence[str]) -> str:
    """The compression of `files` ("", "GZIP" or "ZLIB"), which tf.data must be told; one for all of them."""
    kinds = {name: tfrecord.compression(name) for name in files}
    if len(set(kinds.values())) > 1:
        shown = ", ".join(f"{Path(name).name}: {kind or 'none'}" for name, kind in kinds.items())
        raise DataError(f"The files of one split are compressed in different ways ({shown}): write them all alike.")
    return next(iter(kinds.values()), "")


def in_file_order(files: Sequence[str], positions: Sequence[int] | None = None) -> Any:
    """The serialized records of `files`, one file after the other; with the files' `positions` (the
    position in file order of each file's first record), as (position, record)."""
    import tensorflow as tf

    kind = compression(files)
    if positions is None:
        return tf.data.Dataset.from_tensor_slices(list(files)).flat_map(
            lambda name: tf.data.TFRecordDataset(name, compression_type=kind)
        )
    return tf.data.Dataset.from_tensor_slices((list(files), tf.constant(list(positions), tf.int64))).flat_map(
        lambda name, start: tf.data.TFRecordDataset(name, compression_type=kind).enumerate(start)
    )


def first_positions(files: Sequence[str]) -> list[int]:
    """The position in file order of each file's first record, from the counts in the names."""
    counts = [layout.count_in_name(name) for name in files]
    return [sum(counts[:index]) for index in range(len(files))]
