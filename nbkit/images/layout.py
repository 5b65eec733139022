"""The kit's data layout (that of Kaggle's TPU competitions): `<root>/tfrecords-jpeg-<s>x<s>/{train,val,test}/
NN-<s>x<s>-<count>.tfrec`, the item count of each file written in its name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from nbkit.errors import DataError, ParameterError

SPLITS = ("train", "val", "test")
_COUNT_IN_NAME = re.compile(r"-(\d+)\.tfrec$")
_SIZE_FOLDER = re.compile(r"^tfrecords-jpeg-(\d+)x\1$")


def split_folder(data_root: str | Path, image_size: int, split: str) -> str:
    """`<root>/tfrecords-jpeg-<s>x<s>/<split>`."""
    if split not in SPLITS:
        raise ParameterError(f"split={split!r} is not one of {SPLITS}.")
    return str(Path(data_root, f"tfrecords-jpeg-{image_size}x{image_size}", split))


def _visible_files(folder: str | Path, pattern: str = "*") -> list[str]:
    """The files in `folder` matching `pattern`, sorted, but not the hidden partial files of an interrupted
    write; none when the folder is not there."""
    return sorted(str(p) for p in Path(folder).glob(pattern) if not p.name.startswith("."))


def _sizes_present(data_root: str | Path) -> list[int]:
    """The image sizes of the `tfrecords-jpeg-<s>x<s>` folders in `data_root`, smallest first."""
    names = [Path(p).name for p in _visible_files(data_root, "tfrecords-jpeg-*")]
    return sorted(int(m[1]) for m in map(_SIZE_FOLDER.match, names) if m)


def _too_deep(data_root: str | Path) -> str | None:
    """The folder DATA_ROOT should have been, when it points inside the layout."""
    path = Path(data_root)
    if _SIZE_FOLDER.match(path.name):
        return str(path.parent)
    if path.name in SPLITS and _SIZE_FOLDER.match(path.parent.name):
        return str(path.parent.parent)
    return None


def choose_size(data_root: str | Path, requested: int) -> int:
    """IMAGE_SIZE: `requested` if `data_root` has its folder, or, for 0, the smallest size there."""
    if not Path(data_root).is_dir():
        raise DataError(
            f"Data root {data_root} does not exist: set DATA_ROOT to the folder that holds tfrecords-jpeg-*/."
        )
    sizes = _sizes_present(data_root)
    if requested in sizes or (requested == 0 and sizes):
        return requested or sizes[0]
    deeper = _too_deep(data_root)
    if deeper is not None:
        raise DataError(
            f"DATA_ROOT={str(data_root)!r} is inside the data's layout: set DATA_ROOT={deeper!r}, the folder "
            "that holds the tfrecords-jpeg-<size>x<size> folders."
        )
    if not sizes:
        raise DataError(
            f"No tfrecords-jpeg-<size>x<size> folder in {data_root}: set DATA_ROOT to the folder that holds them "
            "(convert pictures into that layout with `python -m nbkit tfrecords`)."
        )
    raise DataError(
        f"No tfrecords-jpeg-{requested}x{requested} folder in {data_root}: set IMAGE_SIZE to one of the sizes "
        f"there, {', '.join(map(str, sizes))} (0: the smallest)."
    )


def find_files(data_root: str | Path, image_size: int, split: str) -> list[str]:
    """The `.tfrec` files of one split, sorted; a DataError says what is missing."""
    folder = split_folder(data_root, image_size, split)
    files = _visible_files(folder, "*.tfrec")
    if files:
        return files
    choose_size(data_root, image_size)  # a missing root or size folder says so first
    raise DataError(
        f"No .tfrec files in {folder}: the {split} split is missing or empty. Re-download the data, or "
        "convert it again (python -m nbkit tfrecords)."
    )


def split_files(
    data_root: str | Path,
    image_size: int,
    folds: Sequence[Sequence[str]] = (),
    fold: int = -1,
    names: Sequence[str] = SPLITS,
    optional: Sequence[str] = (),
) -> dict[str, list[str]]:
    """The files of each split in `names`; a split in `optional` without files is left out (the test split of data
    converted without --test). With `fold` k of data converted into `folds` (each fold's file names, from its
    description), val is fold k's files and train the others'; with fold -1, the data's own train/val split."""

    def has_files(split: str) -> bool:
        return bool(_visible_files(split_folder(data_root, image_size, split), "*.tfrec"))

    names = [name for name in names if name not in optional or has_files(name)]
    if fold == -1:
        if folds and "val" in names and not has_files("val"):
            raise ParameterError(
                f"FOLD=-1, but this data was converted into {len(folds)} folds, without a val split: set FOLD to a "
                f"fold from 0 to {len(folds) - 1} to validate on it and train on the others (one run per fold; "
                "`python -m nbkit oof` scores the runs together)."
            )
        return {name: find_files(data_root, image_size, name) for name in names}
    if not folds:
        raise ParameterError(
            f"FOLD={fold}, but this data has no folds (one train/val split): use FOLD=-1, or convert the data "
            "with folds (python -m nbkit tfrecords ... --folds K)."
        )
    if not 0 <= fold < len(folds):
        raise ParameterError(f"FOLD={fold}: this data has {len(folds)} folds, 0 to {len(folds) - 1}.")
    train = {Path(name).name: name for name in find_files(data_root, image_size, "train")}
    missing = sorted({f for files in folds for f in files} - set(train))
    if missing:
        raise DataError(
            f"The description's folds name files that are not in the train split ({', '.join(missing[:3])}): "
            "the data was changed after conversion; convert it again."
        )
    chosen = {
        "train": [train[f] for k, files in enumerate(folds) if k != fold for f in files],
        "val": [train[f] for f in folds[fold]],
    }
    return {name: chosen[name] if name in chosen else find_files(data_root, image_size, name) for name in names}


def count_in_name(name: str) -> int:
    """The item count a file's name promises (`...-<count>.tfrec`)."""
    match = _COUNT_IN_NAME.search(str(name))
    if match is None:
        raise DataError(f"{name}: the file name does not end in -<count>.tfrec, so its item count is unknown.")
    return int(match.group(1))
