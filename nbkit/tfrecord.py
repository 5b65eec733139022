"""The competition's TFRecords without TensorFlow: framing, `tf.train.Example`, reading, and the sample.

For environments that have no TensorFlow (PyTorch/XLA, notebook 04). A TFRecord file is a series of
`uint64 length | uint32 masked crc32c(length) | data | uint32 masked crc32c(data)`, little-endian;
each `data` is a serialized `tf.train.Example`. `make_sample` writes the same bytes as
`nbkit.data.make_sample` (same images, JPEG settings and serialization), so notebooks with and
without TensorFlow train on identical files (a test compares them).
"""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Sequence

from nbkit import data
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


def _crc32c_function() -> Any:
    """A C implementation where one is installed (google-crc32c ships with Google Cloud clients), else Python."""
    try:
        import google_crc32c

        if google_crc32c.implementation == "c":
            return google_crc32c.value
    except ImportError:
        pass
    return _crc32c_python


crc32c = _crc32c_function()


def masked_crc(payload: bytes) -> int:
    """TFRecord's masked crc32c of `payload`."""
    crc = crc32c(payload)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---- framing ------------------------------------------------------------------------------------


def read_records(path: str | Path, check_crc: bool = True) -> Iterator[bytes]:
    """The raw records of one TFRecord file; a DataError names the file when it is truncated or corrupt."""
    with open(path, "rb") as f:
        index = 0
        while True:
            header = f.read(12)
            if not header:
                return
            record = _read_record(f, header, check_crc)
            if isinstance(record, str):
                raise DataError(f"{path}: record {index} {record}. The file is truncated or corrupt: re-download or regenerate it.")
            yield record
            index += 1


def _read_record(f: BinaryIO, header: bytes, check_crc: bool) -> bytes | str:
    """The record after `header`, or what is wrong with it."""
    if len(header) < 12:
        return f"has a {len(header)}-byte header (12 expected)"
    (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
    if check_crc and masked_crc(header[:8]) != length_crc:
        return "has a bad length checksum"
    payload = f.read(length)
    footer = f.read(4)
    if len(payload) < length or len(footer) < 4:
        return f"is cut short ({len(payload)} of {length} bytes)"
    if check_crc and masked_crc(payload) != struct.unpack("<I", footer)[0]:
        return "has a bad data checksum"
    return payload


def write_records(path: str | Path, records: Iterable[bytes]) -> Path:
    """Write raw records to a TFRecord file, through a `.partial` file renamed into place."""
    path = Path(path)
    partial = path.with_suffix(".partial")  # a crash mid-write leaves no valid-looking file
    with open(partial, "wb") as f:
        for record in records:
            length = struct.pack("<Q", len(record))
            f.write(length + struct.pack("<I", masked_crc(length)) + record + struct.pack("<I", masked_crc(record)))
    partial.replace(path)
    return path


# ---- tf.train.Example, the protobuf wire format of its three list types -------------------------

_BYTES, _FLOATS, _INTS = 1, 2, 3  # the field numbers of Feature's oneof: bytes_list, float_list, int64_list


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
            feature = _field(_BYTES, items)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature = _field(_INTS, _field(1, b"".join(_varint(v) for v in values)))  # packed
        elif all(isinstance(v, float) for v in values):
            feature = _field(_FLOATS, _field(1, struct.pack(f"<{len(values)}f", *values)))  # packed
        else:
            raise DataError(f"Feature {key!r}: {values!r} is not a list of bytes/str, ints or floats.")
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def _fields(buffer: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; length-delimited values as memoryviews."""
    view, position = memoryview(buffer), 0

    def varint() -> int:
        nonlocal position
        result = shift = 0
        while True:
            if position >= len(view) or shift > 63:
                raise ValueError("truncated varint")
            byte = view[position]
            position += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while position < len(view):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value: Any = varint()
        elif wire == 2:
            length = varint()
            if position + length > len(view):
                raise ValueError("truncated field")
            value = view[position:position + length]
            position += length
        elif wire in (1, 5):  # fixed 64 / 32 bits
            size = 8 if wire == 1 else 4
            value = view[position:position + size]
            position += size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature_values(feature: memoryview) -> list[Any]:
    values: list[Any] = []
    for kind, _, payload in _fields(feature):
        for number, wire, value in _fields(payload):
            if number != 1:
                continue
            if kind == _BYTES:
                values.append(bytes(value))
            elif kind == _INTS:  # packed (wire type 2) or one value per field (wire type 0)
                values.extend(_signed(v) for v in (_packed_varints(value) if wire == 2 else [value]))
            elif kind == _FLOATS:
                values.extend(struct.unpack(f"<{len(value) // 4}f", value) if wire == 2 else struct.unpack("<f", value))
    return values


def _packed_varints(payload: memoryview) -> list[int]:
    values, result, shift = [], 0, 0
    for byte in bytes(payload):
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append(result)
            result = shift = 0
    if shift:
        raise ValueError("truncated packed varint")
    return values


def decode_example(raw: bytes) -> dict[str, list[Any]]:
    """A serialized `tf.train.Example` as {name: list of bytes, ints or floats}; ValueError if malformed."""
    features: dict[str, list[Any]] = {}
    for number, _, payload in _fields(raw):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(payload):
            if entry_number != 1:
                continue
            key, feature = "", memoryview(b"")
            for part, _, value in _fields(entry):
                if part == 1:
                    key = bytes(value).decode()
                elif part == 2:
                    feature = value
            features[key] = _feature_values(feature)
    return features


# ---- the competition format ---------------------------------------------------------------------


def flower_example(record: Mapping[str, Any]) -> bytes:
    """{"image": jpeg, "class": int} or {"image": jpeg, "id": str} as a serialized Example."""
    key = "class" if "class" in record else "id"
    value = int(record[key]) if key == "class" else str(record[key])
    return encode_example({"image": record["image"], key: value})


def write_split(records: Sequence[Mapping[str, Any]], data_root: str | Path, image_size: int, split: str,
                shards: int | None = None) -> list[Path]:
    """Like `nbkit.data.write_tfrecords` (same layout, names, shards and bytes), without TensorFlow."""
    if not records:
        raise DataError(f"No records to write for split {split!r}.")
    folder = data.split_folder(data_root, image_size, split)
    folder.mkdir(parents=True, exist_ok=True)
    shards = shards or data.shard_count(sum(len(r["image"]) for r in records), len(records))
    per_shard = math.ceil(len(records) / shards)
    written = []
    for index, start in enumerate(range(0, len(records), per_shard)):
        chunk = records[start:start + per_shard]
        path = folder / f"{index:02d}-{image_size}x{image_size}-{len(chunk)}.tfrec"
        written.append(write_records(path, (flower_example(r) for r in chunk)))
    return written


def encode_jpeg(image: Any, quality: int = 90) -> bytes:
    """JPEG bytes of a uint8 RGB array, byte for byte what `tf.io.encode_jpeg(image, quality)` writes
    (baseline, 4:2:0, 300 dpi in the JFIF header)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality, dpi=(300, 300))
    return buffer.getvalue()


def make_sample(data_root: str | Path, image_sizes: Sequence[int] = (192,), train_per_class: int = 8,
                val_per_class: int = 2, test_images: int = 104, num_classes: int = len(data.CLASSES),
                seed: int = 0) -> Path:
    """`nbkit.data.make_sample` without TensorFlow: the same files, byte for byte. Returns `data_root`."""
    for size in image_sizes:
        for split, records in data.sample_splits(size, encode_jpeg, train_per_class, val_per_class, test_images,
                                                 num_classes, seed):
            write_split(records, data_root, size, split)
    return Path(data_root)


def resolve_root(data_root: str, sample_dir: str | Path, environment: Any = None) -> data.DataRoot:
    """`nbkit.data.resolve_root` for a process without TensorFlow: where the generated sample is the
    answer and is missing, it is written here first."""
    from nbkit import env

    environment = environment or env.detect(probe_internet=lambda: False)
    if data_root == "sample" or (data_root == "auto" and environment.platform != "kaggle"):
        if not (data.split_folder(sample_dir, 192, "test")).is_dir():
            make_sample(sample_dir)
    return data.resolve_root(data_root, sample_dir=sample_dir, environment=environment)


def read_split(files: Sequence[str], image_size: int, labeled: bool) -> list[tuple[bytes, Any]]:
    """Every (JPEG bytes, class or id) of `files` in order, each record checked (CRC, features) and
    each file's first image measured; a DataError names the file that is wrong."""
    from PIL import Image

    key = "class" if labeled else "id"
    items = []
    for name in files:
        for index, raw in enumerate(read_records(name)):
            try:
                example = decode_example(raw)
            except ValueError as error:
                raise DataError(f"{name}: record {index} is not a tf.train.Example ({error}).") from None
            if len(example.get("image", ())) != 1 or len(example.get(key, ())) != 1:
                raise DataError(
                    f"{name}: record {index} is not a {'labeled' if labeled else 'test'} record "
                    f"(needs one image and one {key}; has {sorted(example)})."
                )
            jpeg, value = example["image"][0], example[key][0]
            if index == 0:
                try:
                    size = Image.open(io.BytesIO(jpeg)).size  # reads the header only
                except OSError as error:
                    raise DataError(f"{name}: the first image is not a readable JPEG ({error}).") from None
                if size != (image_size, image_size):
                    raise DataError(f"{name}: its images are {size[0]}x{size[1]}, not {image_size}x{image_size}. "
                                    "Set IMAGE_SIZE to the size in the folder name.")
            items.append((jpeg, value if labeled else value.decode()))
    return items


def checked_splits(data_root: str | Path, image_size: int, splits: Sequence[str] = data.SPLITS
                   ) -> dict[str, list[tuple[bytes, Any]]]:
    """`nbkit.data.checked_splits` without TensorFlow: each split's (JPEG, class or id) items, every
    record read once, and the count checked against the file names."""
    items = {}
    for split in splits:
        files = data.find_files(data_root, image_size, split)
        items[split] = read_split(files, image_size, labeled=split != "test")
        named = data.count_items(files)
        if len(items[split]) != named:
            raise DataError(
                f"The {split} file names promise {named} records but the files hold {len(items[split])}: "
                "rename the files (the number before .tfrec is the record count) or regenerate them."
            )
    return items
