"""Writes that a crash or a kill cannot leave half done: write beside the target, then rename.

Partial files are hidden (`.partial-<name>`), keep the target's suffix (Keras insists on `.keras`
and `.weights.h5`), and are never mistaken for data: folder listings in nbkit skip hidden files.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from nbkit.storage import user_path

PARTIAL_PREFIX = ".partial-"


def partial_path(path: str | Path) -> Path:
    """Where `path` is written before it is renamed into place."""
    path = Path(path)
    return path.with_name(PARTIAL_PREFIX + path.name)


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a partial path to write `path`'s new content to; it replaces `path` only if the block
    succeeds. On an error the partial file goes and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(path)
    try:
        yield partial
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    os.replace(partial, path)


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a partial file renamed into place."""
    with replacing(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | Path, content: bytes) -> Path:
    """Write `content` to `path` through a partial file renamed into place."""
    with replacing(path) as partial:
        partial.write_bytes(content)
    return Path(path)


@contextlib.contextmanager
def staged_dir(target: str | Path) -> Iterator[Path]:
    """A fresh folder beside `target` to fill; it replaces `target` only if the block succeeds.
    On an error the staging folder goes and `target` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


class RunOutputs:
    """A notebook run's output files, all or nothing: written into `folder/.incomplete-run/` and moved
    into `folder` by `publish()` when the run ends. A run that fails or is killed leaves the previous
    run's outputs exactly as they were; its own partial files stay in the staging folder (the next
    run moves them to `.failed-run/` and says so). Files a run updates in place (checkpoints) are
    written straight into `folder`, not through here.

    One run at a time per folder: the constructor locks `folder/.run.lock` (an OS lock, which dies with
    its process, so a killed run never blocks the next) and refuses a folder another run holds;
    `publish()` releases it. A new RunOutputs in the same process (a cell run again) takes the lock
    over. The constructor writes into the folder, so calling it in the first cell checks at once
    that the folder can be written.

        outputs = RunOutputs(output_dir, "OUTPUT_DIR")
        plots.batch(..., path=outputs / "batch.png")
        outputs.publish()
    """

    STAGING, FAILED, LOCK = ".incomplete-run", ".failed-run", ".run.lock"

    def __init__(self, folder: str | Path, parameter: str = "OUTPUT_DIR") -> None:
        from nbkit.errors import ParameterError

        self.folder = Path(user_path(folder))
        if self.folder.exists() and not self.folder.is_dir():
            raise ParameterError(f"{parameter}={str(folder)!r} is a file, not a folder: give a folder for the outputs.")
        self.staging = self.folder / self.STAGING
        self.earlier_failure = ""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            _take_lock(self.folder / self.LOCK, self)
            if self.staging.exists():  # an earlier run stopped before publishing (it holds no lock: it is over)
                failed = self.folder / self.FAILED
                shutil.rmtree(failed, ignore_errors=True)
                self.staging.rename(failed)
                self.earlier_failure = f"An earlier run did not finish: its partial outputs are in {failed}. "
            self.staging.mkdir()
        except InUseError as error:
            raise ParameterError(
                f"{parameter}={str(folder)!r} is in use by another run ({error}): wait until it finishes (or stop "
                f"it), or give this run another {parameter}."
            ) from None
        except OSError as error:
            raise ParameterError(
                f"{parameter}={str(folder)!r} cannot be written ({error.strerror or error}): give a writable folder "
                "(on Kaggle: under /kaggle/working)."
            ) from None

    def __truediv__(self, name: str) -> Path:
        return self.staging / name

    def describe(self) -> str:
        """One line: where this run's outputs go, and what happened to an unfinished earlier run's."""
        return (
            f"{self.earlier_failure}Outputs are written to {self.staging} and moved to {self.folder} when the run ends."
        )

    def publish(self) -> list[str]:
        """Move every staged file and folder into `folder` (replacing the previous run's), drop the
        staging folder and release the folder's lock; returns the names moved."""
        names = sorted(p.name for p in self.staging.iterdir())
        for name in names:
            target = self.folder / name
            if (self.staging / name).is_dir() and target.is_dir():
                old = self.folder / f".{name}.old"
                shutil.rmtree(old, ignore_errors=True)
                target.rename(old)
                (self.staging / name).rename(target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.staging / name, target)
        self.staging.rmdir()
        _release_lock(self.folder / self.LOCK, self)
        return names


# ---- the output folder's lock: fcntl.flock on an open file, held by this process -----------------


class InUseError(OSError):
    """Another process holds the lock; its message says which (pid, host, since)."""


_HELD: dict[Path, tuple[object, IO[str]]] = {}  # lock file -> (its RunOutputs, the open locked file)


def _take_lock(path: Path, owner: object) -> None:
    """Lock `path` for `owner`, taking it over from an earlier owner in this process; InUseError when
    another process holds it. Nothing is locked where the OS has no such locks (Windows, some network
    file systems): runs then go on as before the lock."""
    key = path.resolve()
    handle = _HELD.pop(key)[1] if key in _HELD else _lock_file(path)
    if handle is None:
        return
    _HELD[key] = (owner, handle)
    since = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since}) + "\n")
    handle.flush()


def _lock_file(path: Path) -> IO[str] | None:
    """`path` opened and locked; the loop retries when a publishing run removed it between our open and lock."""
    try:
        import fcntl
    except ImportError:
        return None
    while True:
        handle = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise InUseError(_holder(path)) from None
        except OSError as error:
            handle.close()
            if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None
            raise
        if path.exists() and os.path.samestat(os.fstat(handle.fileno()), os.stat(path)):
            return handle
        handle.close()


def _holder(path: Path) -> str:
    """Which run holds the lock, as its lock file says."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {holder['pid']} on host {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its lock file {path} says no more"


def _release_lock(path: Path, owner: object) -> None:
    """Remove and unlock `path` if `owner` holds it (a RunOutputs that was taken over holds nothing)."""
    key = path.resolve()
    if key in _HELD and _HELD[key][0] is owner:
        handle = _HELD.pop(key)[1]
        path.unlink(missing_ok=True)  # before unlocking: see the loop in _lock_file
        handle.close()
