"""Text competitions: CSV files of texts in the form of Kaggle's "Contradictory, My Dear Watson" (`train.csv`,
`test.csv`, `sample_submission.csv`), found, read and checked before any training; the KerasHub preset the
scores; `submission.csv` in the sample's form and order. (The KerasHub preset the notebook fine-tunes is
found by `nbkit.inputs.presets`.)

DATA_ROOT: a folder holding the CSV files, or "auto": the competition attached on Kaggle, else kagglehub,
else a generated sample in its form (`nbkit.text.sample`)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import env as nbenv
from nbkit import metrics
from nbkit.convert import labels
from nbkit.errors import DataError, ParameterError
from nbkit.inputs.datasets import DataSource, generated_sample, locate

_COMPETITION = "contradictory-my-dear-watson"
_METRICS = ("accuracy", "f1_macro", "roc_auc")  # roc_auc: two classes, scored on the second's probability


@dataclass
class _Split:
    """The rows of one CSV file: its ids, the text columns, and the labels (class indices) where it has them."""

    lines: list[int]  # each row's line number (the header is line 1)
    ids: list[str]
    texts: list[list[str]]  # one list per text column
    labels: np.ndarray | None = None
    languages: list[str] | None = None  # the language column's values ("(blank)" for none), where the file has one

    @property
    def count(self) -> int:
        return len(self.ids)


@dataclass
class _TextData:
    """The data the notebook trains on and predicts, checked: see `load_data`."""

    source: DataSource
    train: _Split
    test: _Split | None
    classes: list[str]  # the label values as train.csv writes them (a number in one form), in class-index order
    sample: labels.Table | None  # sample_submission.csv: the submission's header, ids, order and other columns
    sample_id: str = ""  # its id column: ID_COLUMN, or its first column when it has no ID_COLUMN
    notes: tuple[str, ...] = ()  # what the checks let through but a reader should know

    @property
    def sample_ids(self) -> list[str]:
        return [row[self.sample_id] for _, row in self.sample.rows] if self.sample else []

    def describe(self) -> str:
        test = f", test {self.test.count} rows" if self.test else ", no test.csv (no submission)"
        counts = f"train {self.train.count} rows{test}; {len(self.classes)} classes ({', '.join(self.classes)})"
        return "\n".join([f"data: {self.source.describe()}", counts, *self.notes])

    def score(self, labels: Sequence[int], probabilities: np.ndarray, metric: str) -> tuple[np.ndarray, dict[str, Any]]:
        """(confusion matrix, scores): accuracy, macro F1 / precision / recall, and `metric` (_METRICS); roc_auc
        scores the second class's probability, which `positive_class` names."""
        check_metric(metric, len(self.classes))
        confusion, scores = metrics.of_predictions(labels, probabilities, "accuracy")
        scores["metric"] = metric
        if metric == "roc_auc":
            scores["roc_auc"] = _roc_auc(np.asarray(labels) == 1, np.asarray(probabilities)[:, 1])
            scores["positive_class"] = self.classes[1]
        return confusion, scores

    def write_submission(self, ids: Sequence[str], probabilities: np.ndarray, metric: str, path: str | Path) -> Path:
        """`submission.csv` with the sample's header, one row per sample id in the sample's order: in the
        prediction column (the first but the id column) the predicted label as train.csv writes it, or for
        roc_auc the probability of the second class (`positive_class`); the sample's other columns as it has them."""
        probabilities = np.asarray(probabilities)
        if len(ids) != len(probabilities) or len(set(ids)) != len(ids):
            raise DataError(f"{len(ids)} test ids ({len(set(ids))} distinct) for {len(probabilities)} predictions.")
        if self.sample is None or set(ids) != set(self.sample_ids):
            raise DataError(f"The predicted ids are not {self.sample_id}s of sample_submission.csv.")
        header = self.sample.header
        column = next(name for name in header if name != self.sample_id)
        row = {i: r for r, i in enumerate(ids)}
        body = []
        for _, cells in self.sample.rows:
            p = probabilities[row[cells[self.sample_id]]]
            cells = {**cells, column: f"{p[1]:.6f}" if metric == "roc_auc" else self.classes[int(p.argmax())]}
            body.append([cells[name] for name in header])
        return metrics.write_csv([list(header), *body], path)


def check_metric(metric: str, num_classes: int) -> str:
    if metric not in _METRICS:
        raise ParameterError(f"METRIC={metric!r} is not one of {', '.join(_METRICS)}.")
    if metric == "roc_auc" and num_classes != 2:
        raise ParameterError(f"METRIC='roc_auc' scores two classes; this data has {num_classes}: use 'accuracy'.")
    return metric


def _roc_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """The area under the ROC curve: the chance that a positive row scores above a negative one (a tie: half)."""
    positive, score = np.asarray(positive, bool), np.asarray(score, float)
    negatives = np.sort(score[~positive])
    if positive.all() or not positive.any():
        raise DataError("ROC AUC needs rows of both classes in the validation split; it has one class only.")
    below = np.searchsorted(negatives, score[positive], "left")
    tied = np.searchsorted(negatives, score[positive], "right") - below
    return float((below + tied / 2).sum() / (positive.sum() * len(negatives)))


# ---- the data ----


def load_data(
    data_root: str,
    id_column: str = "id",
    text_columns: Sequence[str] = ("premise", "hypothesis"),
    label_column: str = "label",
    language_column: str = "language",
    environment: Any = None,
) -> _TextData:
    """The CSV files under DATA_ROOT (see the module), every row checked before any training: the columns,
    the ids (each once; the test's those of the sample submission), no empty text in train.csv, the labels.
    The files are read as the converter reads a labels CSV: `,`, `;` or tab separated, cells stripped."""
    environment = environment or nbenv.detect()
    source = locate(data_root, _COMPETITION, fallback=_sample_source, environment=environment)
    folder = Path(source.path)
    notes: list[str] = []
    train = _read(folder / "train.csv", id_column, text_columns, language_column, label_column)
    classes, train.labels = _classes(train, label_column)
    if language_column and train.languages is None:
        notes.append(f"train.csv has no column {language_column!r} (LANGUAGE_COLUMN): no scores per language.")
    present = [name for name in ("test.csv", "sample_submission.csv") if (folder / name).is_file()]
    if not present:
        return _TextData(source, train, None, classes, None, notes=tuple(notes))
    if len(present) == 1:
        missing = "sample_submission.csv" if present[0] == "test.csv" else "test.csv"
        raise DataError(
            f"{folder} has {present[0]} but not {missing}: a submission needs both (the test texts, and the form "
            "and ids of the submission)."
        )
    test = _read(folder / "test.csv", id_column, text_columns, language_column, notes=notes)
    sample = labels.read_csv(folder / "sample_submission.csv", "sample_submission.csv", delimiters=",;\t")
    if len(sample.header) < 2:
        raise DataError(f"sample_submission.csv's header is {','.join(sample.header)}: an id and a prediction column.")
    sample_id = id_column if id_column in sample.header else sample.header[0]
    if sample_id != id_column:
        notes.append(f"sample_submission.csv's id column is {sample_id!r}: submission.csv's is too.")
    if len(sample.header) > 2:
        notes.append(f"submission.csv keeps sample_submission.csv's other columns ({', '.join(sample.header[2:])}).")
    sample_ids = _read(sample.path, sample_id, (), "", table=sample).ids  # each id once
    missing, extra = set(test.ids) - set(sample_ids), set(sample_ids) - set(test.ids)
    if missing or extra:
        raise DataError(
            f"test.csv and sample_submission.csv disagree: {len(missing)} test ids are not in the sample "
            f"(e.g. {sorted(missing)[:3]}), {len(extra)} sample ids have no test row (e.g. {sorted(extra)[:3]}). "
            "Use the files of one version of the data."
        )
    return _TextData(source, train, test, classes, sample, sample_id, tuple(notes))


def _sample_source(environment: Any) -> DataSource:
    def generator() -> Any:
        from nbkit.text import sample

        return sample.ensure

    holding = "a folder holding train.csv, test.csv, sample_submission.csv"
    return generated_sample(environment, "text-sample", generator, _COMPETITION, holding)


def _column(path: Path, header: Sequence[str], name: str, parameter: str) -> str:
    if name in header:
        return name
    close = difflib.get_close_matches(name, header, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise DataError(
        f"{path.name} has no column {name!r} ({parameter}); its columns: {', '.join(header)}.{hint} "
        f"Set {parameter} to the right one."
    )


def _read(
    path: Path,
    id_column: str,
    text_columns: Sequence[str],
    language_column: str,
    label_column: str = "",
    notes: list[str] | None = None,
    table: labels.Table | None = None,
) -> _Split:
    """The rows of `path`: an empty text is an error, or with `notes` (test.csv, each row a line of the submission)
    a note."""
    if table is None and not path.is_file():
        raise DataError(f"{path} is not there: DATA_ROOT must hold train.csv (and test.csv, sample_submission.csv).")
    table = table or labels.read_csv(path, path.name, delimiters=",;\t")
    if not table.rows:
        raise DataError(
            f"{path.name} has a header but no rows: give its rows. To train without a submission, give a DATA_ROOT "
            "without test.csv and sample_submission.csv (train.csv copied into a folder of its own)."
        )
    for name, parameter in {id_column: "ID_COLUMN", **dict.fromkeys(text_columns, "TEXT_COLUMNS")}.items():
        _column(path, table.header, name, parameter)
    if label_column:
        _column(path, table.header, label_column, "LABEL_COLUMN")
    seen: dict[str, int] = {}
    empty = []
    for line, row in table.rows:
        if row[id_column] in seen:
            raise DataError(f"{path.name}: id {row[id_column]!r} is on line {seen[row[id_column]]} and line {line}.")
        seen[row[id_column]] = line
        blank = [c for c in (*text_columns, label_column) if c and not row[c]]
        if blank and (notes is None or label_column in blank):
            raise DataError(f"{path.name}, line {line} (id {row[id_column]!r}): column {blank[0]!r} is empty.")
        if blank:
            empty.append(f"line {line} (id {row[id_column]!r})")
    if empty:
        notes.append(
            f"{path.name} rows with an empty text: {len(empty)} ({_few(empty)}); kept, the submission needs them."
        )
    rows = [row for _, row in table.rows]
    return _Split(
        lines=[line for line, _ in table.rows],
        ids=[row[id_column] for row in rows],
        texts=[[row[c] for row in rows] for c in text_columns],
        labels=np.array([row[label_column] for row in rows], object) if label_column else None,
        languages=[row[language_column] or "(blank)" for row in rows] if language_column in table.header else None,
    )


def _few(values: Sequence[object], count: int = 3) -> str:
    return ", ".join(map(str, values[:count])) + (f", ... ({len(values)} in all)" if len(values) > count else "")


def _classes(train: _Split, label_column: str) -> tuple[list[str], np.ndarray]:
    """(the label values, in order: numbers by value (0..K-1 with none missing), else as text; each row's class).
    The converter's rules (`labels.class_list`): 1 and 1.0 are one class, labels that differ in letter case only
    an error, two classes at least."""
    found: dict[str, str] = {}
    for line, row_id, label in zip(train.lines, train.ids, train.labels):
        found.setdefault(label, f"train.csv line {line} (id {row_id!r})")
    classes = labels.class_list(found)
    index = {label: classes.index(label, where) for label, where in found.items()}
    rows = np.array([index[label] for label in train.labels], np.int32)
    counts, first = np.bincount(rows, minlength=len(classes.values)), {}
    for label, where in found.items():
        first.setdefault(index[label], where)
    rare = [f"{str(classes.values[k])[:40]!r} ({first[k]})" for k in range(len(counts)) if counts[k] < 2]
    if rare:
        raise DataError(
            f"train.csv: {len(rare)} of the {len(counts)} {label_column} values are on one row only: {_few(rare)}. Too "
            "rare to learn and to validate, or a typo. Correct or remove those rows, or set LABEL_COLUMN to the "
            "column of the classes."
        )
    numbers = list(classes.values)
    if all(isinstance(v, int) for v in numbers) and numbers != list(range(len(numbers))):
        raise DataError(
            f"train.csv: the {label_column} values are {_few(numbers, 6)}, not the classes 0..{len(numbers) - 1}: a "
            "label outside the classes (e.g. -1 for 'unknown'). Remove those rows or number the classes from 0."
        )
    return [str(v) for v in classes.values], rows
