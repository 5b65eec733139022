"""Predictions in file order, one row per image, for validation scores and the submission."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def predict_in_order(
    model: Any, files: Sequence[str], image_size: int, labeled: bool, global_batch: int
) -> tuple[np.ndarray, np.ndarray]:
    """Logits for every image of `files`, in file order, and their labels (or test ids)."""
    from nbkit.flowers.pipeline import images_in_order

    images, keys = images_in_order(files, image_size, labeled=labeled, global_batch=global_batch)
    # The last batch is padded so every replica gets a full one; the padding's rows are cut.
    return np.asarray(model.predict(images, verbose=0))[: len(keys)], keys
