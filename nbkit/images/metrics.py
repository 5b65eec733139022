"""Scores of predictions against labels: the confusion matrix, accuracy, macro F1 / precision /
recall, quadratic weighted kappa, and the competition's own metric (the dataset description names
it); `metrics.json`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import ParameterError

METRICS = ("accuracy", "f1_macro", "qwk")  # what a dataset description may name as its metric


def _confusion_matrix(labels: Sequence[int], predictions: Sequence[int], num_classes: int) -> np.ndarray:
    """counts[true, predicted]."""
    counts = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(counts, (np.asarray(labels), np.asarray(predictions)), 1)
    return counts


def _quadratic_weighted_kappa(counts: np.ndarray) -> float:
    """Cohen's kappa with quadratic weights (ordinal classes: a miss by two costs four times a miss by one)."""
    classes = len(counts)
    if classes < 2 or counts.sum() == 0:
        return 1.0
    index = np.arange(classes)
    weights = (index[:, None] - index[None, :]) ** 2 / (classes - 1) ** 2
    expected = np.outer(counts.sum(1), counts.sum(0)) / counts.sum()
    disagreement = (weights * expected).sum()
    return float(1 - (weights * counts).sum() / disagreement) if disagreement > 0 else 1.0


def _scores(counts: np.ndarray, metric: str = "accuracy") -> dict[str, Any]:
    """Accuracy and macro-averaged F1, precision and recall over the classes that occur, the
    quadratic weighted kappa when `metric` is "qwk", and `metric`: the name of the competition's."""
    if metric not in METRICS:
        raise ParameterError(f"metric={metric!r} is not one of {', '.join(METRICS)}.")
    true_positive = np.diag(counts).astype(float)
    predicted, actual = counts.sum(0), counts.sum(1)
    present = (predicted + actual) > 0  # classes absent from both sides would score 0/0
    precision = np.divide(true_positive, predicted, out=np.zeros_like(true_positive), where=predicted > 0)
    recall = np.divide(true_positive, actual, out=np.zeros_like(true_positive), where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    found = {
        "accuracy": float(true_positive.sum() / max(1, counts.sum())),
        "f1_macro": float(f1[present].mean()),
        "precision_macro": float(precision[present].mean()),
        "recall_macro": float(recall[present].mean()),
        "metric": metric,
    }
    if metric == "qwk":
        found["qwk"] = _quadratic_weighted_kappa(counts)
    return found


def describe(found: dict[str, Any], what: str = "validation") -> str:
    """`validation f1_macro 0.532 (the competition's metric); accuracy 0.550`."""
    metric = found["metric"]
    line = f"{what} {metric} {found[metric]:.3f} (the competition's metric)"
    return line if metric == "accuracy" else f"{line}; accuracy {found['accuracy']:.3f}"


def write(values: dict[str, Any], path: str | Path) -> Path:
    """`metrics.json`, sorted keys, plain Python numbers."""
    plain = {k: (v.item() if hasattr(v, "item") else v) for k, v in values.items()}
    return atomic.write_text(path, json.dumps(plain, indent=2, sort_keys=True) + "\n")


def of_predictions(labels: Sequence[int], probabilities: np.ndarray, metric: str) -> tuple[np.ndarray, dict[str, Any]]:
    """(confusion matrix, scores) of class `probabilities` against `labels`; `metric` is the competition's."""
    counts = _confusion_matrix(labels, np.asarray(probabilities).argmax(axis=1), np.asarray(probabilities).shape[1])
    return counts, _scores(counts, metric)
