"""Warping uint8 image batches with TensorFlow (training augmentation, test-time views), as
`nbkit.images.augment.warp` does in NumPy: the same six numbers per image, bilinear sampling, the
edge pixels extending outward."""

from __future__ import annotations

from typing import Any


def warp(images: Any, transforms: Any) -> Any:
    """A uint8 batch [n, size, size, 3] warped by one row of `augment.affine`'s six numbers per image
    (a [n, 6] float32 tensor), as float32."""
    import tensorflow as tf

    zeros = tf.zeros_like(transforms[:, :2])
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=tf.cast(images, tf.float32),
        transforms=tf.concat([transforms, zeros], axis=1),  # no projective part
        output_shape=tf.shape(images)[1:3],
        fill_value=0.0,
        interpolation="BILINEAR",
        fill_mode="NEAREST",
    )


def to_uint8(pixels: Any) -> Any:
    """Float pixels rounded and clipped to uint8."""
    import tensorflow as tf

    return tf.saturate_cast(tf.round(pixels), tf.uint8)
