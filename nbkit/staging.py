"""A run's output folder, all or nothing: this run's files are written into `<folder>/.incomplete-run/`
and moved into the folder only when the run ends well (`publish()`), so a run that fails or is killed
leaves the previous run's outputs exactly as they were. One run at a time per folder, and one run's outputs:
publishing sets the previous run's outputs (those its own `publish()` listed in `.published-run.json`) aside
into `.previous-run/`, so none stays beside the new run's files. A file not nbkit's is never replaced: what the
folder held when nbkit first took it is named in the first cell, and one an output would replace goes to `.kept/`.

    outputs = staging.start(OUTPUT_DIR)                   # takes the folder's lock (in the first cell)
    grids.batch(..., path=outputs.staging / "batch.png")  # written aside
    outputs.publish()                                     # all at once, at the end

Files a run updates in place (checkpoints) go straight into `outputs.folder`. On a pod slice only
process 0 writes (`nbkit.hosts`): the others stage into a temporary folder that `publish()` deletes.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import IO

from nbkit import atomic, env, hosts
from nbkit.errors import ParameterError

_STAGING, _FAILED, _LOCK = ".incomplete-run", ".failed-run", ".run.lock"
_PREVIOUS, _PUBLISHED = ".previous-run", ".published-run.json"  # the run before's outputs; what the last run published
_KEPT = ".kept"  # files not nbkit's that a run's outputs would have replaced


class _RunOutputs:
    """A started run's output folder (see `start`): `staging` holds this run's files until `publish()`."""

    def __init__(self, folder: Path, writes: bool = True) -> None:
        self.folder = folder
        self.writes = writes  # False: a pod host other than process 0, whose files go nowhere
        self.staging = folder / _STAGING if writes else Path(tempfile.mkdtemp(prefix="nbkit-not-written-"))
        self.earlier_failure = ""
        self.theirs: list[str] = []  # what the folder held when nbkit first took it, still there

    def describe(self) -> str:
        """One line: where this run's outputs go, and what becomes of an unfinished run's and the previous run's."""
        if not self.writes:
            process = hosts.from_environment().describe()
            return f"This is {process}: its outputs are not kept ({self.folder} is process 0's)."
        earlier = _published(self.folder)
        previous = (
            f" The previous run's outputs there ({', '.join(earlier)}) then move to {self.folder / _PREVIOUS}."
            if earlier
            else ""
        )
        theirs = ", ".join(self.theirs[:5]) + f" and {len(self.theirs) - 5} more" * (len(self.theirs) > 5)
        theirs = theirs and (
            f" It holds {theirs}, which nbkit did not write: any of them this run's outputs would replace is moved "
            f"to {self.folder / _KEPT} first (never deleted)."
        )
        return (
            f"{self.earlier_failure}Outputs are written to {self.staging} and moved to {self.folder} when the run "
            f"ends.{previous}{theirs}"
        )

    def publish(self) -> list[str]:
        """Move every staged file and folder into `folder` (replacing the previous run's; one not nbkit's goes to
        `.kept/`), drop the staging folder and release the folder's lock; returns the names moved, each kept file
        said (none where this process does not write: its staged files are deleted)."""
        if not self.writes:
            shutil.rmtree(self.staging, ignore_errors=True)
            return []
        names = sorted(p.name for p in self.staging.iterdir())
        earlier = _published(self.folder)
        kept = [n for n in names if n not in earlier and os.path.lexists(self.folder / n)]  # not nbkit's
        for name in kept:
            (self.folder / _KEPT).mkdir(exist_ok=True)
            os.replace(self.folder / name, _free(self.folder / _KEPT / name))
        theirs = _published(self.folder, "theirs")
        # A kill below: the next publish sets both the earlier outputs and this run's aside.
        _write_published(self.folder, sorted({*earlier, *names}), theirs)
        _set_aside(self.folder, earlier)
        for name in names:
            staged, target = self.staging / name, self.folder / name
            (atomic.replace_dir if staged.is_dir() else os.replace)(staged, target)
        _write_published(self.folder, names, theirs)
        self.staging.rmdir()
        _release_lock(self.folder / _LOCK, self)
        return [f"{n} (the {n} there before, not nbkit's, is in {_KEPT}/)" if n in kept else n for n in names]


def _published(folder: Path, key: str = "published") -> list[str]:
    """The outputs the last published run in `folder` listed that are still there (none before any); key
    "theirs": what the folder held when nbkit first took it."""
    try:
        names = json.loads((folder / _PUBLISHED).read_text(encoding="utf-8"))[key]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    names = [n for n in names if isinstance(n, str) and n not in ("", ".", "..") and "/" not in n]
    return [n for n in names if os.path.lexists(folder / n)]


def _write_published(folder: Path, names: list[str], theirs: list[str]) -> None:
    atomic.write_text(folder / _PUBLISHED, json.dumps({"published": names, "theirs": theirs}, indent=1) + "\n")


def _free(path: Path) -> Path:
    """`path`, else the first of 1-<name>, 2-<name>, ... that is not taken."""
    numbered = (path.with_name(f"{i}-{path.name}" if i else path.name) for i in itertools.count())
    return next(p for p in numbered if not os.path.lexists(p))


def _set_aside(folder: Path, names: list[str]) -> None:
    """Move the previous run's outputs `names` into `.previous-run/` (an older one there goes)."""
    if not names:
        return
    aside = folder / _PREVIOUS
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    for name in names:
        os.replace(folder / name, aside / name)


def start(folder: str | Path, default: str = "", data_root: str = "") -> _RunOutputs:
    """Start a run's outputs in `folder` ("auto": the working folder's `default`), refused inside `data_root`
    (which a new conversion replaces whole): lock it (an OS lock that dies with its process; a run started
    again in this process takes its own lock over), move an unfinished earlier run's files to `.failed-run/`,
    and make the staging folder; in the first cell, this checks at once that the folder can be written."""
    if folder == "auto":
        folder = env.detect().working_dir / default
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise ParameterError(f"OUTPUT_DIR={str(folder)!r} is a file, not a folder: give a folder for the outputs.")
    inputs = "" if data_root in ("", "auto", "sample") else Path(data_root).expanduser().resolve()
    if inputs and inputs in (path.resolve(), *path.resolve().parents):
        raise ParameterError(
            f"OUTPUT_DIR={str(folder)!r} is or lies inside DATA_ROOT={data_root!r}: converting the data again replaces "
            "that folder, and this run's outputs with it. Give an OUTPUT_DIR outside DATA_ROOT, or keep the data in "
            "a folder of its own."
        )
    if not hosts.from_environment().writes_outputs:  # process 0 takes the folder; this one touches nothing
        return _RunOutputs(path, writes=False)
    outputs = _RunOutputs(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        _take_lock(path / _LOCK, outputs)
        if outputs.staging.exists():  # an earlier run stopped before publishing (it holds no lock: it is over)
            failed = path / _FAILED
            shutil.rmtree(failed, ignore_errors=True)
            outputs.staging.rename(failed)
            outputs.earlier_failure = f"An earlier run did not finish: its partial outputs are in {failed}. "
        outputs.staging.mkdir()
        if not (path / _PUBLISHED).exists():  # nbkit's first run here: what the folder holds is not nbkit's
            _write_published(path, [], sorted(p.name for p in path.iterdir() if not p.name.startswith(".")))
        outputs.theirs = _published(path, "theirs")
    except BlockingIOError:  # another process holds the lock
        raise ParameterError(
            f"OUTPUT_DIR={str(folder)!r} is in use by another run ({_holder(path / _LOCK)}): wait until it "
            "finishes (or stop it), or give this run another OUTPUT_DIR."
        ) from None
    except OSError as error:
        raise ParameterError(
            f"OUTPUT_DIR={str(folder)!r} cannot be written ({error.strerror or error}): give a writable folder "
            "(on Kaggle: under /kaggle/working)."
        ) from None
    return outputs


# ---- the output folder's lock: fcntl.flock on an open file, held by this process -----------------


_HELD: dict[Path, tuple[object, IO[str]]] = {}  # lock file -> (its _RunOutputs, the open locked file)


def _take_lock(path: Path, owner: object) -> None:
    """Lock `path` for `owner`, taking it over from an earlier owner in this process; BlockingIOError when
    another process holds it. Nothing is locked where the OS has no such locks (Windows, some network
    file systems): runs then go on as before the lock."""
    key = path.resolve()
    handle = _HELD.pop(key)[1] if key in _HELD else _lock_file(path)
    if handle is None:
        return
    _HELD[key] = (owner, handle)
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on host {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
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
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8").strip() or f"its lock file {path} says no more"
    return f"its lock file {path} says no more"


def _release_lock(path: Path, owner: object) -> None:
    """Remove and unlock `path` if `owner` holds it (a _RunOutputs that was taken over holds nothing)."""
    key = path.resolve()
    if key in _HELD and _HELD[key][0] is owner:
        handle = _HELD.pop(key)[1]
        path.unlink(missing_ok=True)  # before unlocking: see the loop in _lock_file
        handle.close()
