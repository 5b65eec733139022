"""Every record read once before training, so bad data stops with the file's name instead of
failing halfway through training: checksums, features, the image size, counts against file names.
Framework-free (nbkit.tfrecord and Pillow), so the TensorFlow and PyTorch notebooks check alike."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import storage, tfrecord
from nbkit.errors import DataError
from nbkit.flowers import layout


@dataclass(frozen=True)
class Split:
    """One checked split: its files, how many records they hold, and the records when kept."""

    name: str
    files: list[str]
    count: int
    items: list[tuple[bytes, Any]] | None = None  # (JPEG bytes, class or id), in file order

    @property
    def labeled(self) -> bool:
        return self.name != "test"


def flower_record(raw: bytes, labeled: bool, where: str) -> tuple[bytes, int | str]:
    """(JPEG bytes, class or id) of one serialized record; a DataError says `where` it is wrong."""
    key = "class" if labeled else "id"
    try:
        example = tfrecord.decode_example(raw)
    except ValueError as error:
        raise DataError(f"{where} is not a tf.train.Example ({error}).") from None
    if len(example.get("image", ())) != 1 or len(example.get(key, ())) != 1:
        raise DataError(
            f"{where} is not a {'labeled' if labeled else 'test'} record (needs one image and one {key}; "
            f"has {sorted(example)})."
        )
    value = example[key][0]
    return example["image"][0], value if labeled else value.decode()


def read_items(files: Sequence[str], labeled: bool) -> list[tuple[bytes, Any]]:
    """Every (JPEG bytes, class or id) of `files`, in file order, each record's checksums and features checked."""
    return [
        flower_record(raw, labeled, f"{name}: record {index}")
        for name in files
        for index, raw in enumerate(tfrecord.read_records(name))
    ]


def jpeg_size(jpeg: bytes, where: str) -> tuple[int, int]:
    """(width, height) from a JPEG's header; a DataError says `where` when it is not a JPEG."""
    from PIL import Image

    try:
        return Image.open(io.BytesIO(jpeg)).size  # reads the header only
    except OSError as error:
        raise DataError(f"{where}: the image is not a readable JPEG ({error}).") from None


def check_file(name: str, image_size: int, labeled: bool, items: list[tuple[bytes, Any]] | None) -> int:
    """Read one file: every record's checksum and features, the first image's size, the count in
    its name. Appends the records to `items` when given; returns the record count."""
    count = 0
    for index, raw in enumerate(tfrecord.read_records(name)):
        jpeg, key = flower_record(raw, labeled, f"{name}: record {index}")
        if index == 0:
            width, height = jpeg_size(jpeg, f"{name}: record 0")
            if (width, height) != (image_size, image_size):
                raise DataError(
                    f"{name}: its images are {width}x{height}, not {image_size}x{image_size}. "
                    "Set IMAGE_SIZE to the size in the folder name."
                )
        if items is not None:
            items.append((jpeg, key))
        count += 1
    named = layout.count_in_name(name)
    if count != named:
        raise DataError(
            f"{name}: its name promises {named} records but it holds {count}. Rename it (the number before "
            ".tfrec is the file's record count) or re-download / regenerate it."
        )
    return count


def check_split(data_root: str | Path, image_size: int, split: str, keep_items: bool = False) -> Split:
    """The split's files, each read once and checked; with `keep_items` its records too."""
    files = layout.find_files(data_root, image_size, split)
    items: list[tuple[bytes, Any]] | None = [] if keep_items else None
    count = sum(check_file(name, image_size, split != "test", items) for name in files)
    return Split(split, files, count, items)


def checked_splits(
    data_root: str | Path, image_size: int, splits: Sequence[str] = layout.SPLITS, keep_items: bool = False
) -> dict[str, Split]:
    """Each split of `splits` checked (see `check_split`), by name."""
    return {split: check_split(data_root, image_size, split, keep_items) for split in splits}


def describe(splits: dict[str, Split]) -> str:
    """`train 832, val 208, test 104 images`."""
    return ", ".join(f"{s.name} {s.count}" for s in splits.values()) + " images"


def fingerprint(files: Sequence[str], sample_bytes: int = 2**16) -> str:
    """A short hash of the files' names, sizes, and first and last `sample_bytes`: it tells whether a
    model or a checkpoint was made from these files, without reading gigabytes."""
    digest = hashlib.sha256()
    for name in sorted(files):
        if not storage.exists(name):
            raise DataError(f"{name} does not exist: the data folder changed after the files were listed.")
        size = storage.size(name)
        with storage.open_binary(name) as f:
            head = f.read(sample_bytes)
            f.seek(max(0, size - sample_bytes))
            tail = f.read(sample_bytes)
        digest.update(f"{Path(name).name}:{size}:".encode() + head + tail)
    return "sha256:" + digest.hexdigest()[:16]
