"""Writes a crash or a kill cannot leave half done: write beside the target, then rename. Partial files
are hidden (nbkit's listings skip them) and keep the target's suffix (Keras insists on `.weights.h5`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A partial path to write to; it replaces `path` only if the block succeeds, else it goes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".partial-{path.name}")
    try:
        yield partial
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    os.replace(partial, path)


def write_text(path: str | Path, text: str) -> Path:
    with replacing(path) as partial:
        partial.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(values: dict[str, Any], path: str | Path) -> Path:
    """A JSON file such as `metrics.json`: sorted keys, NumPy numbers as Python's."""
    return write_text(path, json.dumps(values, indent=2, sort_keys=True, default=lambda v: v.item()) + "\n")


@contextlib.contextmanager
def staged_dir(target: str | Path) -> Iterator[Path]:
    """A fresh folder beside `target` to fill; it replaces `target` only if the block succeeds, else it goes."""
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
    replace_dir(staging, target)


def replace_dir(folder: Path, target: Path) -> None:
    """Move `folder` to `target`, replacing the folder there (kept aside until the move is done)."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    folder.rename(target)
    shutil.rmtree(old, ignore_errors=True)
