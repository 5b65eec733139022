"""The converter's options, checked before anything is read or written, and what of them the
dataset description keeps (names relative to nothing on this machine: the same input gives the
same bytes wherever it is converted)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbkit import __version__
from nbkit.convert.pictures import FITS, cores
from nbkit.errors import ParameterError
from nbkit.images.description import DESCRIPTION_FILE, METRICS
from nbkit.inputs import account

METADATA_FILE = "dataset-metadata.json"  # for `kaggle datasets create`
# What a conversion writes in OUTPUT (see nbkit.convert.run): a new one replaces exactly these.
_WRITTEN = re.compile(rf"tfrecords-jpeg-\d+x\d+|{DESCRIPTION_FILE}|{METADATA_FILE}|sample_submission\.csv")
_NOT_KEPT = ("output", "workers", "title", "dataset_id", "competition", "metric")
_SIZES = (32, 2048)  # smallest and largest picture side: below 32 a CNN sees little, above 2048 no TPU batch fits


class Options(SimpleNamespace):
    """The options of one `convert(...)` call, by its parameters' names (see its docstring), checked."""

    def __init__(self, **arguments: Any) -> None:
        """Paths as Paths, workers=None as every core; a ParameterError names the first unusable option."""
        for name in ("source", "output", "labels", "test", "sample_submission", "class_names"):
            if isinstance(arguments[name], (str, Path)):
                arguments[name] = Path(arguments[name])
        arguments["workers"] = cores() if arguments["workers"] is None else arguments["workers"]
        super().__init__(**arguments)
        self._check()

    def _check(self) -> None:
        _whole_number("--size", self.size, *_SIZES, "the side of the square pictures, e.g. 512")
        if not (isinstance(self.val_fraction, (int, float)) and 0 < self.val_fraction <= 0.9):
            raise ParameterError(
                f"--val-fraction {self.val_fraction!r} must be above 0 and at most 0.9 (e.g. 0.2: a fifth "
                "of each class validates); for no validation split use --folds."
            )
        if self.folds != 0:
            _whole_number("--folds", self.folds, 2, 100, "0 for a train/val split, or 2 or more folds, e.g. 5")
        if self.fit not in FITS:
            raise ParameterError(f"--fit {self.fit!r} is not one of {', '.join(FITS)}.")
        if self.metric not in METRICS:
            raise ParameterError(f"--metric {self.metric!r} is not one of {', '.join(METRICS)}.")
        _whole_number("--workers", self.workers, 1, 1024, "the processes that encode pictures")
        _whole_number("--seed", self.seed, 0, 2**63, "any whole number")
        output = self.output  # replaced as a whole: never a file, an input, or a folder of other things
        if output.exists() and not output.is_dir():
            raise ParameterError(f"OUTPUT {output} is a file: give a folder for the converted dataset.")
        for path in filter(None, (self.source, self.labels, self.test, self.sample_submission)):
            if output.resolve() == path.resolve() or output.resolve() in path.resolve().parents:
                raise ParameterError(
                    f"OUTPUT {output} holds the input {path}, and converting replaces OUTPUT as a whole: "
                    "give another folder."
                )
        parent = next(p for p in output.absolute().parents if p.exists())
        if not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
            raise ParameterError(
                f"OUTPUT {output} cannot be written: {parent} is not a folder you may write in. "
                "Give an OUTPUT in a folder of yours."
            )
        entries = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
        others = [e for e in entries if DESCRIPTION_FILE not in entries or not _WRITTEN.fullmatch(e)]
        if others:
            raise ParameterError(
                f"OUTPUT {output} holds {', '.join(others[:5])}{', ...' * (len(others) > 5)}, which the converter "
                "did not write; converting replaces OUTPUT as a whole and would delete them: move them out, "
                "or give a new or empty folder."
            )

    def dataset_metadata(self) -> dict[str, Any]:
        """dataset-metadata.json's contents, checked: OUTPUT's own (edits kept) where it has an owner,
        unless --dataset-id or --title asks for new ones."""
        earlier = self.output / METADATA_FILE
        if earlier.is_file() and not (self.dataset_id or self.title):
            try:
                kept = json.loads(earlier.read_text(encoding="utf-8"))
                account.dataset_metadata(kept["id"], kept["title"])
            except (ValueError, KeyError, TypeError) as error:
                raise ParameterError(f"{earlier}: {error}. Correct it, or pass --dataset-id and --title.") from None
            if not kept["id"].startswith(account.PLACEHOLDER_OWNER):  # no owner yet: nothing of the user's
                print(f"  keeping {earlier} (id {kept['id']}): --dataset-id or --title writes it anew", flush=True)
                return dict(kept)
        return account.dataset_metadata(
            self.dataset_id or account.default_dataset_id(self.default_slug()),
            self.title or self.default_title(),
            [{"path": DESCRIPTION_FILE, "description": "classes, label values, submission columns (nbkit)"}],
            example="alice/cassava-tfrecords",
        )

    def default_title(self) -> str:
        """The dataset's title: the output folder's name and the size, 6 to 50 characters."""
        base = re.sub(r"[-_ ]+", " ", self.output.resolve().name).strip() or "pictures"
        title = f"{base} {self.size}px"[:50].strip()
        return title if len(title) >= 6 else f"{title} TFRecords"

    def default_slug(self) -> str:
        """The dataset's slug: the output folder's name in Kaggle's letters (a-z, 0-9, -)."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.output.resolve().name.lower()).strip("-")
        if len(slug) < 6:
            slug = f"{slug}-tfrecords".strip("-")
        return slug[:50].strip("-")

    def converted_with(self, split: str, columns: tuple[str | None, str | None], skipped: list[str]) -> dict[str, Any]:
        """The options as the description keeps them: file names, not paths; the labels CSV's `columns`
        (id, label) as used; nothing that changes no record (workers, the dataset's id and title)."""
        kept = {k: v.resolve().name if isinstance(v, Path) else v for k, v in vars(self).items() if k not in _NOT_KEPT}
        kept.update(id_column=columns[0], label_column=columns[1], split=split, skipped=skipped)
        return {"nbkit": __version__, **kept, "val_fraction": self.val_fraction if split == "stratified" else None}


def _whole_number(option: str, value: object, low: int, high: int, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(f"{option} {value!r} must be a whole number from {low} to {high}: {meaning}.")
