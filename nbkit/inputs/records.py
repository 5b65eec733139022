"""Look into any TFRecord dataset, local or on GCS: its files, a few records' features (no TensorFlow)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nbkit import storage, tfrecord
from nbkit.errors import DataError


def list_files(root: str, suffix: str = ".tfrec") -> list[str]:
    found = storage.walk_files(root, suffix)
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
