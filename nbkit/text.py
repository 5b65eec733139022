"""Text competitions: CSV files of texts in the form of Kaggle's "Contradictory, My Dear Watson" (`train.csv`,
`test.csv`, `sample_submission.csv`), found, read and checked before any training; the KerasHub preset the
notebook fine-tunes, found where Kaggle attaches it; scores; `submission.csv` in the sample's form and order.

DATA_ROOT: a folder holding the CSV files, or "auto": the competition attached on Kaggle, else kagglehub,
else a generated sample in its form (`nbkit.text_sample`)."""

from __future__ import annotations

import csv
import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError
from nbkit.images import metrics
from nbkit.inputs.datasets import DataSource, locate, through_kagglehub

_COMPETITION = "contradictory-my-dear-watson"
_METRICS = ("accuracy", "f1_macro", "roc_auc")  # roc_auc: two classes, scored on the second's probability
_PRESET_FILES = ("config.json", "metadata.json", "tokenizer.json")  # what every KerasHub preset folder has


@dataclass
class _Split:
    """The rows of one CSV file: its header, ids, the text columns, and the labels (class indices) where it has them."""

    header: list[str]
    ids: list[str]
    texts: list[list[str]]  # one list per text column
    labels: np.ndarray | None = None
    languages: list[str] | None = None  # the language column's values, where the file has one

    @property
    def count(self) -> int:
        return len(self.ids)


@dataclass
class _TextData:
    """The data the notebook trains on and predicts, checked: see `load_data`."""

    source: DataSource
    train: _Split
    test: _Split | None
    classes: list[str]  # the label values as train.csv writes them, in class-index order
    sample_header: list[str]  # sample_submission.csv's header: the id column, then the prediction column
    sample_ids: list[str]  # in the sample's order: the submission's

    def describe(self) -> str:
        test = f", test {self.test.count} rows" if self.test else ", no test.csv (no submission)"
        return (
            f"data: {self.source.describe()}\ntrain {self.train.count} rows{test}; {len(self.classes)} classes "
            f"({', '.join(self.classes)})"
        )

    def score(self, labels: Sequence[int], probabilities: np.ndarray, metric: str) -> tuple[np.ndarray, dict[str, Any]]:
        """(confusion matrix, scores): accuracy, macro F1 / precision / recall, and `metric` (_METRICS)."""
        check_metric(metric, len(self.classes))
        confusion, scores = metrics.of_predictions(labels, probabilities, "accuracy")
        scores["metric"] = metric
        if metric == "roc_auc":
            scores["roc_auc"] = _roc_auc(np.asarray(labels) == 1, np.asarray(probabilities)[:, 1])
        return confusion, scores

    def write_submission(self, ids: Sequence[str], probabilities: np.ndarray, metric: str, path: str | Path) -> Path:
        """`submission.csv` with the sample's header, one row per sample id in the sample's order: the
        predicted label as train.csv writes it, or for roc_auc the second class's probability."""
        probabilities = np.asarray(probabilities)
        if len(ids) != len(probabilities) or len(set(ids)) != len(ids):
            raise DataError(f"{len(ids)} test ids ({len(set(ids))} distinct) for {len(probabilities)} predictions.")
        if set(ids) != set(self.sample_ids):
            raise DataError(f"The predicted ids are not {self.sample_header[0]}s of sample_submission.csv.")
        row = {i: r for r, i in enumerate(ids)}
        predicted = [probabilities[row[i]] for i in self.sample_ids]
        body = (
            [i, f"{p[1]:.6f}" if metric == "roc_auc" else self.classes[int(p.argmax())]]
            for i, p in zip(self.sample_ids, predicted)
        )
        return metrics.write_csv([self.sample_header[:2], *body], path)


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
    the ids (each once; the test's those of the sample submission), no empty text, the labels."""
    environment = environment or nbenv.detect()
    source = locate(data_root, _COMPETITION, fallback=_sample_source, environment=environment)
    folder = Path(source.path)
    train = _read(folder / "train.csv", id_column, text_columns, language_column, label_column)
    classes, train.labels = _classes(train, label_column)
    present = [name for name in ("test.csv", "sample_submission.csv") if (folder / name).is_file()]
    if not present:
        return _TextData(source, train, None, classes, [], [])
    if len(present) == 1:
        missing = "sample_submission.csv" if present[0] == "test.csv" else "test.csv"
        raise DataError(
            f"{folder} has {present[0]} but not {missing}: a submission needs both (the test texts, and the form "
            "and ids of the submission)."
        )
    test = _read(folder / "test.csv", id_column, text_columns, language_column)
    sample = _read(folder / "sample_submission.csv", id_column, (), language_column)
    if len(sample.header) < 2 or sample.header[0] != id_column:
        raise DataError(
            f"sample_submission.csv's header is {','.join(sample.header)}: the id column ({id_column!r}, ID_COLUMN) "
            "and then the prediction column are expected."
        )
    missing, extra = set(test.ids) - set(sample.ids), set(sample.ids) - set(test.ids)
    if missing or extra:
        raise DataError(
            f"test.csv and sample_submission.csv disagree: {len(missing)} test ids are not in the sample "
            f"(e.g. {sorted(missing)[:3]}), {len(extra)} sample ids have no test row (e.g. {sorted(extra)[:3]}). "
            "Use the files of one version of the data."
        )
    return _TextData(source, train, test, classes, sample.header, sample.ids)


def _sample_source(environment: Any) -> DataSource:
    try:
        from nbkit import text_sample
    except ImportError:  # a kernel bundle leaves the generator out: on Kaggle the data is attached
        raise DataError(
            f"This notebook's bundled nbkit has no sample generator: on Kaggle, attach {_COMPETITION} with "
            "'Add Input'; elsewhere set DATA_ROOT to a folder holding train.csv, test.csv, sample_submission.csv."
        ) from None
    folder = text_sample.ensure(environment.working_dir / "text-sample")
    return DataSource(str(folder), f"the generated sample in {folder} stands in")


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    if not path.is_file():
        raise DataError(f"{path} is not there: DATA_ROOT must hold train.csv (and test.csv, sample_submission.csv).")
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path} cannot be read as a UTF-8 CSV file ({error}).") from None
    if not rows:
        raise DataError(f"{path} has no rows.")
    return list(reader.fieldnames or []), rows


def _column(path: Path, header: list[str], name: str, parameter: str) -> str:
    if name in header:
        return name
    close = difflib.get_close_matches(name, header, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise DataError(
        f"{path.name} has no column {name!r} ({parameter}); its columns: {', '.join(header)}.{hint} "
        f"Set {parameter} to the right one."
    )


def _read(
    path: Path, id_column: str, text_columns: Sequence[str], language_column: str, label_column: str = ""
) -> _Split:
    header, rows = _rows(path)
    _column(path, header, id_column, "ID_COLUMN")
    for name in text_columns:
        _column(path, header, name, "TEXT_COLUMNS")
    if label_column:
        _column(path, header, label_column, "LABEL_COLUMN")
    seen: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):  # line 1 is the header
        if None in row or any(v is None for v in row.values()):
            raise DataError(f"{path.name}, line {line}: {len(header)} columns expected, the row has another number.")
        if row[id_column] in seen:
            raise DataError(f"{path.name}: id {row[id_column]!r} is on line {seen[row[id_column]]} and line {line}.")
        seen[row[id_column]] = line
        empty = [c for c in (*text_columns, label_column) if c and not row[c].strip()]
        if empty:
            raise DataError(f"{path.name}, line {line} (id {row[id_column]!r}): column {empty[0]!r} is empty.")
    return _Split(
        header=header,
        ids=[row[id_column] for row in rows],
        texts=[[row[c] for row in rows] for c in text_columns],
        labels=np.array([row[label_column].strip() for row in rows], object) if label_column else None,
        languages=[row[language_column] for row in rows] if language_column in header else None,
    )


def _classes(train: _Split, label_column: str) -> tuple[list[str], np.ndarray]:
    """(the label values, in order: numbers by value (0..K-1 with none missing), else as text; each row's class)."""
    labels = [str(v) for v in train.labels]
    values = sorted(set(labels))
    rare = [f"{v!r} (id {train.ids[labels.index(v)]!r})" for v in values if labels.count(v) < 2]
    if rare:
        raise DataError(
            f"train.csv: the {label_column} {', '.join(rare)} occurs on one row only: too rare to learn and to "
            "validate, or a typo. Correct or remove the row."
        )
    if all(v.lstrip("-").isdigit() for v in values):
        numbers = sorted(int(v) for v in values)
        if numbers != list(range(len(numbers))):
            raise DataError(
                f"train.csv: the {label_column} values are {numbers}, not the classes 0..{len(numbers) - 1}: a label "
                "outside the classes (e.g. -1 for 'unknown'). Remove those rows or number the classes from 0."
            )
        return [str(n) for n in numbers], np.array([int(v) for v in labels], np.int32)
    return values, np.array([values.index(v) for v in labels], np.int32)


# ---- the pretrained model ----


def find_preset(preset: str, download: bool = True, environment: Any = None) -> tuple[str | None, str]:
    """(the folder of the KerasHub preset `preset`, or None; why): a folder given as PRESET; the copy attached
    to the notebook as a Kaggle Model; else, if `download`, kagglehub's (internet on). Its files are checked."""
    environment = environment or nbenv.detect()
    if "/" in preset and not preset.startswith("kaggle://"):
        if not Path(preset).is_dir():
            raise DataError(f"PRESET={preset!r} is not a folder: give a KerasHub preset's folder, or a preset name.")
        return _checked(Path(preset)), "PRESET is a folder"
    handle = _kaggle_handle(preset)
    model, framework, variation = handle.split("/")[1:4]
    for root in (environment.input_dir / model, environment.input_dir / "models" / handle.split("/")[0] / model):
        versions = sorted((root / framework / variation).glob("*"), key=lambda p: (len(p.name), p.name))
        if versions:
            return _checked(versions[-1]), f"{handle} is attached as a Kaggle Model"
    found, why_not = through_kagglehub(handle, environment.platform, "model") if download else (None, "")
    if found:
        return _checked(Path(found)), f"kagglehub fetched {handle}"
    why_not = why_not or "the smoke profile downloads none"
    return None, (
        f"the Kaggle Model {handle} is not attached and {why_not}. To use it, attach it ('Add Input' -> Models, "
        f"or `python -m nbkit bundle notebooks/08_text_classifier.py --model {handle}`) or turn the internet on"
    )


def _kaggle_handle(preset: str) -> str:
    """owner/model/framework/variation/version of a KerasHub preset name (or of kaggle://...)."""
    if preset.startswith("kaggle://"):
        return preset.removeprefix("kaggle://")
    import keras_hub

    known = keras_hub.models.Backbone.presets
    if preset not in known:
        close = difflib.get_close_matches(preset, list(known), n=3)
        raise ParameterError(f"PRESET={preset!r} is not a KerasHub preset (close: {', '.join(close) or 'none'}).")
    return known[preset]["kaggle_handle"].removeprefix("kaggle://")


def _checked(folder: Path) -> str:
    """`folder` if it holds a whole KerasHub preset, else a DataError naming what is missing or damaged."""
    missing = [name for name in _PRESET_FILES if not (folder / name).is_file()]
    if not any(folder.glob("*.weights.h5")) and not any(folder.glob("*.weights.json")):
        missing.append("model.weights.h5")
    if missing:
        raise DataError(
            f"The KerasHub preset in {folder} is incomplete: {', '.join(missing)} missing. Attach the whole model "
            "version again (or download it again)."
        )
    for name in _PRESET_FILES:
        try:
            json.loads((folder / name).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise DataError(f"{folder / name} is damaged ({error}): attach the model version again.") from None
    return str(folder)
