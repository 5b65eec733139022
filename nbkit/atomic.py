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

_PARTIAL_PREFIX = ".partial-"


def _partial_path(path: str | Path) -> Path:
    """Where `path` is written before it is renamed into place."""
    path = Path(path)
    return path.with_name(_PARTIAL_PREFIX + path.name)


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a partial path to write `path`'s new content to; it replaces `path` only if the block
    succeeds. On an error the partial file goes and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial_path(path)
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
