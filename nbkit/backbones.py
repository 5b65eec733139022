"""keras.applications backbones by name (MODEL checked before any data is read), with their ImageNet
weights offline too: a copy attached on Kaggle (or given as WEIGHTS) put into Keras' own cache folder, so
the backbone is built exactly as online."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import env
from nbkit.errors import DataError, ParameterError

# How keras.applications names its no-top ImageNet files: efficientnetb0_notop.h5,
# mobilenet_v2_..._no_top.h5, NASNet-mobile-no-top.h5, ...
_NO_TOP = re.compile(r"no[-_]?top[^/]*\.h5$", re.IGNORECASE)
_URL_FILE = re.compile(r"/([^/\s:]+\.h5)\b")


def _local_copies(roots: Sequence[Path]) -> list[Path]:
    """The files of `roots`, and the no-top ImageNet files under its folders (the first of each name)."""
    found: dict[str, Path] = {}
    for root in map(Path, roots):
        for path in [root] if root.is_file() else sorted(p for p in root.rglob("*.h5") if _NO_TOP.search(p.name)):
            found.setdefault(path.name, path)
    return list(found.values())


def check_name(name: str, others: Sequence[str] = ("small_cnn",)) -> str:
    """`name` if it is a keras.applications model (or one of `others`), else a ParameterError naming MODEL."""
    import keras

    offered = [*others, *(n for n in dir(keras.applications) if n[0].isupper())]
    if name not in offered:
        same = [n for n in offered if n.lower() == str(name).lower()]
        hint = f"Did you mean {same[0]!r}? " if same else ""
        raise ParameterError(f"MODEL={name!r} is not offered. {hint}Use one of {offered}.")
    return name


def backbone(name: str, input_shape: Sequence[int], weights: str, search: Sequence[Path] | None = None) -> Any:
    """keras.applications' `name`, no top, average pooled. `weights`: "none" (random), "imagenet" (a copy
    under `search`, by default the Kaggle inputs, else downloaded), or a file or folder holding it."""
    import keras

    search = [env.detect().input_dir] if search is None else search
    constructor = getattr(keras.applications, check_name(name, others=()))
    if weights == "none":
        return constructor(include_top=False, weights=None, input_shape=tuple(input_shape), pooling="avg")
    if weights != "imagenet" and not Path(weights).exists():
        raise DataError(
            f"WEIGHTS={weights!r}: no such file or folder. Give 'imagenet', 'none' or Keras' ImageNet file."
        )
    explicit = weights != "imagenet"  # a local copy when there is one, else Keras downloads it
    copies = _local_copies([Path(weights)] if explicit else search)
    # Into Keras' cache with its own get_file (a file:// origin), so the backbone is built exactly as online;
    # a file already there is kept unless WEIGHTS names one.
    cached = [
        keras.utils.get_file(p.name, p.resolve().as_uri(), cache_subdir="models", force_download=explicit)
        for p in copies
    ]
    cache = Path(cached[0]).parent if cached else None
    if cache is not None:
        names = ", ".join(p.name for p in copies)
        print(
            f"weights: {names} from {copies[0].parent} in Keras' cache ({cache}), where keras.applications looks first"
        )
    before = set(os.listdir(cache)) if cache else set()
    try:
        found = constructor(include_top=False, weights="imagenet", input_shape=tuple(input_shape), pooling="avg")
    except Exception as error:  # Keras: a bare Exception offline; h5py: OSError; a mismatch: ValueError
        raise _weights_error(constructor.__name__, weights, [p.name for p in copies], error) from None
    downloaded = sorted(set(os.listdir(cache)) - before) if cache else []
    if explicit and downloaded:
        print(
            f"weights: WEIGHTS={weights!r} holds no {downloaded[0]}, the file keras.applications asks for, so Keras "
            "downloaded it (into its cache) and used that."
        )
    return found


def _weights_error(name: str, weights: str, offered: list[str], error: Exception) -> DataError:
    requested = _URL_FILE.search(str(error))
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
            "WEIGHTS='imagenet', which finds it under /kaggle/input; or give its path as WEIGHTS; "
            "or use WEIGHTS='none'."
        )
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    what = (
        "not a readable weights file" if isinstance(error, OSError) else f"not {name}'s ImageNet weights (without top)"
    )
    return DataError(f"WEIGHTS={weights!r} ({file}) is {what}: {first_line}")
