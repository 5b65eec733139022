"""TFRecord files read without TensorFlow (plain, GZIP or ZLIB), and `tf.train.Example` decoded: the
notebooks of both stacks check their files with it. A file is a series of `uint64 length | uint32 masked
crc32c(length) | data | uint32 masked crc32c(data)`, little-endian."""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from nbkit.errors import DataError

# ---- crc32c (Castagnoli), masked as TFRecord files store it -------------------------------------

_CRC_TABLE: list[int] = []


def _crc32c_python(payload: bytes) -> int:
    if not _CRC_TABLE:
        for byte in range(256):
            crc = byte
            for _ in range(8):
                crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
            _CRC_TABLE.append(crc)
    crc, table = 0xFFFFFFFF, _CRC_TABLE
    for byte in payload:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # a C implementation where one is installed (google-crc32c ships with Google Cloud clients)
    import google_crc32c

    _crc32c = google_crc32c.value if google_crc32c.implementation == "c" else _crc32c_python
except ImportError:
    _crc32c = _crc32c_python


def masked_crc(payload: bytes) -> int:
    """TFRecord's masked crc32c of `payload`."""
    crc = _crc32c(payload)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---- framing, plain or compressed as TFRecordWriter(options="GZIP" or "ZLIB") writes it ----------


def _compression_of(head: bytes) -> str:
    """ "", "GZIP" or "ZLIB" for a file starting with `head` (12 bytes): a plain file starts with a length and
    its masked crc, gzip with 1f 8b, zlib with a deflate header (a multiple of 31)."""
    if len(head) == 12 and masked_crc(head[:8]) == struct.unpack("<I", head[8:])[0]:
        return ""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return ""  # a plain file, damaged or empty: reading it says what is wrong


def compression(path: str | Path) -> str:
    """A TFRecord file's compression as `TFRecordDataset(compression_type=...)` takes it: "", "GZIP" or "ZLIB"."""
    with open(path, "rb") as f:
        return _compression_of(f.read(12))


class _Inflated:
    """A gzip or zlib stream read as its uncompressed bytes; EOFError when it ends before its end marker."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.inflater, self.buffer = raw, zlib.decompressobj(zlib.MAX_WBITS | 32), b""  # | 32: either header

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size and not self.inflater.eof:
            chunk = self.raw.read(1 << 16)
            if not chunk:
                raise EOFError("the compressed data ends before its end marker")
            self.buffer += self.inflater.decompress(chunk)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


_DAMAGED = "The file is truncated or corrupt: re-download or regenerate it."


def read_records(path: str | Path) -> Iterator[bytes]:
    """The raw records of one TFRecord file; a DataError names a truncated or corrupt record."""
    with open(path, "rb") as raw:
        kind = _compression_of(raw.read(12))
        raw.seek(0)
        f = _Inflated(raw) if kind else raw
        for index in itertools.count():
            try:
                header = f.read(12)
                if not header:
                    return
                record, problem = _read_record(f, header)
            except (EOFError, zlib.error) as error:
                raise DataError(f"{path}: its {kind} data breaks off in record {index} ({error}). {_DAMAGED}") from None
            if problem:
                raise DataError(f"{path}: record {index} {problem}. {_DAMAGED}")
            yield record


def _read_record(f: BinaryIO, header: bytes) -> tuple[bytes, str]:
    """(the record after `header`, ""), or (b"", what is wrong with it)."""
    if len(header) < 12:
        return b"", f"has a {len(header)}-byte header (12 expected)"
    if masked_crc(header[:8]) != struct.unpack("<I", header[8:])[0]:
        return b"", "has a bad length checksum"  # before reading: the length may be anything
    (length,) = struct.unpack("<Q", header[:8])
    payload, footer = f.read(length), f.read(4)
    if len(payload) < length or len(footer) < 4:
        return b"", f"is cut short ({len(payload)} of {length} bytes)"
    if masked_crc(payload) != struct.unpack("<I", footer)[0]:
        return b"", "has a bad data checksum"
    return payload, ""


# ---- tf.train.Example, the protobuf wire format of its three list types -------------------------

BYTES_LIST, FLOAT_LIST, INT64_LIST = 1, 2, 3  # the field numbers of Feature's oneof: bytes_list, float_list, int64_list


def _varint(view: memoryview, position: int) -> tuple[int, int]:
    """The varint at `position`, and the position after it."""
    result = shift = 0
    while True:
        if position >= len(view) or shift > 63:
            raise ValueError("truncated varint")
        byte = view[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, position


def _fields(buffer: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; length-delimited values as memoryviews."""
    view, position = memoryview(buffer), 0
    while position < len(view):
        key, position = _varint(view, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(view, position)
        elif wire in (1, 2, 5):  # fixed 64 bits, length-delimited, fixed 32 bits
            length = {1: 8, 5: 4}.get(wire, 0)
            if not length:
                length, position = _varint(view, position)
            if position + length > len(view):
                raise ValueError("truncated field")
            value = view[position : position + length]
            position += length
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _varints(view: memoryview) -> Iterator[int]:
    position = 0
    while position < len(view):
        value, position = _varint(view, position)
        yield value


def _feature_values(feature: memoryview) -> list[Any]:
    values: list[Any] = []
    for kind, _, payload in _fields(feature):
        for number, wire, value in _fields(payload):
            if number == 1 and kind == BYTES_LIST:
                values.append(bytes(value))
            elif number == 1 and kind == INT64_LIST:  # packed (wire type 2) or one value per field (wire type 0)
                values.extend(v - (1 << 64) if v >> 63 else v for v in (_varints(value) if wire == 2 else [value]))
            elif number == 1 and kind == FLOAT_LIST:  # packed or not, little-endian 4-byte floats
                values.extend(struct.unpack(f"<{len(value) // 4}f", value))
    return values


def decode_example(raw: bytes) -> dict[str, list[Any]]:
    """A serialized `tf.train.Example` as {name: list of bytes, ints or floats}; ValueError if malformed."""
    features: dict[str, list[Any]] = {}
    for number, _, payload in _fields(raw):
        for entry_number, _, entry in _fields(payload) if number == 1 else ():  # Features' map entries
            if entry_number == 1:
                parts = {part: value for part, _, value in _fields(entry)}  # 1: the name, 2: the Feature
                features[bytes(parts.get(1, b"")).decode()] = _feature_values(parts.get(2, memoryview(b"")))
    return features
