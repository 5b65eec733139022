"""Files on a local disk or in Google Cloud Storage (gs://, through TensorFlow's gfile, imported on first
use). gfile's errors become DataErrors that say which: no such bucket or path, no permission, no network
(gfile's `isdir` and `walk` hide them all as "not there", so those are asked through `stat`)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from nbkit.errors import DataError


def is_remote(path: str | Path) -> bool:
    return str(path).startswith("gs://")


def user_path(path: str | Path) -> str:
    """A path the user gave, `~` expanded (gs:// URLs and Kaggle handles as they are)."""
    return str(path) if is_remote(path) else os.path.expanduser(str(path))


def _gfile() -> Any:
    from nbkit.logs import quiet_tensorflow

    with quiet_tensorflow():
        import tensorflow as tf

    return tf.io.gfile


# ---- gs:// errors, in words ---------------------------------------------------------------------

_ACCESS = (
    "attach the dataset to this notebook with 'Add Input' (its kernels may read its GCS copy), or, for a private "
    "dataset, set up this kernel's Google Cloud credential (Add-ons -> Google Cloud Services, as in Kaggle's TPU "
    "docs: nbkit.inputs.secrets.use_gcloud_credential)"
)


def _gcs_error(path: str | Path, error: Exception) -> Exception:
    """The DataError for gfile's `error` on `path`; other exceptions as they are."""
    kinds = {cls.__name__ for cls in type(error).__mro__}
    if "OpError" not in kinds:  # TensorFlow's base class of gfile's errors
        return error
    name, said = type(error).__name__, str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
    if name == "NotFoundError":
        return DataError(
            f"{path}: no such bucket or path in Google Cloud Storage ({said}). Check the gs:// URL (a Kaggle "
            "dataset's GCS path changes with its version: KaggleDatasets().get_gcs_path() gives the current one)."
        )
    if name in ("PermissionDeniedError", "UnauthenticatedError"):
        return DataError(f"No permission to read {path} ({name}): {_ACCESS}.")
    # Offline, gfile says FailedPrecondition: "Error executing an HTTP request: libcurl code 6 ...".
    if name in ("UnavailableError", "DeadlineExceededError") or "libcurl code" in said:
        return DataError(
            f"Cannot reach Google Cloud Storage for {path} ({name}: {said}): is the internet on? (On Kaggle: "
            "Settings -> Internet on, or read the attached copy under /kaggle/input.)"
        )
    return DataError(f"Google Cloud Storage cannot give {path}: {name}: {said}")


def _remote(path: str | Path, call: Callable[[Any], Any]) -> Any:
    """`call(gfile)`, its errors for `path` in words."""
    try:
        return call(_gfile())
    except Exception as error:
        raise _gcs_error(path, error) from None


def _remote_stat(path: str | Path) -> Any | None:
    """gfile's stat of a gs:// path, or None where nothing is there (a DataError for any other problem)."""
    try:
        return _gfile().stat(str(path))
    except Exception as error:
        if type(error).__name__ != "NotFoundError":
            raise _gcs_error(path, error) from None
    bucket = "gs://" + str(path)[len("gs://") :].split("/")[0] + "/"
    _remote(bucket, lambda gfile: gfile.stat(bucket))  # a bucket that does not exist: say so, not "no path"
    return None


def _not_there(path: str | Path) -> DataError:
    if is_remote(path):
        where = "no such bucket or path in Google Cloud Storage"
    else:
        where = "not a folder" if Path(path).exists() else "no such file or folder"
    return DataError(f"{path}: {where}. Check the path (DATA_ROOT, DATASET) and that the data is there.")


# ---- files and folders --------------------------------------------------------------------------


def is_dir(path: str | Path) -> bool:
    if not is_remote(path):
        return Path(path).is_dir()
    found = _remote_stat(path)
    return found is not None and found.is_directory


def exists(path: str | Path) -> bool:
    return _remote_stat(path) is not None if is_remote(path) else Path(path).exists()


def join(folder: str | Path, *names: str) -> str:
    """`folder/name/...` for a local folder or a gs:// URL."""
    return "/".join([str(folder).rstrip("/"), *names]) if is_remote(folder) else str(Path(folder, *names))


def list_folder(folder: str | Path, pattern: str = "*") -> list[str]:
    """The visible files in `folder` matching `pattern`, sorted (not the hidden partial files of an
    interrupted write); none when the folder is not there."""
    if not is_dir(folder):
        return []
    if is_remote(folder):
        names = [name.rstrip("/") for name in _remote(folder, lambda gfile: gfile.listdir(str(folder)))]
    else:
        names = os.listdir(folder)
    return sorted(join(folder, n) for n in names if fnmatch.fnmatch(n, pattern) and not n.startswith("."))


def _raise(error: Exception) -> None:
    raise error


def walk_files(root: str | Path, suffix: str) -> list[str]:
    """Every visible file under the folder `root` whose name ends with `suffix`, sorted."""
    if not is_dir(root):
        raise _not_there(root)
    if is_remote(root):
        walk = _remote(root, lambda gfile: list(gfile.walk(str(root), onerror=_raise)))
    else:
        walk = os.walk(root)
    return sorted(
        f"{folder.rstrip('/')}/{name}"
        for folder, _, names in walk
        for name in names
        if name.endswith(suffix) and not name.startswith(".")
    )


def open_binary(path: str | Path) -> IO[bytes]:
    if not is_remote(path):
        return open(path, "rb")
    if _remote_stat(path) is None:  # gfile opens lazily: ask now, so the error names the problem
        raise _not_there(path)
    return _remote(path, lambda gfile: gfile.GFile(str(path), "rb"))


def size(path: str | Path) -> int:
    return _remote(path, lambda gfile: gfile.stat(str(path)).length) if is_remote(path) else Path(path).stat().st_size
