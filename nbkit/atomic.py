"""Writes that a crash or a kill cannot leave half done: write beside the target, then rename."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a `.partial` file renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path


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
