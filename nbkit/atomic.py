"""Writes that a crash or a kill cannot leave half done: write beside the target, then rename.

Partial files are hidden (`.partial-<name>`), keep the target's suffix (Keras insists on `.keras`
and `.weights.h5`), and are never mistaken for data: folder listings in nbkit skip hidden files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

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

        outputs = RunOutputs(output_dir, "OUTPUT_DIR")
        plots.batch(..., path=outputs / "batch.png")
        outputs.publish()
    """

    STAGING, FAILED = ".incomplete-run", ".failed-run"

    def __init__(self, folder: str | Path, parameter: str = "OUTPUT_DIR") -> None:
        from nbkit.errors import ParameterError

        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ParameterError(f"{parameter}={str(folder)!r} is a file, not a folder: give a folder for the outputs.")
        self.staging = self.folder / self.STAGING
        self.earlier_failure = ""
        if self.staging.exists():  # an earlier run stopped before publishing
            failed = self.folder / self.FAILED
            shutil.rmtree(failed, ignore_errors=True)
            self.staging.rename(failed)
            self.earlier_failure = f"An earlier run did not finish: its partial outputs are in {failed}. "
        self.staging.mkdir(parents=True)

    def __truediv__(self, name: str) -> Path:
        return self.staging / name

    def describe(self) -> str:
        """One line: where this run's outputs go, and what happened to an unfinished earlier run's."""
        return (
            f"{self.earlier_failure}Outputs are written to {self.staging} and moved to {self.folder} when the run ends."
        )

    def publish(self) -> list[str]:
        """Move every staged file and folder into `folder` (replacing the previous run's), then drop
        the staging folder; returns the names moved."""
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
        return names
