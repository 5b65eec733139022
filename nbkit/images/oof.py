"""The folds' out-of-fold predictions gathered (`python -m nbkit oof out/train-on-tpu-fold*/oof.csv
--data <DATA_ROOT>`): the K folds' oof.csv files (`metrics.write_oof`) joined into one table and one
score in the competition's metric, once every labeled id is there exactly once, so the score is of
every picture and of nothing twice. The command line's: never in a notebook's bundle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import metrics
from nbkit.errors import DataError


@dataclass(frozen=True)
class _OutOfFold:
    """Predictions of labeled pictures by models that did not train on them."""

    ids: list[str]
    labels: np.ndarray  # label indices
    folds: np.ndarray
    probabilities: np.ndarray  # [pictures, classes]


def _read(path: str | Path, dataset: Any) -> _OutOfFold:
    """One oof.csv, checked against the dataset's classes."""
    header, rows = metrics.read_csv(path)
    if header != metrics.oof_columns(dataset):
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
