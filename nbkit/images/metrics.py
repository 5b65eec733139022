"""Scores of predictions and the files that carry them: the confusion matrix, accuracy, macro F1 /
precision / recall, quadratic weighted kappa and the competition's own metric (the dataset description
names it); `metrics.json`; `submission.csv` in the competition's form, checked against its sample
submission (the same header, every id once), so a submission Kaggle would refuse or score wrong stops
here; and out-of-fold predictions: each fold's run writes `oof.csv` (id, label, fold, one probability
per class), and `gather_oof` joins the K folds' files into one table, once every labeled id is there
exactly once (`python -m nbkit oof out/train-on-tpu-fold*/oof.csv --data <DATA_ROOT>`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic, storage
from nbkit.errors import DataError, ParameterError

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


def of_predictions(labels: Sequence[int], probabilities: np.ndarray, metric: str) -> tuple[np.ndarray, dict[str, Any]]:
    """(confusion matrix, scores) of class `probabilities` against `labels`; `metric` is the competition's."""
    counts = _confusion_matrix(labels, np.asarray(probabilities).argmax(axis=1), np.asarray(probabilities).shape[1])
    return counts, _scores(counts, metric)


def describe(found: dict[str, Any], what: str = "validation") -> str:
    """`validation f1_macro 0.532 (the competition's metric); accuracy 0.550`."""
    metric = found["metric"]
    line = f"{what} {metric} {found[metric]:.3f} (the competition's metric)"
    return line if metric == "accuracy" else f"{line}; accuracy {found['accuracy']:.3f}"


def write_json(values: dict[str, Any], path: str | Path) -> Path:
    """`metrics.json`, sorted keys, plain Python numbers."""
    plain = {k: (v.item() if hasattr(v, "item") else v) for k, v in values.items()}
    return atomic.write_text(path, json.dumps(plain, indent=2, sort_keys=True) + "\n")


def _write_csv(rows: Sequence[Sequence[Any]], path: str | Path) -> Path:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return atomic.write_text(path, out.getvalue())


def _read_csv(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV file (local or gs://), every value as text."""
    with storage.open_binary(path) as f:
        header, *rows = list(csv.reader(io.StringIO(f.read().decode("utf-8-sig"))))
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
        sample_header, rows = _read_csv(sample)
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
    return _write_csv([header, *([i, dataset.label_values[int(k)]] for i, k in zip(ids, labels))], path)


@dataclass(frozen=True)
class _OutOfFold:
    """Predictions of labeled pictures by models that did not train on them."""

    ids: list[str]
    labels: np.ndarray  # label indices
    folds: np.ndarray
    probabilities: np.ndarray  # [pictures, classes]


def _oof_columns(dataset: Any) -> list[str]:
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
    return _write_csv([_oof_columns(dataset), *body], path)


def _read_oof(path: str | Path, dataset: Any) -> _OutOfFold:
    """One oof.csv, checked against the dataset's classes."""
    header, rows = _read_csv(path)
    if header != _oof_columns(dataset):
        raise DataError(
            f"{path}: its columns are not those of this dataset's oof.csv (id, label, fold, p:<each label value>): "
            "it was written for other data."
        )
    label_of = {str(value): index for index, value in enumerate(dataset.label_values)}
    try:
        found = _OutOfFold(
            ids=[row[0] for row in rows],
            labels=np.array([label_of[row[1]] for row in rows], np.int64),
            folds=np.array([int(row[2]) for row in rows], np.int64),
            probabilities=np.array([[float(p) for p in row[3:]] for row in rows], np.float64).reshape(len(rows), -1),
        )
    except (KeyError, ValueError, IndexError) as error:
        raise DataError(f"{path}: a row is damaged ({type(error).__name__}: {error}); write it again.") from None
    p = found.probabilities
    bad = ~(np.isfinite(p).all(axis=1) & (p >= 0).all(axis=1) & (np.abs(p.sum(axis=1) - 1) < 1e-3))
    if bad.any():
        raise DataError(
            f"{path}: {bad.sum()} rows hold no probabilities (each row's p: columns must be numbers from 0 to 1 "
            f"summing to 1), e.g. id {found.ids[int(bad.argmax())]!r}: its model diverged (NaN) or the file was "
            "edited; train that fold again."
        )
    return found


def gather_oof(paths: Sequence[str | Path], dataset: Any, classes: Mapping[str, int] | None = None) -> _OutOfFold:
    """The folds' OOF predictions as one, checked: each fold of the dataset once, no id twice, and
    (given `classes`, every labeled record's id -> class) every labeled id present with the data's label."""
    parts = [_read_oof(path, dataset) for path in paths]
    every = sorted(f for part in parts for f in set(part.folds.tolist()))
    expected = list(range(len(dataset.folds))) if dataset.folds else every
    if every != expected:
        raise DataError(
            f"The OOF files hold folds {every}, but the data has {len(expected)} folds ({expected}): give each "
            "fold's oof.csv once (run notebook 05 or 02 with FOLD=k for each k)."
        )
    arrays = (np.concatenate([getattr(part, name) for part in parts]) for name in ("labels", "folds", "probabilities"))
    joined = _OutOfFold([i for part in parts for i in part.ids], *arrays)
    seen: dict[str, int] = {}
    for record_id, fold in zip(joined.ids, joined.folds.tolist()):
        if record_id in seen:
            raise DataError(
                f"Id {record_id!r} is predicted in fold {seen[record_id]} and in fold {fold}: folds overlap."
            )
        seen[record_id] = fold
    if classes is not None and set(classes) != set(seen):
        missing, extra = sorted(set(classes) - set(seen)), sorted(set(seen) - set(classes))
        raise DataError(
            f"The OOF predictions miss {len(missing)} labeled ids (e.g. {missing[:3]}) and hold {len(extra)} that "
            f"are not labeled here (e.g. {extra[:3]}): they are of other data, or a fold's run did not finish."
        )
    wrong = [(i, k) for i, k in zip(joined.ids, joined.labels.tolist()) if classes and classes[i] != k]
    if wrong:
        (record_id, label), values = wrong[0], dataset.label_values
        raise DataError(
            f"{len(wrong)} OOF rows give another label than the data, e.g. id {record_id!r}: label "
            f"{values[label]!r} in its oof.csv, {values[classes[record_id]]!r} in the data: the oof.csv files are of "
            "other data or were edited; run those folds again on this data."
        )
    return joined
