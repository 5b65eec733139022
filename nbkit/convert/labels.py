"""A competition's CSV files and labels: rows with their line numbers as a spreadsheet shows them,
the label values in label order, readable class names; and which pictures train and which
validate (a stratified validation split, or K stratified folds) and the order records are written in.

Label order: integer labels numerically (0, 1, 2, ..., 10), names alphabetically, or the order of
a given class list. Label values stay what the CSV writes (ints stay ints, names stay strings), so
submission.csv can write them back.

Split, folds and order are seeded with Python's own random, seeded with a string: the same labels
and seed give the same split, folds and order on every machine and run.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nbkit.errors import DataError, ParameterError

_INTEGER = re.compile(r"[+-]?\d+")
_WHOLE = re.compile(r"[+-]?\d+(\.0*)?")  # a whole number, also as a spreadsheet writes it: 1.0


@dataclass(frozen=True)
class Table:
    """A CSV file: its header and its rows, each with its line number (the header is line 1)."""

    path: Path
    header: tuple[str, ...]
    rows: tuple[tuple[int, dict[str, str]], ...]

    def column(self, name: str | None, position: int, option: str) -> str:
        """The column called `name`, or the `position`-th one when no name is given; a DataError
        names the columns there are."""
        if name is None and position < len(self.header):
            return self.header[position]
        if name in self.header:
            return name
        wanted = f"column {name!r}" if name else f"a column number {position + 1}"
        raise DataError(
            f"{self.path.name} has no {wanted}; its columns are {', '.join(map(repr, self.header)) or 'none'}. "
            + (
                "Separate its columns with `,`, `;` or tabs."
                if len(self.header) == 1
                else f"Give the right name with {option}."
            )
        )


def read_csv(path: str | Path, option: str, delimiters: str = ",") -> Table:
    """The CSV at `path` (`option` names it in messages); cells stripped, empty lines skipped. Its
    delimiter: the one of `delimiters` its header holds most (a spreadsheet may write `;` or tabs). Cells of
    any length (csv's default limit is 131,072 characters); a line of another number of cells is an error."""
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"{option} {path}: no such file. Give the CSV file's path.")
    csv.field_size_limit(2**31 - 1)  # the largest every platform's C long holds
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a spreadsheet's byte-order mark
            text = f.read()
        delimiter = max(delimiters, key=text.partition("\n")[0].count)
        lines = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path.name} is not a readable UTF-8 CSV file ({error}): save it as CSV (UTF-8).") from None
    if not lines or not any(lines[0]):
        raise DataError(f"{path.name} is empty: it needs a header line, then one line per item.")
    header = tuple(cell.strip() for cell in lines[0])
    for number, cells in enumerate(lines[1:], start=2):
        if len(cells) != len(header) and any(cell.strip() for cell in cells):
            raise DataError(
                f"{path.name} line {number} has {len(cells)} cells, the header {len(header)}: quote a cell that "
                f"holds a {delimiter!r} (a spreadsheet's 'Save as CSV' does), or correct the line."
            )
    rows = tuple(
        (number, dict(zip(header, (cell.strip() for cell in cells))))
        for number, cells in enumerate(lines[1:], start=2)
        if any(cell.strip() for cell in cells)
    )
    return Table(path, header, rows)


def _label_key(text: str) -> str:
    """The label as it is compared: whole numbers without sign, leading zeros or decimals ("03" and
    "3.0" are 3), names as written."""
    return str(int(text.partition(".")[0])) if _WHOLE.fullmatch(text) else text


@dataclass(frozen=True)
class Classes:
    """The classes in label order: label i is `values[i]` in the CSV and `names[i]` to a reader."""

    values: tuple[int | str, ...]
    names: tuple[str, ...]
    source: str  # where the class list came from, for messages

    def index(self, text: str, where: str) -> int:
        """The label index of the label written `text`; a DataError says where an unknown label is."""
        try:
            return self._positions[_label_key(text)]
        except KeyError:
            known = ", ".join(map(repr, self.values[:12])) + (", ..." if len(self.values) > 12 else "")
            raise DataError(
                f"{where}: label {text!r} is not one of the classes {self.source} gives ({known}). "
                "Correct the label, or add the class to the class names."
            ) from None

    @functools.cached_property
    def _positions(self) -> dict[str, int]:
        return {_label_key(str(value)): i for i, value in enumerate(self.values)}


def class_list(found: Mapping[str, str], class_names: object = None) -> Classes:
    """The classes of the labels `found` ({label text: where it first appears}), in label order,
    named by `class_names`: None, a JSON file, a {label value: name} mapping, or a list of label
    values in label order. Given class names make an unknown label an error."""
    given, source = _given_names(class_names)
    if given is None:
        keys = sorted({_label_key(text) for text in found}, key=_order)
        names = dict.fromkeys(keys)
        spelled: dict[str, str] = {}
        for text, where in found.items():  # "Healthy" and "healthy": one class misspelled, or two?
            other = spelled.setdefault(_label_key(text).casefold(), text)
            if _label_key(other) != _label_key(text):
                raise DataError(
                    f"Labels {other!r} ({found[other]}) and {text!r} ({where}) differ only in letter case: "
                    "write each class one way (or, for two classes, give them names that differ in more)."
                )
    elif isinstance(given, Mapping):
        names = {_label_key(str(k)): str(v) for k, v in given.items()}
        keys = sorted(names, key=_order)
    else:
        keys = [_label_key(str(value)) for value in given]
        if len(set(keys)) != len(keys):
            raise ParameterError(f"The class list {source} names a class twice: {list(given)}.")
        names = dict.fromkeys(keys)
    if len(keys) < 2:
        raise DataError(f"Only {len(keys)} class ({', '.join(keys)}): a classifier needs at least two.")
    as_int = all(_INTEGER.fullmatch(key) for key in keys)
    values = tuple(int(key) if as_int else key for key in keys)
    classes = Classes(values, tuple(names[key] or key for key in keys), source)
    for text, where in found.items():
        classes.index(text, where)  # an unknown label stops here, naming its row
    return classes


def _order(key: str) -> tuple[int, int, str]:
    """Integers numerically before names alphabetically."""
    return (0, int(key), "") if _INTEGER.fullmatch(key) else (1, 0, key)


def _given_names(class_names: object) -> tuple[Mapping[str, object] | Sequence[object] | None, str]:
    """(the class names as given, where they came from)."""
    if class_names is None:
        return None, "the labels"
    if isinstance(class_names, (str, Path)):
        path = Path(class_names)
        try:
            given = json.loads(path.read_text(encoding="utf-8"))
        except OSError:
            raise ParameterError(f"--class-names {path}: no such file. Give a JSON file, or leave it out.") from None
        except ValueError as error:
            raise ParameterError(f"--class-names {path} is not valid JSON ({error}).") from None
        class_names, source = given, path.name
    else:
        source = "class_names"
    if not isinstance(class_names, (Mapping, list, tuple)):
        raise ParameterError(
            f"Class names {source} must be a {{label value: name}} mapping or a list of label values, "
            f"not {type(class_names).__name__}."
        )
    return class_names, source


# ---- which pictures train and which validate --------------------------------------------------------


def _random(seed: int, purpose: str) -> random.Random:
    return random.Random(f"nbkit-convert-{purpose}-{seed}")


def _by_class(labels: Sequence[int]) -> dict[int, list[int]]:
    """{label: the positions of its pictures}, labels in increasing order."""
    groups: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        groups.setdefault(label, []).append(position)
    return dict(sorted(groups.items()))


def validation_split(labels: Sequence[int], fraction: float, seed: int) -> list[bool]:
    """For each picture, whether it validates: `fraction` of each class (rounded), at least one of
    every class that has two pictures or more, and never a class's last training picture (a class
    with one picture stays in train)."""
    rng = _random(seed, "val")
    validates = [False] * len(labels)
    for positions in _by_class(labels).values():
        if len(positions) < 2:
            continue
        count = min(max(round(len(positions) * fraction), 1), len(positions) - 1)
        for position in rng.sample(positions, count):
            validates[position] = True
    return validates


def folds(labels: Sequence[int], count: int, seed: int) -> list[int]:
    """Each picture's fold, 0 to count-1: each class's pictures, in a seeded order, dealt round the
    folds, each class starting where the previous one stopped, so folds differ by one picture at
    most and each holds its share of every class."""
    rng = _random(seed, "folds")
    fold_of = [0] * len(labels)
    dealt = 0
    for positions in _by_class(labels).values():
        for position in rng.sample(positions, len(positions)):
            fold_of[position] = dealt % count
            dealt += 1
    return fold_of


def shuffled(positions: Sequence[int], seed: int, purpose: str) -> list[int]:
    """`positions` in a seeded order (one order per `purpose`: a split or a fold)."""
    return _random(seed, f"order-{purpose}").sample(list(positions), len(positions))
