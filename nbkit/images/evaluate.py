"""Scores and the competition's output files: confusion matrix, macro F1, submission.csv, metrics.json."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import DataError


def confusion_matrix(labels: Sequence[int], predictions: Sequence[int], num_classes: int) -> np.ndarray:
    """counts[true, predicted]."""
    counts = np.zeros((num_classes, num_classes), np.int64)
    np.add.at(counts, (np.asarray(labels), np.asarray(predictions)), 1)
    return counts


def scores(counts: np.ndarray) -> dict[str, float]:
    """Accuracy and macro-averaged F1, precision and recall over the classes that occur."""
    true_positive = np.diag(counts).astype(float)
    predicted, actual = counts.sum(0), counts.sum(1)
    present = (predicted + actual) > 0  # classes absent from both sides would score 0/0
    precision = np.divide(true_positive, predicted, out=np.zeros_like(true_positive), where=predicted > 0)
    recall = np.divide(true_positive, actual, out=np.zeros_like(true_positive), where=actual > 0)
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)
    return {
        "accuracy": float(true_positive.sum() / max(1, counts.sum())),
        "f1_macro": float(f1[present].mean()),
        "precision_macro": float(precision[present].mean()),
        "recall_macro": float(recall[present].mean()),
    }


def write_submission(ids: Sequence[str], labels: Sequence[int], dataset: Any, path: str | Path) -> Path:
    """`submission.csv` in the dataset's form (its header, e.g. `id,label`, and its label values), one
    row per test id, in the given order."""
    if len(ids) != len(labels):
        raise DataError(f"{len(ids)} test ids but {len(labels)} predictions: they must match one to one.")
    if len(set(ids)) != len(ids):
        raise DataError("Test ids repeat: each id must appear once in submission.csv.")
    lines = [f"{dataset.id_column},{dataset.label_column}"]
    lines += [f"{i},{dataset.label_values[int(label)]}" for i, label in zip(ids, labels)]
    return atomic.write_text(path, "\n".join(lines) + "\n")


def read_submission(path: str | Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(header, rows) of a submission file, every value as text."""
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, [(row[0], row[1]) for row in rows]


def write_metrics(metrics: dict[str, Any], path: str | Path) -> Path:
    """`metrics.json`, sorted keys, plain Python numbers."""
    plain = {k: (v.item() if hasattr(v, "item") else v) for k, v in metrics.items()}
    return atomic.write_text(path, json.dumps(plain, indent=2, sort_keys=True) + "\n")
