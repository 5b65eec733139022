"""A batch of pictures in a grid titled with its classes and predictions (matplotlib, headless too): the figure,
saved as a PNG given `path`. Picture files as a decoder sees them: `nbkit.convert.pictures.preview`."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit.plots import new_figure, save


def grid(count: int, row_height: float) -> tuple[Any, list[Any]]:
    """A square-ish grid of `count` image panels, axes off: the figure and the first `count` panels."""
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    figure, axes = new_figure(rows, cols, (2.8 * cols, row_height * rows))
    for axis in axes.flat:
        axis.axis("off")
    return figure, list(axes.flat)[:count]


def batch(
    images: np.ndarray,
    labels: Sequence[int],
    class_names: Sequence[str],
    predictions: Sequence[int] | None = None,
    path: str | Path | None = None,
    max_images: int = 25,
) -> Any:
    """A grid of images titled with their class; with predictions, "name OK" or, in red, "name NO -> true"."""
    count = min(len(images), len(labels), max_images)  # padded batches hold more images than labels
    figure, panels = grid(count, 2.9)
    for index, axis in enumerate(panels):
        axis.imshow(np.asarray(images[index]).astype(np.uint8))
        true = class_names[int(labels[index])]
        if predictions is None:
            axis.set_title(textwrap.fill(true, 28), fontsize=9)
            continue
        guess = class_names[int(predictions[index])]
        correct = int(predictions[index]) == int(labels[index])
        title = f"{guess} OK" if correct else f"{guess} NO -> {true}"
        # Wrapped to the panel: long class names ("Cassava Bacterial Blight (CBB)") ran into the next one.
        axis.set_title(textwrap.fill(title, 30), fontsize=8, color="black" if correct else "red")
    return save(figure, path)
