"""`submission.csv` in the competition's form (its header and label values, from the dataset
description), checked against the competition's sample submission when the data has one: the same
header and every id exactly once, so a submission that Kaggle would refuse or score wrong stops here."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import atomic, storage
from nbkit.errors import DataError


def _read(path: str | Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(header, rows) of a submission file (local or gs://), every value as text."""
    with storage.open_binary(path) as f:
        header, *rows = list(csv.reader(io.StringIO(f.read().decode("utf-8-sig"))))
    return header, [(row[0], row[1]) for row in rows if row]


def _check_against_sample(header: Sequence[str], ids: Sequence[str], sample: str | Path) -> None:
    """Stop unless `header` and the set of `ids` are the sample submission's (the order may differ)."""
    sample_header, rows = _read(sample)
    if list(header) != sample_header[:2]:
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


def write(ids: Sequence[str], labels: Sequence[int], dataset: Any, path: str | Path) -> Path:
    """`submission.csv` in the dataset's form (its header, e.g. `id,label`, and its label values), one
    row per test id, in the given order; checked against the dataset's sample submission if it has one."""
    if len(ids) != len(labels):
        raise DataError(f"{len(ids)} test ids but {len(labels)} predictions: they must match one to one.")
    if len(set(ids)) != len(ids):
        raise DataError("Test ids repeat: each id must appear once in submission.csv.")
    header = [dataset.id_column, dataset.label_column]
    if dataset.sample_submission:
        _check_against_sample(header, ids, dataset.sample_submission)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(
        [header, *([i, dataset.label_values[int(k)]] for i, k in zip(ids, labels))]
    )
    return atomic.write_text(path, out.getvalue())
