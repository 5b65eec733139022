"""TFRecord files written without TensorFlow, in the kit's layout and naming.

Examples are serialized with sorted keys, as TensorFlow's deterministic serialization does, so
TensorFlow reads these files and would write the same bytes (a test compares). Used by the
generated sample and the converter (`nbkit.convert`).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import ParameterError
from nbkit.images import layout
from nbkit.tfrecord import BYTES_LIST, FLOAT_LIST, INT64_LIST, masked_crc

_TARGET_SHARD_BYTES = 100 * 2**20  # "tens to hundreds of files of tens to hundreds of MB"
_MIN_SHARDS = 16  # enough files for parallel reads on 8 cores


def file_name(index: int, image_size: int, count: int) -> str:
    """`00-192x192-798.tfrec`: the competitions' naming, the item count last (`layout.count_in_name`)."""
    return f"{index:02d}-{image_size}x{image_size}-{count}.tfrec"


def write_records(path: str | Path, records: Iterable[bytes]) -> Path:
    """Write raw records to a TFRecord file, through a partial file renamed into place."""
    with atomic.replacing(path) as partial, open(partial, "wb") as f:
        for record in records:
            length = struct.pack("<Q", len(record))
            f.write(length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record)))
    return Path(path)


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64s are ten bytes of two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_example(features: Mapping[str, bytes | str | int | float | Sequence[Any]]) -> bytes:
    """A serialized `tf.train.Example`, keys sorted (TensorFlow's deterministic serialization).

    Values: bytes or str (bytes_list), int (int64_list), float (float_list), or a list of one kind.
    """
    entries = b""
    for key in sorted(features):
        values = features[key]
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if all(isinstance(v, (bytes, str)) for v in values):
            items = b"".join(_field(1, v.encode() if isinstance(v, str) else v) for v in values)
            feature = _field(BYTES_LIST, items)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature = _field(INT64_LIST, _field(1, b"".join(_varint(v) for v in values)))  # packed
        elif all(isinstance(v, float) for v in values):
            feature = _field(FLOAT_LIST, _field(1, struct.pack(f"<{len(values)}f", *values)))  # packed
        else:
            raise ParameterError(f"Feature {key!r}: {values!r} is not a list of bytes/str, ints or floats.")
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def shard_count(total_bytes: int, num_records: int) -> int:
    """Files to write: about _TARGET_SHARD_BYTES each, and at least _MIN_SHARDS when there are enough records."""
    by_size = math.ceil(total_bytes / _TARGET_SHARD_BYTES)
    return max(1, min(num_records, max(by_size, _MIN_SHARDS)))


def write_split(
    records: Sequence[Mapping[str, Any]], data_root: str | Path, image_size: int, split: str, shards: int | None = None
) -> list[Path]:
    """Write records ({"image": jpeg, "class": int, "id": str}; test records without `class`) in the kit's
    layout and naming (`00-192x192-798.tfrec`); the shard count follows `shard_count()` unless given."""
    if not records:
        raise ParameterError(f"No records to write for split {split!r}.")
    folder = Path(layout.split_folder(data_root, image_size, split))
    folder.mkdir(parents=True, exist_ok=True)
    shards = shards or shard_count(sum(len(r["image"]) for r in records), len(records))
    per_shard = math.ceil(len(records) / shards)
    written = []
    for index, start in enumerate(range(0, len(records), per_shard)):
        chunk = records[start : start + per_shard]
        path = folder / file_name(index, image_size, len(chunk))
        written.append(write_records(path, map(encode_example, chunk)))
    return written
