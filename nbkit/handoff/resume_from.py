"""RESUME_FROM, a run that goes on from an earlier session's output (notebook 05): that output found here or
fetched from Kaggle, its compiled programs copied into this run's cache (`resume.copy_checkpoint` copies the
checkpoint), and the data's fingerprint, recorded with the checkpoint so a resumed run trains on the same files."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import DataError
from nbkit.inputs import datasets
from nbkit.params import is_handle


def notebook_output(location: str, inside: str) -> str:
    """`location` if it is a folder here, else a Kaggle notebook's output (owner/slug[/versions/N]) fetched by
    kagglehub: the folder `inside` it."""
    local = os.path.expanduser(location)
    if Path(local).exists() or not is_handle(location, "owner/slug[/versions/N]"):
        return local
    found = Path(datasets.fetch("notebook output", location)) / inside
    if not found.is_dir():
        raise DataError(f"The output of the Kaggle notebook {location} has no {inside}: is it the right notebook?")
    return str(found)


def copy_compile_cache(cache: Any, earlier: str | Path) -> str:
    """Add `cache`'s (`accel.cache.use`) runtime's entries from an earlier run's cache folder, before the model
    is built; one line."""
    if cache.folder is None:
        return cache.describe()
    source = Path(earlier).expanduser() / cache.folder.name
    if not source.is_dir():
        there = sorted(p.name for p in Path(earlier).expanduser().glob("jax-*") if p.is_dir())
        held = f"it holds {', '.join(there)} only" if there else "it holds none"
        return f"compile cache: nothing to copy from {earlier} for {cache.folder.name} ({held})"
    cache.folder.mkdir(parents=True, exist_ok=True)
    missing = [entry for entry in sorted(source.glob("*-cache")) if not (cache.folder / entry.name).exists()]
    for entry in missing:
        with atomic.replacing(cache.folder / entry.name) as partial:  # never half an entry
            shutil.copyfile(entry, partial)
    cache.entries_found += len(missing)
    return f"compile cache: {len(missing)} compiled program(s) copied from {source}"


def fingerprint(files: list[str], sample_bytes: int = 2**16) -> str:
    """A short hash of the files' names, sizes, and first and last `sample_bytes`: it tells whether a
    checkpoint was made from these files, without reading gigabytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        if not Path(name).exists():
            raise DataError(f"{name} does not exist: the data folder changed after the files were listed.")
        size = Path(name).stat().st_size
        with open(name, "rb") as f:
            head = f.read(sample_bytes)
            f.seek(max(0, size - sample_bytes))
            tail = f.read(sample_bytes)
        digest.update(f"{Path(name).name}:{size}:".encode() + head + tail)
    return "sha256:" + digest.hexdigest()[:16]
