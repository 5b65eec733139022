"""Predictions in file order, one row per image, for validation scores and the submission, each
run checked: a few rows predicted alone on one device must match the distributed predictions.

keras 3.8 + jax 0.4.35 under DataParallel on 8 devices returned rows that belong to other images
(see the README's design notes); a submission written from them would be silently wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nbkit.env import installed_versions
from nbkit.errors import PredictionError

CHECKED_ROWS = 8


def predict_in_order(
    model: Any, files: Sequence[str], image_size: int, labeled: bool, global_batch: int
) -> tuple[np.ndarray, np.ndarray]:
    """Logits for every image of `files`, in file order, and their labels (or test ids), checked
    against one-device predictions of some of them (`check_rows`)."""
    from nbkit.images.pipeline import images_in_order

    images, keys = images_in_order(files, image_size, labeled=labeled, global_batch=global_batch)
    # The last batch is padded so every replica gets a full one; the padding's rows are cut.
    logits = np.asarray(model.predict(images, verbose=0))[: len(keys)]
    check_rows(model, np.asarray(next(iter(images))), logits)
    return logits, keys


def check_rows(model: Any, first_batch: np.ndarray, logits: np.ndarray, rows: int = CHECKED_ROWS) -> None:
    """Predict `rows` images of the first batch (one per replica's share, and the last) one at a time,
    without distribution, and stop with a PredictionError if their distributed logits differ."""
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
        raise PredictionError(
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
