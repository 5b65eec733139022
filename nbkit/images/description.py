"""The dataset description, what a notebook needs to know besides the records: `nbkit-dataset.json` beside the
`tfrecords-jpeg-<s>x<s>/` folders (`python -m nbkit tfrecords` writes it) holds the classes in label order, the
label values and columns of `submission.csv`, the image sizes, the competition's metric and any folds. Data
without one (a competition's own files) is described in the same form by its competition module
(`nbkit.images.flowers.load_description`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import DataError
from nbkit.metrics import METRICS

DESCRIPTION_FILE = "nbkit-dataset.json"
_FORMAT = "nbkit-dataset"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Description:
    """A dataset's facts. Label i (the `class` feature of a record) is `classes[i]`, and
    submission.csv writes it as `label_values[i]`."""

    title: str
    classes: tuple[str, ...]  # class names, in label order
    label_values: tuple[int | str, ...]  # what submission.csv writes for each label
    image_sizes: tuple[int, ...]  # the sizes of the tfrecords-jpeg-<s>x<s> folders
    id_column: str = "id"  # submission.csv's header: id_column,label_column
    label_column: str = "label"
    metric: str = "accuracy"  # one of METRICS: how the competition scores
    competition: str | None = None  # its Kaggle slug, when it is one
    folds: tuple[tuple[str, ...], ...] = ()  # names of the train/ files of each fold; () = a train/val split
    sample_submission: str = ""  # the competition's sample_submission.csv beside the description (a path once loaded)
    counts: dict[str, int] = field(default_factory=dict)  # records per split, as converted (informational)
    converted_with: dict[str, Any] = field(default_factory=dict)  # the converter's options (informational)
    origin: str = field(default="", compare=False)  # where the description was read from (not written)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def describe(self) -> str:
        """One line: title, classes, the submission's columns, the metric, folds; and where from."""
        shown = ", ".join(self.classes[:5]) + (", ..." if self.num_classes > 5 else "")
        folds = f", {len(self.folds)} folds" if self.folds else ""
        line = (
            f"{self.title}: {self.num_classes} classes ({shown}); submission {self.id_column},{self.label_column}; "
            f"metric {self.metric}{folds}"
        )
        return f"{line} ({self.origin})" if self.origin else line


def _check(dataset: Description, where: str = "the dataset description") -> Description:
    """The description itself, or a DataError saying what is wrong with it."""
    problems = []
    if not dataset.classes:
        problems.append("it names no classes")
    if len(dataset.label_values) != len(dataset.classes):
        problems.append(f"{len(dataset.classes)} classes but {len(dataset.label_values)} label values")
    if len(set(map(str, dataset.label_values))) != len(dataset.label_values):
        problems.append("a label value repeats")
    if not dataset.image_sizes or not all(isinstance(s, int) and s > 0 for s in dataset.image_sizes):
        problems.append(f"image_sizes {list(dataset.image_sizes)} are not positive whole numbers")
    if dataset.metric not in METRICS:
        problems.append(f"metric {dataset.metric!r} is not one of {', '.join(METRICS)}")
    if dataset.folds and sum(map(len, dataset.folds)) != len({f for files in dataset.folds for f in files}):
        problems.append("a file is in two folds")
    if problems:
        raise DataError(f"{where}: {'; '.join(problems)}. Convert the data again (python -m nbkit tfrecords).")
    return dataset


def _from_json(values: dict[str, Any], where: str) -> Description:
    """A Description from the contents of nbkit-dataset.json (checked)."""
    if not isinstance(values, dict) or values.get("format") != _FORMAT:
        raise DataError(
            f"{where} is not an nbkit dataset description (format should be {_FORMAT!r}): convert the data again."
        )
    if values.get("format_version") != _FORMAT_VERSION:
        raise DataError(
            f"{where} has format_version {values.get('format_version')!r}; this nbkit reads {_FORMAT_VERSION}. "
            "Convert the data again with this nbkit."
        )
    try:
        submission = values["submission"]
        dataset = Description(
            title=str(values["title"]),
            classes=tuple(str(c) for c in values["classes"]),
            label_values=tuple(values["label_values"]),
            image_sizes=tuple(values["image_sizes"]),
            id_column=str(submission["id_column"]),
            label_column=str(submission["label_column"]),
            metric=str(values["metric"]),
            competition=values.get("competition"),
            folds=tuple(tuple(files) for files in values.get("folds") or ()),
            sample_submission=str(values.get("sample_submission") or ""),
            counts=dict(values.get("counts") or {}),
            converted_with=dict(values.get("converted_with") or {}),
        )
    except (KeyError, TypeError) as error:
        raise DataError(f"{where} lacks {error} or has it in another form: convert the data again.") from None
    return _check(dataset, where)


def write(folder: str | Path, dataset: Description) -> Path:
    """Write `folder`/nbkit-dataset.json (sorted keys: the same description gives the same bytes)."""
    values = asdict(_check(dataset))  # its tuples written as JSON lists
    del values["origin"]
    values["submission"] = {name: values.pop(name) for name in ("id_column", "label_column")}
    values["sample_submission"] = Path(dataset.sample_submission).name if dataset.sample_submission else ""
    values.update(format=_FORMAT, format_version=_FORMAT_VERSION)
    text = json.dumps(values, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return atomic.write_text(Path(folder) / DESCRIPTION_FILE, text)


def load(data_root: str | Path) -> Description:
    """The dataset in `data_root`, from its nbkit-dataset.json (its `origin` says so); a DataError
    when there is none."""
    path = Path(data_root, DESCRIPTION_FILE)
    if not path.exists():
        raise DataError(
            f"No {DESCRIPTION_FILE} in {data_root}: convert the data with `python -m nbkit tfrecords`, which "
            "writes one beside the TFRecords."
        )
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise DataError(f"{path} is not valid JSON ({error}): convert the data again.") from None
    found = _from_json(values, str(path))
    sample = str(Path(data_root, found.sample_submission)) if found.sample_submission else ""
    return replace(found, sample_submission=sample, origin=f"from {path}")
