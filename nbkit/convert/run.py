"""`convert(...)`: a competition's pictures and CSV -> the TFRecords the kit's notebooks read.

    OUTPUT/tfrecords-jpeg-512x512/{train,val,test}/00-512x512-<count>.tfrec
    OUTPUT/nbkit-dataset.json      classes, label values, submission columns, metric, folds
    OUTPUT/dataset-metadata.json   for `kaggle datasets create -p OUTPUT --dir-mode zip`
    OUTPUT/sample_submission.csv   the competition's, when given: the notebooks check their submission against it

(Without `--dir-mode` the kaggle CLI skips folders and would upload the description alone.)
Nothing half-written: OUTPUT is built in a staging folder beside it and renamed into place at the
end, so a failed or killed conversion leaves an earlier OUTPUT exactly as it was. The options are
checked before anything is read or written; the description keeps them by names relative to nothing
on this machine, so the same input gives the same bytes wherever it is converted.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbkit import __version__, atomic
from nbkit.convert import labels, pictures, sources
from nbkit.convert.sources import Picture
from nbkit.errors import DataError, ParameterError
from nbkit.images import description as descriptions
from nbkit.images import layout
from nbkit.images.description import DESCRIPTION_FILE, METRICS
from nbkit.inputs import account

_say = functools.partial(print, flush=True)
_SAMPLE_FILE = "sample_submission.csv"
_METADATA_FILE = "dataset-metadata.json"  # for `kaggle datasets create`
# What a conversion writes in OUTPUT (see nbkit.convert.run): a new one replaces exactly these.
_WRITTEN = re.compile(rf"tfrecords-jpeg-\d+x\d+|{DESCRIPTION_FILE}|{_METADATA_FILE}|{_SAMPLE_FILE}")
_NOT_KEPT = ("output", "workers", "title", "dataset_id", "competition", "metric")
_SIZES = (32, 2048)  # smallest and largest picture side: below 32 a CNN sees little, above 2048 no TPU batch fits


@dataclass
class _Group:
    """Pictures written together into their own files: a split, or one fold of train/."""

    split: str
    pictures: list[Picture]
    labels: list[int | None]


def convert(
    source: str | Path,
    output: str | Path,
    size: int,
    *,
    labels: str | Path | None = None,
    id_column: str | None = None,
    label_column: str | None = None,
    test: str | Path | None = None,
    sample_submission: str | Path | None = None,
    val_fraction: float = 0.2,
    folds: int = 0,
    fit: str = "resize",
    metric: str = "accuracy",
    class_names: Any = None,
    seed: int = 42,
    workers: int | None = None,
    skip_damaged: bool = False,
    title: str | None = None,
    dataset_id: str | None = None,
    competition: str | None = None,
) -> Path:
    """Convert SOURCE's pictures into OUTPUT (see the module docstring); returns OUTPUT. The options are
    `python -m nbkit tfrecords --help`'s; besides, `class_names` may be a {label value: name} mapping or a
    list of label values in label order, and `workers=None` is every core (1: this process).
    """
    return _convert(_Options(**locals()))


def _convert(options: _Options) -> Path:
    """`convert` with its options checked."""
    metadata = options.dataset_metadata()  # a bad id or title stops here, before minutes of encoding
    labeled, sample, tests = sources.read(options)
    found: dict[str, str] = {}
    for picture in labeled.pictures:
        found.setdefault(picture.label, picture.where)
    classes = labels.class_list(found, options.class_names)
    label_of = [classes.index(p.label, p.where) for p in labeled.pictures]
    splits, split_kind = _assign(options, labeled.pictures, label_of, classes)
    if tests:
        splits["test"] = [_Group("test", tests, [None] * len(tests))]
    empty = [p for p in chain(labeled.pictures, tests) if p.path.is_file() and p.path.stat().st_size == 0]
    if empty and (not options.skip_damaged or any(p.label is None for p in empty)):
        raise DataError(  # the cheap check before minutes of encoding
            f"{len(empty)} pictures are empty files (0 bytes): {', '.join(p.where for p in empty[:5])}. Replace "
            "them (a test picture cannot be left out: the submission needs it), or pass --skip-damaged to leave "
            "out training ones."
        )
    _say(_describe_plan(options, labeled, classes, splits, split_kind))
    _remove_killed_leftovers(options.output)
    with atomic.staged_dir(options.output) as staging:
        names, skipped, progress = pictures.write_splits(splits, staging, options, _say)
        # submission.csv's header: the sample submission's, else the labels CSV's columns, else id,label
        id_column, label_column = sample.header[:2] if sample else (labeled.id_column, labeled.label_column)
        description = descriptions.Description(
            title=metadata["title"],
            classes=classes.names,
            label_values=classes.values,
            image_sizes=(options.size,),
            id_column=id_column or "id",
            label_column=label_column or "label",
            metric=options.metric,
            competition=options.competition,
            folds=tuple(tuple(files) for files in names["train"]) if options.folds else (),
            sample_submission=_SAMPLE_FILE if sample is not None else "",
            counts={split: sum(map(layout.count_in_name, chain(*groups))) for split, groups in names.items()},
            converted_with=options.converted_with(split_kind, (labeled.id_column, labeled.label_column), skipped),
        )
        descriptions.write(staging, description)
        if sample is not None:  # the notebooks check their submission.csv against it
            shutil.copyfile(sample.path, staging / _SAMPLE_FILE)
        (staging / _METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    _say(_summary(options, description, names, skipped, progress, metadata["id"]))
    return options.output


def _remove_killed_leftovers(output: Path) -> None:
    """Delete the staging folders that killed conversions left beside OUTPUT (`.<name>.tmp-<pid>`,
    atomic.staged_dir's naming) whose process is gone; a failing one removes its own."""
    for folder in output.parent.glob(f".{output.name}.tmp-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        try:
            os.kill(int(pid) if pid.isdigit() else os.getpid(), 0)  # signal 0: is it there?
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            _say(f"  removed {folder}, left by a conversion that was killed")
        except PermissionError:  # a process we may not signal: it runs
            pass


def _assign(
    options: _Options, pictures: Sequence[Picture], label_of: Sequence[int], classes: labels.Classes
) -> tuple[dict[str, list[_Group]], str]:
    """{split: its groups}, each group's pictures in a seeded order (so every file mixes the classes),
    and how the pictures were split: "folds" (stratified), "given" (by the source) or "stratified"."""
    given = any(p.split for p in pictures)
    if options.folds:
        if given:
            raise ParameterError(
                "--folds puts every labeled picture into a fold, but the source has its own val split."
            )
        counts = Counter(label_of)
        smallest = min(counts, key=counts.__getitem__)
        if counts[smallest] < options.folds:
            raise ParameterError(
                f"--folds {options.folds}: class {classes.names[smallest]!r} has only {counts[smallest]} "
                "pictures, fewer than the folds, so some fold would lack it. Use fewer folds."
            )
        kind, names, group_of = "folds", ["train"] * options.folds, labels.folds(label_of, options.folds, options.seed)
    else:
        if given:
            validates = [p.split == "val" for p in pictures]
        else:
            validates = labels.validation_split(label_of, options.val_fraction, options.seed)
        kind, names, group_of = "given" if given else "stratified", ["train", "val"], [int(v) for v in validates]
    splits: dict[str, list[_Group]] = {}
    for number, name in enumerate(names):
        chosen = labels.shuffled([i for i, g in enumerate(group_of) if g == number], options.seed, f"{name}-{number}")
        if not chosen:  # a fold always has pictures: every class has one for each
            reason = "the source's own split names none" if given else "no class has two pictures or more"
            raise DataError(f"No {name} pictures: {reason}. Training needs both (or no val/ at all: --folds).")
        splits.setdefault(name, []).append(_Group(name, [pictures[i] for i in chosen], [label_of[i] for i in chosen]))
    return splits, kind


def _describe_plan(
    options: _Options, labeled: sources.Labeled, classes: labels.Classes, splits: dict[str, list[_Group]], kind: str
) -> str:
    """What is about to happen, in a few lines."""
    counts = ", ".join(f"{name} {sum(len(g.pictures) for g in groups):,}" for name, groups in splits.items())
    how = {
        "stratified": f"stratified validation split, {options.val_fraction:.0%} of each class",
        "given": "the source's own train/val split",
        "folds": f"{options.folds} stratified folds",
    }[kind]
    return (
        f"nbkit tfrecords: {len(labeled.pictures):,} labeled pictures of {len(classes.values)} classes in "
        f"{options.source} -> {options.output}, {options.size}x{options.size} JPEG, fit={options.fit}\n"
        f"  {how}, seed {options.seed}: {counts}{_test_inside_source(options, classes)}"
    )


def _test_inside_source(options: _Options, classes: labels.Classes) -> str:
    """A line when --test lies inside SOURCE: that folder is the test set, left out of the training pictures
    (given a class folder by mistake, the user sees it named, and the classes that remain)."""
    if options.test is None or options.source.resolve() not in options.test.resolve().parents:
        return ""
    inside = options.test.resolve().relative_to(options.source.resolve()).as_posix()
    what = "not a class" if options.labels is None else "not training pictures"
    shown = ", ".join(map(str, classes.values[:12])) + (", ..." if len(classes.values) > 12 else "")
    return f"\n  {inside}/ in SOURCE is --test: the test set, {what}; the {len(classes.values)} classes: {shown}"


def _summary(
    options: _Options,
    description: descriptions.Description,
    names: dict[str, list[list[str]]],
    skipped: list[str],
    progress: Any,  # pictures.write_splits's: pictures done and their rate
    dataset_id: str,
) -> str:
    """The closing lines: records and files per split, classes, skipped pictures, how to publish."""
    lines = [f"done: {progress.done:,} pictures, {progress.rate:,.0f} images/s"]
    for name, groups in names.items():
        files = sum(len(g) for g in groups)
        per_fold = f" ({len(groups)} folds: {', '.join(str(len(g)) for g in groups)} files)" if len(groups) > 1 else ""
        lines.append(f"  {name}: {description.counts[name]:,} records in {files} files{per_fold}")
    shown = ", ".join(f"{v}={n}" if str(v) != n else n for v, n in zip(description.label_values, description.classes))
    lines.append(f"  classes ({len(description.classes)}): {shown}")
    if skipped:
        lines.append(f"  skipped {len(skipped)} damaged pictures: {', '.join(skipped)}")
    lines.append(
        f"  wrote {options.output}: tfrecords-jpeg-{options.size}x{options.size}/, {DESCRIPTION_FILE}, "
        f"{_METADATA_FILE} (id {dataset_id})"
    )
    if dataset_id.startswith(account.PLACEHOLDER_OWNER):
        lines.append(
            "  no Kaggle user name here: convert again with --dataset-id <you>/<slug> (dataset_id=) to publish"
        )
    kaggle = Path(sys.executable).with_name("kaggle")  # the kaggle CLI of this environment, where it has one
    lines.append(
        f"  publish: {kaggle if kaggle.exists() else 'kaggle'} datasets create -p {options.output} --dir-mode zip"
    )
    return "\n".join(lines)


class _Options(SimpleNamespace):
    """The options of one `convert(...)` call, by its parameters' names (see its docstring), checked."""

    def __init__(self, **arguments: Any) -> None:
        """Paths as Paths, workers=None as every core; a ParameterError names the first unusable option."""
        for name in ("source", "output", "labels", "test", "sample_submission", "class_names"):
            if isinstance(arguments[name], (str, Path)):
                arguments[name] = Path(arguments[name])
        arguments["workers"] = pictures.cores() if arguments["workers"] is None else arguments["workers"]
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
        for option, value, allowed in (("--fit", self.fit, pictures.FITS), ("--metric", self.metric, METRICS)):
            if value not in allowed:
                raise ParameterError(f"{option} {value!r} is not one of {', '.join(allowed)}.")
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
        earlier = self.output / _METADATA_FILE
        if earlier.is_file() and not (self.dataset_id or self.title):
            try:
                kept = json.loads(earlier.read_text(encoding="utf-8"))
                account.dataset_metadata(kept["id"], kept["title"])
            except (ValueError, KeyError, TypeError) as error:
                raise ParameterError(f"{earlier}: {error}. Correct it, or pass --dataset-id and --title.") from None
            if not kept["id"].startswith(account.PLACEHOLDER_OWNER):  # no owner yet: nothing of the user's
                print(f"  keeping {earlier} (id {kept['id']}): --dataset-id or --title writes it anew", flush=True)
                return dict(kept)
        # By default from OUTPUT's name: the slug in Kaggle's letters (a-z, 0-9, -), the title with the size;
        # each 6 to 50 characters.
        name = self.output.resolve().name
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        slug = (slug if len(slug) >= 6 else f"{slug}-tfrecords".strip("-"))[:50].strip("-")
        title = f"{re.sub(r'[-_ ]+', ' ', name).strip() or 'pictures'} {self.size}px"[:50].strip()
        return account.dataset_metadata(
            self.dataset_id or account.default_dataset_id(slug),
            self.title or (title if len(title) >= 6 else f"{title} TFRecords"),
            [{"path": DESCRIPTION_FILE, "description": "classes, label values, submission columns (nbkit)"}],
            example="alice/cassava-tfrecords",
        )

    def converted_with(self, split: str, columns: tuple[str | None, str | None], skipped: list[str]) -> dict[str, Any]:
        """The options as the description keeps them: file names, not paths; the labels CSV's `columns`
        (id, label) as used; nothing that changes no record (workers, the dataset's id and title)."""
        kept = {k: v.resolve().name if isinstance(v, Path) else v for k, v in vars(self).items() if k not in _NOT_KEPT}
        kept.update(id_column=columns[0], label_column=columns[1], split=split, skipped=skipped)
        return {"nbkit": __version__, **kept, "val_fraction": self.val_fraction if split == "stratified" else None}


def _whole_number(option: str, value: object, low: int, high: int, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(f"{option} {value!r} must be a whole number from {low} to {high}: {meaning}.")
