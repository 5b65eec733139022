"""Grids of pictures (matplotlib, headless too): a batch titled with its classes and predictions, and
picture files as a decoder that ignores EXIF orientation sees them. Each function returns the figure
and, given `path`, saves it as a PNG."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit.plots import new_figure, save


def _grid(count: int, row_height: float) -> tuple[Any, list[Any]]:
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
    figure, panels = _grid(count, 2.9)
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


def pictures(files: Sequence[str | Path], path: str | Path | None = None) -> Any:
    """Picture files as a decoder that ignores EXIF orientation sees them (tf.io.decode_jpeg does),
    titled with their name, size, mode and EXIF orientation: phone pictures show up turned."""
    from PIL import Image

    figure, panels = _grid(len(files), 3.1)
    for index, axis in enumerate(panels):
        with Image.open(files[index]) as image:
            orientation = image.getexif().get(0x0112, 1)  # the EXIF Orientation tag
            title = f"{Path(files[index]).name}\n{image.width}x{image.height} {image.mode}"
            axis.imshow(np.asarray(image.convert("RGB")))
        turned = orientation != 1
        axis.set_title(
            title + (f", EXIF turn {orientation}" if turned else ""), fontsize=8, color="red" if turned else "black"
        )
    return save(figure, path)
