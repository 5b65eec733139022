"""Where the pictures are and what they are: the labeled pictures of a competition (a CSV of ids and
labels beside a folder of pictures, or one sub-folder per class) and its test pictures.

Ids stay as the competition writes them: a CSV may name `1000015157.jpg` or `abc` for `abc.png`,
and either matches its file. In the folder form a picture's id is its path under SOURCE
(`daisy/123.jpg`).
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from nbkit.convert import labels
from nbkit.convert.pictures import SUFFIXES
from nbkit.errors import DataError, ParameterError

_VAL_FOLDERS = ("val", "valid", "validation")
_SHOWN = 5  # problems named in one message; the rest are counted
_say = functools.partial(print, flush=True)
_nfc = functools.partial(unicodedata.normalize, "NFC")


@dataclass(frozen=True)
class Picture:
    """One picture: its file, its id as the competition writes it, its label as written (None for a
    test picture), where it was named (for messages), and its split when the source gives one."""

    path: Path
    id: str
    label: str | None
    where: str
    split: str | None = None


@dataclass(frozen=True)
class Labeled:
    """The labeled pictures and what the source says about the submission's columns."""

    pictures: list[Picture]
    id_column: str | None  # the labels CSV's columns; None in the folder form
    label_column: str | None
    ids_with_extension: bool  # how the labels CSV writes ids (test ids follow it when nothing else says)


def _visible(path: Path) -> bool:
    """Not hidden, not macOS's `._*` resource forks or a zip's __MACOSX folder."""
    return not path.name.startswith(".") and path.name != "__MACOSX"


def _list_pictures(
    folder: Path, leave_out: Iterable[Path] = (), root: Path | None = None, seen: set[Path] | None = None
) -> list[PurePosixPath]:
    """The pictures under `folder` (any depth, any letter case of the suffix), as sorted paths
    relative to it; hidden files and the folders in `leave_out` are skipped. Each picture once:
    links that lead back into `root` (default `folder`) or to what `seen` (real paths) holds are
    left out and said, as are the files of kinds not read (.gif, .heic, ...)."""
    leave_out, root = {p.resolve() for p in leave_out}, (root or folder).resolve()
    seen = set() if seen is None else seen
    found, todo, links, others = [], [folder], [], Counter[str]()
    while todo:
        current = todo.pop()
        for entry in current.iterdir():
            real = entry.resolve()
            if not _visible(entry) or real in leave_out:
                continue
            if real in seen or (entry.is_symlink() and root in (real, *real.parents)):
                links.append(f"{entry.relative_to(folder)} -> {real}")
            elif entry.is_dir():
                todo.append(entry)
            elif entry.suffix.lower() in SUFFIXES:
                found.append(PurePosixPath(entry.relative_to(folder).as_posix()))
            else:
                others[entry.suffix.lower() or entry.name] += 1
            seen.add(real)
    if links:
        _say(f"  left out {len(links)} links to pictures read once already (or a loop): {'; '.join(links[:_SHOWN])}")
    if others:
        kinds = ", ".join(f"{count} {kind}" for kind, count in others.most_common())
        _say(f"  left out {others.total()} files in {folder} that are not pictures of {' '.join(SUFFIXES)}: {kinds}")
    return sorted(found)


def _existing_folder(path: str | Path, option: str) -> Path:
    """`path` as a folder, or a ParameterError saying it is not one."""
    path = Path(path)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise ParameterError(f"{option} {path} {what}: give the folder that holds the pictures.")
    return path


def _problems(kind: str, found: Sequence[str], advice: str) -> DataError:
    """One DataError for several problems of one kind: the first few named, the rest counted."""
    shown = "; ".join(found[:_SHOWN]) + (f"; and {len(found) - _SHOWN} more" if len(found) > _SHOWN else "")
    return DataError(f"{len(found)} {kind}: {shown}. {advice}")


# ---- the folder form: SOURCE/<class>/..., or SOURCE/train/<class>/ + SOURCE/val/<class>/ ----------


def _subfolders(folder: Path, leave_out: Sequence[Path] = ()) -> list[Path]:
    """The visible sub-folders of `folder`, sorted, less those in `leave_out` (resolved paths)."""
    return [p for p in sorted(folder.iterdir()) if p.is_dir() and _visible(p) and p.resolve() not in leave_out]


def _split_parts(source: Path, leave_out: Sequence[Path]) -> dict[str | None, Path]:
    """{split: the folder of its class folders}: {None: SOURCE} (one folder per class), or, when
    SOURCE/train/ holds class folders, train/ and a val/ (valid/, validation/) beside it (a test/
    there is left alone: give it with --test). {None: train/} when there is no val folder."""
    folders = {p.name: p for p in _subfolders(source, leave_out)}
    if "train" not in folders or not _subfolders(folders["train"], leave_out):
        return {None: source}
    val_name = next((name for name in _VAL_FOLDERS if name in folders), None)
    others = sorted(set(folders) - {"train", "test", val_name})
    if others:
        raise DataError(
            f"{source} holds train/ (with class folders) and also {', '.join(others)}: give SOURCE as one folder "
            "per class, or as train/ and val/ folders of class folders, and move the rest out."
        )
    return {"train": folders["train"], "val": folders[val_name]} if val_name else {None: folders["train"]}


def _from_folders(source: Path, leave_out: Sequence[Path] = ()) -> Labeled:
    """One sub-folder per class (the folder names are the labels); the competition's own split when
    SOURCE holds train/ and val/ (or valid/, validation/) folders of class folders."""
    leave_out = [p.resolve() for p in leave_out]
    pictures, seen = [], set()
    for split, part in _split_parts(source, leave_out).items():
        classes = _subfolders(part, leave_out)
        if not classes:
            raise DataError(f"{part} has no class folders: put the pictures in one sub-folder per class.")
        found = _list_pictures(part, leave_out, source, seen)
        loose = [str(p) for p in found if len(p.parts) == 1]
        if loose:
            raise DataError(
                f"{part} holds pictures directly ({', '.join(loose[:3])}), but without a labels CSV "
                "each class needs its own sub-folder: move them into one folder per class, or give --labels CSV."
            )
        named = {relative.parts[0] for relative in found}
        empty = [str(folder) for folder in classes if folder.name not in named]
        if empty:
            raise DataError(f"Class folder {empty[0]} holds no pictures ({' '.join(SUFFIXES)}): add some or remove it.")
        for relative in found:  # sorted: class by class
            picture_id = (part / relative).relative_to(source).as_posix()
            pictures.append(Picture(part / relative, picture_id, relative.parts[0], picture_id, split))
    return Labeled(pictures, None, None, ids_with_extension=False)


# ---- the CSV form: SOURCE holds the pictures the CSV names ---------------------------------------


def _finder(folder: Path, files: Sequence[PurePosixPath]) -> Callable[[str], tuple[PurePosixPath | None, bool, str]]:
    """find(id) -> (the file of `files` the id names or None, whether the id carries the suffix, what is
    wrong): by relative path, the suffix in any letter case, or without it; in either Unicode form
    (macOS writes `é` in file names as e + accent, a CSV mostly as one character)."""
    by_name = {_nfc(str(file.with_suffix(file.suffix.lower()))): file for file in files}
    by_stem: dict[str, list[PurePosixPath]] = {}
    for file in files:
        by_stem.setdefault(_nfc(str(file.with_suffix(""))), []).append(file)

    def find(picture_id: str) -> tuple[PurePosixPath | None, bool, str]:
        name = PurePosixPath(_nfc(picture_id))
        if str(name.with_suffix(name.suffix.lower())) in by_name:
            return by_name[str(name.with_suffix(name.suffix.lower()))], True, ""
        found = by_stem.get(str(name), [])
        if len(found) > 1:
            return None, False, f"{picture_id!r} could be any of {', '.join(map(str, found))}"
        return (found[0], False, "") if found else (None, False, f"no picture {picture_id!r} in {folder}")

    return find


def _match(
    table: labels.Table,
    folder: Path,
    files: Sequence[PurePosixPath],
    option: str,
    id_column: str,
    label_column: str | None = None,
) -> tuple[list[Picture], bool]:
    """(the pictures `table` (given as `option`) names, each matched to its file among `files` in `folder`;
    whether every id carries its suffix): every line a picture, every picture a line. With `label_column`, labeled."""
    find = _finder(folder, files)
    pictures, seen, missing, used, suffixed = [], {}, [], {}, []
    for line, row in table.rows:
        picture_id, label = row.get(id_column, ""), row.get(label_column, "") if label_column else None
        where = f"{table.path.name} line {line} (id {picture_id!r})"
        if not picture_id:
            raise DataError(f"{table.path.name} line {line} has no {id_column}: fill it in or delete the line.")
        if label == "":
            raise DataError(f"{where} has an empty {label_column}: fill it in or delete the line.")
        if picture_id in seen:
            raise DataError(f"{where} repeats the id of line {seen[picture_id]}: each picture needs one line.")
        seen[picture_id] = line
        file, with_suffix, wrong = find(picture_id)
        if file is None:
            missing.append(f"line {line}: {wrong}")
            continue
        if file in used:
            raise DataError(f"{where} names the same picture as line {used[file]} ({file}): keep one line.")
        used[file] = line
        suffixed.append(with_suffix)
        pictures.append(Picture(folder / file, picture_id, label, where))
    if missing:
        raise _problems(f"lines of {table.path.name} name no picture", missing, f"Check {option} and {folder}.")
    unnamed = [f"{folder.name}/{file}" for file in files if file not in used]
    if unnamed:
        raise _problems(
            f"pictures in {folder} have no line in {table.path.name}",
            unnamed,
            f"Add a line for each to {table.path.name}, or move them out of {folder}.",
        )
    return pictures, all(suffixed)


def _from_csv(
    source: Path,
    table: labels.Table,
    id_column: str | None,
    label_column: str | None,
    leave_out: Sequence[Path] = (),
) -> Labeled:
    """The pictures a labels CSV names (id and label per line), each matched to its file in SOURCE."""
    id_column = table.column(id_column, 0, "--id-column")
    label_column = table.column(label_column, 1, "--label-column")
    files = _list_pictures(source, leave_out)
    pictures, suffixed = _match(table, source, files, "--labels", id_column, label_column)
    return Labeled(pictures, id_column, label_column, ids_with_extension=suffixed)


# ---- test pictures -------------------------------------------------------------------------------


def _find_test_pictures(test: Path, sample: labels.Table | None, ids_with_extension: bool) -> list[Picture]:
    """The test pictures, each with its id as the sample submission writes it (in its order), or,
    without one, as the labels CSV writes ids (with or without the suffix; the folder form: without)."""
    files = _list_pictures(test)
    if not files:
        raise DataError(f"The test folder {test} holds no pictures ({' '.join(SUFFIXES)}).")
    if sample is not None:
        return _match(sample, test, files, "--sample-submission", sample.column(None, 0, ""))[0]
    pictures, seen = [], {}
    for file in files:
        picture_id = str(file) if ids_with_extension else str(file.with_suffix(""))
        if picture_id in seen:
            raise DataError(f"Test pictures {seen[picture_id]} and {file} would both have the id {picture_id!r}.")
        seen[picture_id] = file
        pictures.append(Picture(test / file, picture_id, None, f"{test.name}/{file}"))
    return pictures


def read(options: Any) -> tuple[Labeled, labels.Table | None, list[Picture]]:
    """The labeled pictures, the sample submission (or None) and the test pictures (maybe none) that
    `options` (of nbkit.convert.run.convert) name."""
    source = _existing_folder(options.source, "SOURCE")
    test = _existing_folder(options.test, "--test") if options.test is not None else None
    leave_out = [p for p in (test, options.output) if p is not None]
    if options.labels is not None:
        table = labels.read_csv(options.labels, "--labels", delimiters=",;\t")
        labeled = _from_csv(source, table, options.id_column, options.label_column, leave_out)
    elif options.id_column or options.label_column:
        raise ParameterError("--id-column and --label-column name columns of --labels CSV: give it.")
    else:
        labeled = _from_folders(source, leave_out)
    sample = None
    if options.sample_submission is not None:
        if test is None:
            raise ParameterError("--sample-submission names the test pictures' ids: give --test FOLDER too.")
        sample = labels.read_csv(options.sample_submission, "--sample-submission")
        if len(sample.header) < 2:
            raise DataError(f"{sample.path.name} has {len(sample.header)} column; a submission needs id and label.")
    tests = _find_test_pictures(test, sample, labeled.ids_with_extension) if test is not None else []
    both = {p.path.resolve() for p in tests} & {p.path.resolve() for p in labeled.pictures} if tests else set()
    if both:
        raise ParameterError(
            f"--test {test} holds {len(both)} of the training pictures (e.g. {min(both)}): a test split must be "
            "pictures the model never trained on. Give the competition's test folder, apart from SOURCE."
        )
    return labeled, sample, tests
