"""Scores of predictions (confusion matrix, accuracy, macro F1 / precision / recall, quadratic weighted
kappa, the competition's metric) and the files that carry them: metrics.json, submission.csv checked
against the sample submission, each fold's oof.csv (gathered by `nbkit.images.oof`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import DataError, ParameterError

METRICS = ("accuracy", "f1_macro", "qwk")  # what a dataset description may name as its metric


def _confusion_matrix(labels: Sequence[int], predictions: Sequence[int], num_classes: int) -> np.ndarray:
    """counts[true, predicted]."""
    pairs = np.asarray(labels, np.int64) * num_classes + np.asarray(predictions)
    return np.bincount(pairs, minlength=num_classes**2).reshape(num_classes, num_classes)


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


def of_predictions(labels: Sequence[int], probabilities: np.ndarray, metric: str) -> tuple[np.ndarray, dict[str, Any]]:
    """(confusion matrix, scores) of class `probabilities` against `labels`; `metric` is the competition's."""
    counts = _confusion_matrix(labels, np.asarray(probabilities).argmax(axis=1), np.asarray(probabilities).shape[1])
    return counts, _scores(counts, metric)


def describe(found: dict[str, Any], what: str = "validation") -> str:
    """`validation f1_macro 0.532 (the competition's metric); accuracy 0.550`."""
    metric = found["metric"]
    line = f"{what} {metric} {found[metric]:.3f} (the competition's metric)"
    return line if metric == "accuracy" else f"{line}; accuracy {found['accuracy']:.3f}"


def write_csv(rows: Sequence[Sequence[Any]], path: str | Path) -> Path:
    """A CSV file of `rows` (the header first), written whole or not at all."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return atomic.write_text(path, out.getvalue())


def read_csv(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV file, every value as text."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, [row for row in rows if row]


def write_submission(ids: Sequence[str], labels: Sequence[int], dataset: Any, path: str | Path) -> Path:
    """`submission.csv` in the dataset's form (its header, e.g. `id,label`, and its label values), one
    row per test id, in the given order; checked against the dataset's sample submission if it has one
    (the same header, the same ids in any order)."""
    if len(ids) != len(labels):
        raise DataError(f"{len(ids)} test ids but {len(labels)} predictions: they must match one to one.")
    if len(set(ids)) != len(ids):
        raise DataError("Test ids repeat: each id must appear once in submission.csv.")
    header = [dataset.id_column, dataset.label_column]
    if dataset.sample_submission:
        sample = dataset.sample_submission
        sample_header, rows = read_csv(sample)
        if header != sample_header[:2]:
            raise DataError(
                f"submission.csv's header would be {','.join(header)} but {sample}'s is {','.join(sample_header)}: "
                "the dataset description is wrong; convert the data again."
            )
        wanted, given = {row[0] for row in rows}, set(ids)
        missing, extra = sorted(wanted - given), sorted(given - wanted)
        if missing or extra:
            raise DataError(
                f"The test data's ids do not match {sample}: {len(missing)} of its ids have no test record "
                f"(e.g. {missing[:3]}) and {len(extra)} test ids are not in it (e.g. {extra[:3]}). The test files "
                "and the sample submission are from different versions: convert the data again."
            )
    return write_csv([header, *([i, dataset.label_values[int(k)]] for i, k in zip(ids, labels))], path)


def oof_columns(dataset: Any) -> list[str]:
    """oof.csv's header: id, label, fold, then `p:<label value>` for each class in label order."""
    return ["id", "label", "fold", *(f"p:{value}" for value in dataset.label_values)]


def write_oof(
    ids: Sequence[str],
    labels: Sequence[int],
    probabilities: np.ndarray,
    fold: int | Sequence[int],
    dataset: Any,
    path: Any,
) -> Path:
    """`oof.csv` of validation predictions (labels as the dataset's label values); `fold`: the fold of
    every row, or one fold per row (a gathered table)."""
    folds = [fold] * len(ids) if isinstance(fold, int) else [int(f) for f in fold]
    if not len(ids) == len(labels) == len(probabilities) == len(folds):
        raise DataError(
            f"{len(ids)} ids, {len(labels)} labels, {len(probabilities)} predictions and {len(folds)} folds: "
            "they must match."
        )
    rows = zip(ids, labels, folds, np.asarray(probabilities, np.float64))
    body = ([i, dataset.label_values[int(label)], f, *(f"{p:.6g}" for p in row)] for i, label, f, row in rows)
    return write_csv([oof_columns(dataset), *body], path)
