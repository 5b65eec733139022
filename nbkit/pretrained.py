"""ImageNet weights for keras.applications, also with the internet off. Keras looks for each weights
file in its own cache folder (`$KERAS_HOME/models`, default `~/.keras/models`) before downloading it,
and checks the file against its checksum; that is how Kaggle users serve weights offline. So a local
copy (an attached Kaggle dataset or model holding Keras' file, or `WEIGHTS=<the file or its folder>`)
is put into that folder with Keras' own `get_file`, and keras.applications builds the backbone exactly
as `weights="imagenet"` does online (EfficientNet adds its normalisation layer only then)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit.errors import DataError

# How keras.applications names its no-top ImageNet files: efficientnetb0_notop.h5,
# mobilenet_v2_..._no_top.h5, NASNet-mobile-no-top.h5, ...
NO_TOP = re.compile(r"no[-_]?top[^/]*\.h5$", re.IGNORECASE)
URL_FILE = re.compile(r"/([^/\s:]+\.h5)\b")


def local_copies(roots: Sequence[Path], explicit: bool) -> list[Path]:
    """The weights files to offer Keras: `roots[0]` itself when it is a file the user named (`explicit`),
    else the no-top ImageNet files under the folders (the first of each name)."""
    found: dict[str, Path] = {}
    for root in map(Path, roots):
        if root.is_file():
            files = [root] if explicit or NO_TOP.search(root.name) else []
        else:
            files = sorted(p for p in root.rglob("*.h5") if NO_TOP.search(p.name)) if root.is_dir() else []
        for path in files:
            found.setdefault(path.name, path)
    return list(found.values())


def copy_into_cache(files: Sequence[Path], replace: bool) -> Path | None:
    """Put each file into Keras' cache folder with Keras' own `get_file` (from a file:// origin); a
    file of that name already there is kept unless `replace` (a file the user named). The folder."""
    import keras

    targets = [
        keras.utils.get_file(path.name, path.resolve().as_uri(), cache_subdir="models", force_download=replace)
        for path in files
    ]
    return Path(targets[0]).parent if targets else None


def backbone(name: str, input_shape: Sequence[int], weights: str, search: Sequence[Path] = ()) -> Any:
    """keras.applications' `name` without its top, average pooled: with random weights (`weights`
    "none"), or ImageNet's ("imagenet": a local copy under one of the `search` folders, e.g. the
    attached Kaggle inputs, else downloaded once into Keras' cache; or that file, or a folder holding it,
    for running with the internet off)."""
    import keras

    constructor = getattr(keras.applications, name)
    if weights == "none":
        return constructor(include_top=False, weights=None, input_shape=tuple(input_shape), pooling="avg")
    if weights != "imagenet" and not Path(weights).exists():
        raise DataError(
            f"WEIGHTS={weights!r}: no such file or folder. Give 'imagenet', 'none' or Keras' ImageNet file."
        )
    return imagenet_backbone(constructor, tuple(input_shape), weights, search)


def imagenet_backbone(constructor: Any, input_shape: tuple[int, ...], weights: str, search: Sequence[Path]) -> Any:
    """keras.applications' ImageNet backbone (no top, average pooling), its weights file taken from a
    local copy when there is one (WEIGHTS="imagenet": under the `search` folders; else WEIGHTS itself),
    else downloaded by Keras. Says what it linked; a DataError names the file when it cannot."""
    explicit = weights != "imagenet"
    copies = local_copies([Path(weights)] if explicit else search, explicit)
    cache = copy_into_cache(copies, replace=explicit)
    if cache is not None:
        names = ", ".join(p.name for p in copies)
        print(
            f"weights: {names} from {copies[0].parent} in Keras' cache ({cache}), where keras.applications looks first"
        )
    before = set(os.listdir(cache)) if cache else set()
    try:
        backbone = constructor(include_top=False, weights="imagenet", input_shape=input_shape, pooling="avg")
    except Exception as error:  # Keras: a bare Exception offline; h5py: OSError; a mismatch: ValueError
        raise _weights_error(constructor.__name__, weights, [p.name for p in copies], error) from None
    downloaded = sorted(set(os.listdir(cache)) - before) if cache else []
    if explicit and downloaded:
        print(
            f"weights: WEIGHTS={weights!r} holds no {downloaded[0]}, the file keras.applications asks for, so Keras "
            "downloaded it (into its cache) and used that."
        )
    return backbone


def _weights_error(name: str, weights: str, offered: list[str], error: Exception) -> DataError:
    requested = URL_FILE.search(str(error))
    file = requested[1] if requested else (offered[0] if offered else "its ImageNet weights file")
    if "URL fetch failure" in str(error) or isinstance(error, (ConnectionError, TimeoutError)):
        if file in offered:
            return DataError(
                f"{weights if weights != 'imagenet' else 'The attached ' + file} is not the {file} keras.applications "
                "expects: its checksum differs, so it is damaged or another file. Attach the original file (from "
                "~/.keras/models/ after one online run)."
            )
        if weights != "imagenet":
            return DataError(
                f"WEIGHTS={weights!r} is not {file}, the ImageNet file keras.applications asks for (without its "
                "top), and holds no file of that name."
            )
        return DataError(
            f"Could not download {file}, the ImageNet weights of {name} (is the internet off?). Offline: attach a "
            f"Kaggle dataset holding {file} (Keras keeps it in ~/.keras/models/ after one online run) and keep "
            "WEIGHTS='imagenet', which finds it under /kaggle/input; or give its path as WEIGHTS; or use WEIGHTS='none'."
        )
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    what = (
        "not a readable weights file" if isinstance(error, OSError) else f"not {name}'s ImageNet weights (without top)"
    )
    return DataError(f"WEIGHTS={weights!r} ({file}) is {what}: {first_line}")
