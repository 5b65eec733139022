"""The notebooks' plots, with matplotlib (headless too): training curves, the learning rate, the confusion
matrix, the input wait. Each function returns the figure and, given `path`, saves it as a PNG. Grids of
pictures: `nbkit.images.grids`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import metrics


def new_figure(rows: int, cols: int, size: tuple[float, float]) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt  # headless, matplotlib falls back to Agg by itself

    return plt.subplots(rows, cols, figsize=size, squeeze=False)


def _epochs_axis(axis: Any, count: int, label: str = "epoch") -> None:
    """An x axis of whole epochs 1..count, half an epoch spare each side: one epoch is no 0.96-1.04 range."""
    from matplotlib.ticker import MaxNLocator

    axis.set_xlim(0.5, count + 0.5)
    axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    axis.set_xlabel(label)


def save(figure: Any, path: str | Path | None) -> Any:
    figure.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=90)
    return figure


def training_curves(history: dict[str, list[float]], path: str | Path | None = None) -> Any:
    """Loss and each metric per epoch, training against validation."""
    names = [k for k in history if not k.startswith("val_") and k not in ("learning_rate", "lr")]
    figure, axes = new_figure(1, len(names), (5 * len(names), 3.5))
    for axis, name in zip(axes.flat, names):
        epochs = range(1, len(history[name]) + 1)
        axis.plot(epochs, history[name], marker="o", label="training")  # markers: one epoch is a point
        if f"val_{name}" in history:
            axis.plot(epochs, history[f"val_{name}"], marker="o", label="validation")
        axis.set_title(name)
        _epochs_axis(axis, len(epochs))
        axis.legend()
    return save(figure, path)


def learning_rate(rates: Sequence[float], path: str | Path | None = None) -> Any:
    """The learning rate of each epoch."""
    figure, axes = new_figure(1, 1, (6, 3))
    axis = axes[0, 0]
    axis.plot(range(1, len(rates) + 1), rates, marker="o")
    axis.set_title(f"learning rate: start {rates[0]:.2g}, max {max(rates):.2g}, end {rates[-1]:.2g}")
    _epochs_axis(axis, len(rates))
    return save(figure, path)


def confusion(
    counts: np.ndarray, class_names: Sequence[str], scores: dict[str, float], path: str | Path | None = None
) -> Any:
    """The confusion matrix, rows normalized, titled with the scores (`metrics.of_predictions`)."""
    rows = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    size = max(6.0, len(class_names) * 0.12)
    figure, axes = new_figure(1, 1, (size, size))
    axis = axes[0, 0]
    axis.matshow(rows, cmap="Reds")
    ticks = range(len(class_names))
    fontsize = 9 if len(class_names) <= 20 else 5
    axis.set_xticks(ticks, class_names, rotation=90, fontsize=fontsize)
    axis.set_yticks(ticks, class_names, fontsize=fontsize)
    axis.set_xlabel("predicted")
    axis.set_ylabel("true")
    second = (
        f"macro F1 {scores['f1_macro']:.3f}   precision {scores['precision_macro']:.3f}   "
        f"recall {scores['recall_macro']:.3f}"
    )
    figure.suptitle(f"{metrics.describe(scores)}\n{second}", fontsize=10)  # long class names narrow the axes
    return save(figure, path)


def input_wait(epochs: Sequence[Any], data_bound_share: float = 0.25, path: str | Path | None = None) -> Any:
    """Per epoch, the share of training time spent waiting for input (`nbkit.models.EpochWait`s),
    against the data-bound threshold."""
    figure, axes = new_figure(1, 1, (6, 3))
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
    return save(figure, path)
