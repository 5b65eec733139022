"""Predictions in file order, one row per image, for validation scores and the submission, each
run checked: a few rows predicted alone on one device must match the distributed predictions.

keras 3.8 + jax 0.4.35 under DataParallel on 8 devices returned rows that belong to other images
(see the README's design notes); a submission written from them would be silently wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbkit.env import installed_versions
from nbkit.errors import AcceleratorError, ParameterError
from nbkit.images import metrics

CHECKED_ROWS = 8


@dataclass(frozen=True)
class Predictions:
    """A model's class probabilities for images in file order, and their labels (or test ids)."""

    per_view: np.ndarray  # [views, images, classes]: softmax of each view's logits (`ordered.VIEWS`)
    keys: np.ndarray  # labels, or test ids

    @property
    def probabilities(self) -> np.ndarray:
        """[images, classes]: the mean over the views (test-time augmentation; one view: that view's)."""
        return self.per_view.mean(axis=0)


def predict_in_order(
    model: Any,
    files: Sequence[str],
    image_size: int,
    labeled: bool,
    global_batch: int,
    views: int = 1,
    rows: slice = slice(None),
) -> Predictions:
    """Class probabilities for every image of `files`, in file order, for each of the first `views`
    views of `ordered.VIEWS` (test-time augmentation: TTA=1 is the images as they are), and their
    labels (or test ids). Each pass is checked against one-device predictions of some rows (`check_rows`).
    On a pod slice each process reads `rows` of every batch (`plan.local_rows`) and gets every row's."""
    from nbkit.images.ordered import VIEWS, image_batches, keys_in_order

    if not 1 <= views <= len(VIEWS):
        raise ParameterError(f"TTA={views}: from 1 (no test-time augmentation) to {len(VIEWS)} views: {VIEWS}.")
    keys = keys_in_order(files, labeled)  # once: every view is of the same images
    per_view = []
    for index in range(views):
        images = image_batches(files, image_size, labeled, global_batch, len(keys), view_index=index, rows=rows)
        # The last batch is padded so every replica gets a full one; the padding's rows are cut.
        logits = global_logits(model, images)[: len(keys)]
        first = rows.indices(global_batch)[0]
        check_rows(model, np.asarray(next(iter(images))), logits[first:])
        per_view.append(metrics.softmax(logits))
    return Predictions(np.stack(per_view), keys)


def global_logits(model: Any, batches: Any) -> np.ndarray:
    """The model's logits for every row of `batches` (a dataset of batches, or one batch as an array),
    as float64 NumPy. With several JAX processes (a pod slice) each process feeds its own rows of each
    batch and gets back every process's rows."""
    one_batch = isinstance(batches, np.ndarray)
    if _processes() == 1:
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
        layout = distribution.get_data_layout((local.shape[0] * _processes(), *local.shape[1:])).backend_layout
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
    processes = _processes()
    if processes == 1:
        return slice(None)
    import jax

    share = count // processes
    return slice(jax.process_index() * share, (jax.process_index() + 1) * share)


def _processes() -> int:
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
