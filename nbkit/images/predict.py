"""Predictions in the dataset's order, one row per image, for validation scores and the submission,
on one host or a pod slice, each run checked: a few rows predicted alone on one device must match the distributed predictions.

keras 3.8 + jax 0.4.35 under DataParallel on 8 devices returned rows that belong to other images
(see the README's design notes); a submission written from them would be silently wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbkit.env import installed_versions
from nbkit.errors import AcceleratorError

CHECKED_ROWS = 8


def in_order(model: Any, dataset: Any, global_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(logits as float64, keys) of every (image, key) item of `dataset` (a tf.data dataset, not batched),
    in its order. Batched here by `global_batch`, the last batch padded so every replica gets a full one
    (the padding's rows cut); on a pod slice each process feeds its rows of each batch and gets every row.
    The first batch's rows are checked against the same images predicted alone (`check_rows`)."""
    import tensorflow as tf

    first, stop, _ = process_rows(global_batch).indices(global_batch)

    def padded(images: Any, keys: Any) -> Any:
        found = tf.shape(images)[0]
        images = tf.pad(images, [[0, global_batch - found]] + [[0, 0]] * (len(images.shape) - 1))
        return tf.ensure_shape(images[first:stop], [stop - first, *images.shape[1:]]), keys

    found_logits, found_keys = [], []
    for images, keys in dataset.batch(global_batch).map(padded).prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        found_logits.append(global_logits(model, images))
        found_keys.append(keys)
        if len(found_logits) == 1:
            check_rows(model, images, found_logits[0][first:])
    keys = np.concatenate(found_keys)
    logits = np.concatenate(found_logits)[: len(keys)]
    if keys.dtype.kind in "SO":  # test ids
        keys = np.array([k.decode() for k in keys])
    return logits, keys


def global_logits(model: Any, batches: Any) -> np.ndarray:
    """The model's logits for every row of `batches` (a dataset of batches, or one batch as an array),
    as float64 NumPy. With several JAX processes (a pod slice) each process feeds its own rows of each
    batch and gets back every process's rows."""
    one_batch = isinstance(batches, np.ndarray)
    if process_count() == 1:
        size = {"batch_size": len(batches)} if one_batch else {}
        return np.asarray(model.predict(batches, verbose=0, **size), np.float64)
    # model.predict cannot fetch an output spread over other hosts' devices ("spans non-addressable
    # devices"): the forward pass returns its output replicated to every device instead.
    import jax
    import keras
    from jax.sharding import NamedSharding, PartitionSpec

    distribution = keras.distribution.distribution()
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    forward, found = None, []
    for local in [batches] if one_batch else batches:
        local = np.asarray(local)
        layout = distribution.get_data_layout((local.shape[0] * process_count(), *local.shape[1:])).backend_layout
        if forward is None:
            replicated = NamedSharding(layout.mesh, PartitionSpec())
            forward = jax.jit(
                lambda t, n, x: model.stateless_call(t, n, x, training=False)[0], out_shardings=replicated
            )
        inputs = jax.make_array_from_process_local_data(layout, local)
        found.append(np.asarray(forward(trainable, non_trainable, inputs), np.float64))
    return np.concatenate(found)


def process_rows(count: int) -> slice:
    """This process's rows of a batch of `count` that every process holds whole (all rows on one host)."""
    processes = process_count()
    if processes == 1:
        return slice(None)
    import jax

    share = count // processes
    return slice(jax.process_index() * share, (jax.process_index() + 1) * share)


def process_count() -> int:
    """How many JAX processes share the devices (1 off JAX, or on one host)."""
    import keras

    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def check_rows(model: Any, first_batch: np.ndarray, logits: np.ndarray, rows: int = CHECKED_ROWS) -> None:
    """Predict `rows` images of the first batch (one per replica's share, and the last) one at a time,
    without distribution, and stop with an AcceleratorError if their distributed logits differ
    (`logits` starts at the first batch's first row)."""
    count = min(len(logits), len(first_batch))
    picks = sorted({int(i) for i in np.linspace(0, count - 1, min(rows, count))})
    alone = np.stack([np.asarray(model(first_batch[i : i + 1], training=False), np.float64)[0] for i in picks])
    distributed = np.asarray(logits[picks], np.float64)
    # Measured between batched and one-row predictions of the same model: < 3e-7 in float32, ~1e-5 in
    # bfloat16. Rows of other images differ by far more (0.058 on an untrained CNN in keras 3.8).
    tolerance = (1e-2 if _computes_in_16_bits(model) else 1e-3) * max(1.0, float(np.abs(alone).max()))
    errors = np.abs(distributed - alone).max(axis=1)
    if errors.max() > tolerance:
        row = picks[int(errors.argmax())]
        raise AcceleratorError(
            f"Row {row} of the distributed predictions differs from the same image predicted alone "
            f"(by {errors.max():.3g}; tolerance {tolerance:.3g}): this {_versions()} returns predictions that do "
            "not belong to their images. Nothing was written. Use the versions the README tests, or predict on "
            "one device."
        )


def _computes_in_16_bits(model: Any) -> bool:
    policy = getattr(getattr(model, "dtype_policy", None), "compute_dtype", "float32")
    return policy in ("bfloat16", "float16")


def _versions() -> str:
    """keras 3.8.0 + jax 0.4.35 (+ tensorflow ...): what computed the predictions."""
    found = installed_versions(("keras", "jax", "jaxlib", "tensorflow", "tensorflow-cpu"))
    return " + ".join(f"{name} {version}" for name, version in found.items())
