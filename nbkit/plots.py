"""The notebooks' pictures, with matplotlib (headless too): each function returns the figure and, given
`path`, saves it as a PNG."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import metrics


def _figure(rows: int, cols: int, size: tuple[float, float]) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt  # headless, matplotlib falls back to Agg by itself

    return plt.subplots(rows, cols, figsize=size, squeeze=False)


def _grid(count: int, row_height: float) -> tuple[Any, list[Any]]:
    """A square-ish grid of `count` image panels, axes off: the figure and the first `count` panels."""
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    figure, axes = _figure(rows, cols, (2.8 * cols, row_height * rows))
    for axis in axes.flat:
        axis.axis("off")
    return figure, list(axes.flat)[:count]


def _epochs_axis(axis: Any, count: int, label: str = "epoch") -> None:
    """An x axis of whole epochs 1..count, half an epoch spare each side: one epoch is no 0.96-1.04 range."""
    from matplotlib.ticker import MaxNLocator

    axis.set_xlim(0.5, count + 0.5)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    axis.set_xlabel(label)


def _save(figure: Any, path: str | Path | None) -> Any:
    figure.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=90)
    return figure


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
    return _save(figure, path)


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
    return _save(figure, path)


def training_curves(history: dict[str, list[float]], path: str | Path | None = None) -> Any:
    """Loss and each metric per epoch, training against validation."""
    metrics = [k for k in history if not k.startswith("val_") and k not in ("learning_rate", "lr")]
    figure, axes = _figure(1, len(metrics), (5 * len(metrics), 3.5))
    for axis, name in zip(axes.flat, metrics):
        epochs = range(1, len(history[name]) + 1)
        axis.plot(epochs, history[name], marker="o", label="training")  # markers: one epoch is a point
        if f"val_{name}" in history:
            axis.plot(epochs, history[f"val_{name}"], marker="o", label="validation")
        axis.set_title(name)
        _epochs_axis(axis, len(epochs))
        axis.legend()
    return _save(figure, path)


def learning_rate(rates: Sequence[float], path: str | Path | None = None) -> Any:
    """The learning rate of each epoch."""
    figure, axes = _figure(1, 1, (6, 3))
    axis = axes[0, 0]
    axis.plot(range(1, len(rates) + 1), rates, marker="o")
    axis.set_title(f"learning rate: start {rates[0]:.2g}, max {max(rates):.2g}, end {rates[-1]:.2g}")
    _epochs_axis(axis, len(rates))
    return _save(figure, path)


def confusion(
    counts: np.ndarray, class_names: Sequence[str], scores: dict[str, float], path: str | Path | None = None
) -> Any:
    """The confusion matrix, rows normalized, titled with the scores (`metrics.of_predictions`)."""
    rows = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    size = max(6.0, len(class_names) * 0.12)
    figure, axes = _figure(1, 1, (size, size))
    axis = axes[0, 0]
    axis.matshow(rows, cmap="Reds")
    ticks = range(len(class_names))
    fontsize = 9 if len(class_names) <= 20 else 5
    axis.set_xticks(ticks, class_names, rotation=90, fontsize=fontsize)
    axis.set_yticks(ticks, class_names, fontsize=fontsize)
    axis.set_xlabel("predicted")
    axis.set_ylabel("true")
    first = metrics.describe(scores)
    second = f"macro F1 {scores['f1_macro']:.3f}   precision {scores['precision_macro']:.3f}   recall {scores['recall_macro']:.3f}"
    figure.suptitle(f"{first}\n{second}", fontsize=10)  # over the figure: long class names narrow the axes
    return _save(figure, path)


def input_wait(epochs: Sequence[Any], data_bound_share: float = 0.25, path: str | Path | None = None) -> Any:
    """Per epoch, the share of training time spent waiting for input (`nbkit.models.EpochWait`s),
    against the data-bound threshold."""
    figure, axes = _figure(1, 1, (6, 3))
    axis = axes[0, 0]
    shares = [100 * wait.share for wait in epochs]
    axis.bar(
        [wait.epoch for wait in epochs],
        shares,
        color=["tab:red" if s > 100 * data_bound_share else "tab:blue" for s in shares],
    )
    axis.axhline(100 * data_bound_share, color="tab:red", linestyle="--", label="data-bound above")
    axis.set_ylim(0, 100)
    axis.set_ylabel("% of epoch waiting for input")
    _epochs_axis(axis, max([wait.epoch for wait in epochs], default=1), "epoch (the first includes warm-up)")
    axis.set_title("input wait per epoch")
    axis.legend()
    return _save(figure, path)
