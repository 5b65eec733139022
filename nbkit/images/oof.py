"""Out-of-fold (OOF) predictions: each fold's run predicts the fold it did not train on and writes
`oof.csv` (id, label, fold, then one probability per class); `gather` joins the K folds' files into
one table and one score in the competition's metric, after checking that every labeled id is there
exactly once, so the score is of every picture and of nothing twice.

    python -m nbkit oof out/train-on-tpu-fold*/oof.csv --data <DATA_ROOT>
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic, storage
from nbkit.errors import DataError
from nbkit.images import metrics

_FIXED = ("id", "label", "fold")


@dataclass(frozen=True)
class _OutOfFold:
    """Predictions of labeled pictures by models that did not train on them."""

    ids: list[str]
    labels: np.ndarray  # label indices
    folds: np.ndarray
    probabilities: np.ndarray  # [pictures, classes]

    def scores(self, metric: str) -> dict[str, Any]:
        """The scores of these predictions (`metrics.scores`), the competition's `metric` among them."""
        return metrics.of_predictions(self.labels, self.probabilities, metric)[1]


def _columns(dataset: Any) -> list[str]:
    """oof.csv's header: id, label, fold, then `p:<label value>` for each class in label order."""
    return [*_FIXED, *(f"p:{value}" for value in dataset.label_values)]


def write(
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
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_columns(dataset))
    for record_id, label, row_fold, row in zip(ids, labels, folds, np.asarray(probabilities, np.float64)):
        writer.writerow([record_id, dataset.label_values[int(label)], row_fold, *(f"{p:.6g}" for p in row)])
    return atomic.write_text(path, out.getvalue())


def _read(path: str | Path, dataset: Any) -> _OutOfFold:
    """One oof.csv, checked against the dataset's classes."""
    with storage.open_binary(path) as f:
        header, *rows = list(csv.reader(io.StringIO(f.read().decode("utf-8"))))
    if header != _columns(dataset):
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


def gather(paths: Sequence[str | Path], dataset: Any, classes: Mapping[str, int] | None = None) -> _OutOfFold:
    """The folds' OOF predictions as one, checked: each fold of the dataset once, no id twice, and
    (given `classes`, every labeled record's id -> class) every labeled id present with the data's label."""
    parts = [_read(path, dataset) for path in paths]
    folds = [sorted(set(part.folds.tolist())) for part in parts]
    every = sorted(f for found in folds for f in found)
    expected = list(range(len(dataset.folds))) if dataset.folds else every
    if every != expected:
        raise DataError(
            f"The OOF files hold folds {every}, but the data has {len(expected)} folds ({expected}): give each "
            "fold's oof.csv once (run notebook 05 or 02 with FOLD=k for each k)."
        )
    joined = _OutOfFold(
        ids=[i for part in parts for i in part.ids],
        labels=np.concatenate([part.labels for part in parts]),
        folds=np.concatenate([part.folds for part in parts]),
        probabilities=np.concatenate([part.probabilities for part in parts]),
    )
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
    wrong = [(i, label) for i, label in zip(joined.ids, joined.labels.tolist()) if classes and classes[i] != label]
    if wrong:
        (record_id, label), values = wrong[0], dataset.label_values
        raise DataError(
            f"{len(wrong)} OOF rows give another label than the data, e.g. id {record_id!r}: label "
            f"{values[label]!r} in its oof.csv, {values[classes[record_id]]!r} in the data: the oof.csv files are of "
            "other data or were edited; run those folds again on this data."
        )
    return joined
