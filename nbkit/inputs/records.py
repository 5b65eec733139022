"""Look into any TFRecord dataset: its files, a few records' features (no TensorFlow)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import tfrecord
from nbkit.errors import DataError


def list_files(root: str, suffix: str = ".tfrec") -> list[str]:
    if not Path(root).is_dir():
        where = "not a folder" if Path(root).exists() else "no such file or folder"
        raise DataError(f"{root}: {where}. Check the path (DATA_ROOT, DATASET) and that the data is there.")
    walk = os.walk(root)
    found = sorted(f"{d.rstrip('/')}/{n}" for d, _, names in walk for n in names if n.endswith(suffix) and n[0] != ".")
    if not found:
        raise DataError(f"No *{suffix} files under {root}: is it the right dataset, or another file type?")
    return found


def _describe(values: list[Any]) -> str:
    if not values:
        return "empty"
    if isinstance(values[0], bytes):
        return "bytes " + ", ".join(f"[{len(v)}]" if len(v) > 40 else repr(v.decode(errors="replace")) for v in values)
    kind = "int64" if isinstance(values[0], int) else "float"
    return f"{kind} {values[:8]}"


def peek(files: Sequence[str], count: int = 3) -> list[dict[str, str]]:
    """The first `count` records of `files`, feature name -> short description (long bytes by length only)."""
    found = []
    for name in files:
        for index, raw in enumerate(tfrecord.read_records(name)):
            if len(found) == count:
                return found
            try:
                example = tfrecord.decode_example(raw)
            except ValueError as error:
                raise DataError(f"{name}: record {index} is not a tf.train.Example ({error}).") from None
            found.append({key: _describe(values) for key, values in sorted(example.items())})
    return found
