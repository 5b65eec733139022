"""Kaggle's "I'm Something of a Painter Myself" (gan-getting-started): its two domains of pictures checked before
any training, and `images.zip` written straight into the zip and read back. A domain ("monet": the style; "photo":
the pictures to restyle) is the first under DATA_ROOT of `<domain>_tfrec/` (the competition's `<domain>NN-COUNT.tfrec`:
`image_name`, `image` = a JPEG, `target`), `<domain>_jpg/`, `<domain>/` (JPEG or PNG of any size: your own)."""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import DataError, ParameterError
from nbkit.inputs.datasets import DataSource, generated_sample, locate

_COMPETITION = "gan-getting-started"
_DOMAINS = ("monet", "photo")
_KAGGLE_IMAGES = (7000, 10000)  # how many pictures images.zip must hold
_KAGGLE_SIZE = 256  # each a 256x256 RGB JPEG
_OUTPUT_LIMIT = 20 * 10**9  # bytes Kaggle keeps of a notebook's output (/kaggle/working)
_RECORD_FILE = re.compile(r"^(?P<domain>[a-z]+)(?P<index>\d+)-(?P<count>\d+)\.tfrec$")
_PICTURES = (".jpg", ".jpeg", ".png")
_CHUNK = 16  # pictures a TensorFlow call encodes (unrolled: no loop to schedule)


@dataclass
class _Pictures:
    """One domain's pictures, as encoded bytes (JPEG or PNG), each checked to decode."""

    domain: str
    folder: Path
    names: list[str]  # each picture's name, no extension (the photo a generated picture is named after)
    encoded: list[bytes]
    sources: list[str]  # where each came from: its file, or its TFRecord file and record
    sizes: set[tuple[int, int]] = field(default_factory=set)  # the (width, height) found

    def describe(self) -> str:
        sizes = ", ".join(f"{w}x{h}" for w, h in sorted(self.sizes)[:3]) + (" ..." if len(self.sizes) > 3 else "")
        return f"{self.domain}: {len(self.names):,} pictures from {self.folder} ({sizes})"


@dataclass
class _Domains:
    source: DataSource
    monet: _Pictures
    photo: _Pictures

    def describe(self) -> str:
        return "\n".join([f"data: {self.source.describe()}", self.monet.describe(), self.photo.describe()])

    def fingerprint(self) -> str:
        """What a model was trained on, for its checkpoint: the counts, and a digest of every name and picture."""
        digest = hashlib.sha256()
        for pictures in (self.monet, self.photo):
            digest.update(f"{pictures.domain} {len(pictures.names)}\0".encode())
            for name, data in zip(pictures.names, pictures.encoded):
                digest.update(hashlib.sha256(name.encode() + b"\0" + data).digest())
        counts = f"{len(self.monet.names)} monet and {len(self.photo.names)} photo pictures"
        return f"{counts}, sha256 {digest.hexdigest()[:16]}"


def load(data_root: str, environment: Any = None) -> _Domains:
    """Find (DATA_ROOT "auto": the competition attached, else kagglehub, else the generated sample) and read
    both domains; every picture is decoded once here, and a bad one is named."""
    source = locate(data_root, _COMPETITION, fallback=_sample_source, environment=environment)
    root = Path(source.path)
    return _Domains(source, *(_read_domain(root, domain) for domain in _DOMAINS))


def _sample_source(environment: Any) -> DataSource:
    def generator() -> Any:
        from nbkit.imagegen import sample

        return sample.ensure

    holding = "a folder holding monet_tfrec/ and photo_tfrec/ (or monet/, photo/)"
    return generated_sample(environment, "painter-sample", generator, _COMPETITION, holding)


def _read_domain(root: Path, domain: str) -> _Pictures:
    for suffix in ("_tfrec", "_jpg", ""):
        folder = root / f"{domain}{suffix}"
        if folder.is_dir():
            pictures = (_read_records if suffix == "_tfrec" else _read_files)(folder, domain)
            if not pictures.names:
                raise DataError(f"{folder} holds no pictures ({'.tfrec files' if suffix else ', '.join(_PICTURES)}).")
            pictures.sizes = _check_pictures(pictures, same_size=suffix == "_tfrec")
            return pictures
    raise DataError(
        f"{root} has no {domain}_tfrec/, {domain}_jpg/ nor {domain}/ folder: DATA_ROOT must hold the 'monet' "
        "pictures (the style to learn) and the 'photo' pictures (to restyle), as the competition's folders or as "
        "folders monet/ and photo/ of JPEG or PNG files."
    )


def _read_records(folder: Path, domain: str) -> _Pictures:
    """A domain's TFRecords read as training reads them (tf.data, the competition's features)."""
    import tensorflow as tf

    features = {key: tf.io.FixedLenFeature([], tf.string) for key in ("image_name", "image")}
    pictures = _Pictures(domain, folder, [], [], [])
    for path in sorted(folder.glob("*.tfrec")):
        match = _RECORD_FILE.match(path.name)
        if not match:
            raise DataError(f"{path}: not named like the competition's files ({domain}00-60.tfrec: the count last).")
        found = 0
        try:
            for raw in tf.data.TFRecordDataset(str(path)):
                try:
                    example = tf.io.parse_single_example(raw, features)
                except tf.errors.InvalidArgumentError:
                    raise DataError(f"{path}: record {found} has no image_name and image (bytes).") from None
                name = example["image_name"].numpy().decode(errors="replace")
                pictures.names.append(_check_name(name, f"{path}: record {found}'s image_name"))
                pictures.encoded.append(example["image"].numpy())
                pictures.sources.append(f"{path.name} record {found}")
                found += 1
        except tf.errors.DataLossError as error:
            raise DataError(
                f"{path} is damaged after record {found} ({error.message}): download or write it again."
            ) from None
        if found != int(match["count"]):
            raise DataError(
                f"{path} holds {found} records, but its name says {match['count']}: the file is truncated or was "
                "written with another count. Download or write it again."
            )
    return pictures


def _read_files(folder: Path, domain: str) -> _Pictures:
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in _PICTURES and not p.name.startswith("."))
    if folders := [p.name for p in paths if not p.is_file()]:
        raise DataError(f"{folder}: {folders[0]} is a folder, not a picture: move it out of {folder.name}/.")
    names = [_check_name(p.stem, f"{p}: its name") for p in paths]
    return _Pictures(domain, folder, names, [p.read_bytes() for p in paths], [p.name for p in paths])


def _check_name(name: str, where: str) -> str:
    """`name` if it can name a file in images.zip (no folders, nothing hidden), else a DataError saying `where`."""
    if not name or name.startswith(".") or any(c in name for c in "/\\\0") or len(name.encode()) > 200:
        raise DataError(
            f"{where} is {name!r}, which cannot name a file of images.zip (no '/', '\\', NUL, leading '.', over 200 "
            "bytes): a picture's name is a file name, never a path. Rename it, or write the TFRecords again."
        )
    return name


def _check_pictures(pictures: _Pictures, same_size: bool) -> set[tuple[int, int]]:
    """The sizes found, each picture decoded as training decodes it; a DataError names one that does not decode
    (or, in TFRecords, of another size)."""
    import tensorflow as tf

    sizes, first = set(), None
    for source, data in zip(pictures.sources, pictures.encoded):
        try:
            height, width = tf.shape(tf.io.decode_image(data, channels=3, expand_animations=False)).numpy()[:2]
        except (tf.errors.OpError, ValueError) as error:
            raise DataError(
                f"{pictures.folder}: {source} cannot be decoded by tf.io.decode_image, as training decodes it "
                f"({getattr(error, 'message', error)}). Remove it, or save it again as JPEG or PNG."
            ) from None
        size = int(width), int(height)
        first = first or size
        if same_size and size != first:
            raise DataError(
                f"{pictures.folder}: {source} is {size[0]}x{size[1]}, the others {first[0]}x{first[1]}: every "
                "picture of a domain's TFRecords must have one size. Write the file again from same-sized pictures."
            )
        sizes.add(size)
    return sizes


def check_image_count(images: int, photos: _Pictures, full: bool) -> tuple[list[str], str]:
    """IMAGES, checked: Kaggle scores 7,000 to 10,000 pictures (the full profile); each photo gives two (as it is,
    then mirrored). The zip's names (two equal ones: an error naming both pictures) and a line saying what is
    written."""
    low, high, count = *_KAGGLE_IMAGES, len(photos.names)
    if full and not low <= images <= high:
        raise ParameterError(f"IMAGES={images}: Kaggle takes {low:,} to {high:,} pictures in images.zip; give one.")
    if images < 1:
        raise ParameterError(f"IMAGES={images}: at least 1.")
    if images > 2 * count:
        raise DataError(
            f"IMAGES={images:,}, but {count:,} photos give {2 * count:,} different pictures (each as it is and "
            f"mirrored; more would repeat them byte for byte): give at least {-(-images // 2):,} photos, "
            "or fewer IMAGES."
        )
    names, first = [*photos.names, *(f"{n}-mirrored" for n in photos.names)][:images], {}
    for index, name in enumerate(names):
        if (other := first.setdefault(name.lower(), index)) != index:
            what = [photos.sources[i % count] + (" mirrored" if i >= count else "") for i in (other, index)]
            raise DataError(
                f"{photos.folder}: {what[0]} and {what[1]} would both be {name}.jpg in images.zip (names are compared "
                "ignoring case, as Windows and macOS do): rename one of them."
            )
    again = f", {images - count:,} of them the photos mirrored" if images > count else ""
    return names, f"images.zip: {images:,} pictures of {count:,} photos{again}"


def write_zip(
    path: str | Path, pictures: Any, count: int, size: int = _KAGGLE_SIZE, limit: int = _OUTPUT_LIMIT, quality: int = 95
) -> str:
    """Write (name, uint8 RGB array) pairs as JPEGs straight into the zip `path` (stored: JPEGs do not
    compress). Each JPEG is decoded again as it is made, and the zip is read back at the end (`_check_zip`). A zip
    that would pass `limit` bytes stops after its first pictures; on any error nothing is left at `path`."""
    import numpy as np

    encode = _jpeg_encoder(quality)
    decoded_shape = [-(-size // 8), -(-size // 8), 3]  # decode_jpeg(ratio=8) rounds up

    def encode_chunk(chunk: list[tuple[str, Any]]) -> list[tuple[str, bytes]]:
        arrays = [np.asarray(array) for _, array in chunk]
        for (name, _), array in zip(chunk, arrays):
            _check_name(name, "a picture's name")
            if array.shape != (size, size, 3) or array.dtype != np.uint8:
                raise DataError(
                    f"{name}.jpg: a picture of {array.dtype} {array.shape}, not uint8 ({size}, {size}, 3) RGB (0-255)."
                )
        data, shapes = encode(np.stack(arrays + arrays[-1:] * (_CHUNK - len(arrays))))  # the last chunk padded
        for (name, _), shape in zip(chunk, shapes.numpy().tolist()):
            if shape != decoded_shape:
                raise DataError(f"{name}.jpg: its JPEG decodes to {shape} at 1/8 scale, not {decoded_shape}.")
        return [(f"{name}.jpg", jpeg) for (name, _), jpeg in zip(chunk, data.numpy())]

    path, written, total = Path(path), 0, 0
    try:
        # Two threads encode chunks while this one writes the one before (and the caller makes the next).
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive, ThreadPoolExecutor(2) as pool:
            items, pending = iter(pictures), collections.deque()
            while (chunk := list(itertools.islice(items, _CHUNK))) or pending:
                if chunk:
                    pending.append(pool.submit(encode_chunk, chunk))
                if len(pending) < 3 and chunk:  # memory stays flat: at most three chunks in flight
                    continue
                for name, data in pending.popleft().result():
                    archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
                    written, total = written + 1, total + len(data)
                if total / written * count > limit:
                    raise DataError(
                        f"{path.name} would take about {total / written * count / 1e9:.1f} GB for {count:,} "
                        f"pictures, over the {limit / 1e9:g} GB limit: write fewer IMAGES or lower the JPEG quality."
                    )
        return _check_zip(path, count, size)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


@functools.cache
def _jpeg_encoder(quality: int) -> Any:
    """A TensorFlow function: _CHUNK uint8 pictures [_CHUNK, h, w, 3] -> their JPEGs and each JPEG's decoded shape at
    1/8 scale (every block read, no full inverse DCT). TensorFlow runs the graph's independent JPEG ops on its
    threads, without the GIL (Pillow's encoder holds it)."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([_CHUNK, None, None, 3], tf.uint8)])
    def encode(pictures: Any) -> tuple[Any, Any]:
        jpegs = [tf.io.encode_jpeg(pictures[i], quality=quality) for i in range(_CHUNK)]
        return tf.stack(jpegs), tf.stack([tf.shape(tf.io.decode_jpeg(jpeg, ratio=8)) for jpeg in jpegs])

    return encode


def _check_zip(path: str | Path, count: int, size: int = _KAGGLE_SIZE) -> str:
    """Read `path` back: `count` entries of distinct names, each the bytes written (their CRCs; write_zip decoded
    those bytes); a line."""
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
        if len(entries) != count or len({e.filename for e in entries}) != count:
            raise DataError(
                f"{path}: {len(entries)} entries ({len({e.filename for e in entries})} names), not {count}."
            )
        if (bad := archive.testzip()) is not None:
            raise DataError(f"{path}: {bad} does not read back as written. Write it again.")
    megabytes = Path(path).stat().st_size / 1e6
    return f"{Path(path).name}: {count:,} JPEGs of {size}x{size} RGB, {megabytes:.1f} MB, each decoded and read back"
