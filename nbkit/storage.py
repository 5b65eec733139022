"""Files on a local disk or in Google Cloud Storage (gs://, read through TensorFlow's gfile).

Local paths use the standard library only; a gs:// URL imports TensorFlow when first used (a remote
TPU reads its data from GCS, with the credential `nbkit.inputs.datasets` sets up).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import IO, Any


def is_remote(path: str | Path) -> bool:
    """True for a gs:// URL."""
    return str(path).startswith("gs://")


def _gfile() -> Any:
    from nbkit.logs import quiet_tensorflow

    with quiet_tensorflow():
        import tensorflow as tf

    return tf.io.gfile


def is_dir(path: str | Path) -> bool:
    """Whether the folder exists."""
    return _gfile().isdir(str(path)) if is_remote(path) else Path(path).is_dir()


def exists(path: str | Path) -> bool:
    """Whether the file or folder exists."""
    return _gfile().exists(str(path)) if is_remote(path) else Path(path).exists()


def join(folder: str | Path, *names: str) -> str:
    """`folder/name/...` for a local folder or a gs:// URL."""
    return "/".join([str(folder).rstrip("/"), *names]) if is_remote(folder) else str(Path(folder, *names))


def list_folder(folder: str | Path, pattern: str = "*") -> list[str]:
    """The visible files in `folder` whose names match `pattern`, sorted (hidden files, such as the
    partial files of an interrupted write, are left out)."""
    if is_remote(folder):
        names = [name.rstrip("/") for name in _gfile().listdir(str(folder))]
    else:
        names = os.listdir(folder) if Path(folder).is_dir() else []
    return sorted(join(folder, n) for n in names if fnmatch.fnmatch(n, pattern) and not n.startswith("."))


def walk_files(root: str | Path, suffix: str) -> list[str]:
    """Every visible file under `root` whose name ends with `suffix`, sorted."""
    walk = _gfile().walk(str(root)) if is_remote(root) else os.walk(root)
    return sorted(
        f"{folder.rstrip('/')}/{name}"
        for folder, _, names in walk
        for name in names
        if name.endswith(suffix) and not name.startswith(".")
    )


def open_binary(path: str | Path) -> IO[bytes]:
    """The file opened for reading bytes."""
    return _gfile().GFile(str(path), "rb") if is_remote(path) else open(path, "rb")


def size(path: str | Path) -> int:
    """The file's size in bytes."""
    return _gfile().stat(str(path)).length if is_remote(path) else Path(path).stat().st_size
