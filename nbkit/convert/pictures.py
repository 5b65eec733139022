"""Pictures -> records -> files: each picture one upright, square, 8-bit RGB JPEG of `size` x `size`
(Pillow: EXIF orientation applied, as phones need; grayscale, palette, transparent (on white), CMYK and
16-bit pictures converted; large JPEGs decoded at a reduced scale), encoded on every core, in order, and
written as they come. Same file, same options -> same bytes.

Worker processes are spawned, not forked: a notebook may already hold threads (TensorFlow, JAX)
that a fork would copy in whatever state they were in. Only a few tasks per worker are queued at a
time, so memory holds a bounded number of encoded pictures however many there are.

Files (`writer.shard_count`): about 100 MB each, at least 16 per split when there are enough records,
the total estimated from the first pictures encoded (the same ones every run). A file is named once
written, with the records it really holds (`00-512x512-2003.tfrec`): a damaged picture skipped makes
it one shorter.
"""

from __future__ import annotations

import contextlib
import io
import math
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import chain, islice
from pathlib import Path
from typing import Any

from nbkit.errors import DataError
from nbkit.images import layout, writer

FITS = ("resize", "crop", "pad")
SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")  # what Pillow reads cheaply
_QUALITY = 95  # JPEG quality of the converted pictures
# What Pillow raises for a file that is not a picture, is cut short, or is too large to open safely.
_UNREADABLE = (OSError, ValueError, SyntaxError, EOFError, IndexError)


def square_jpeg(path: str | Path, size: int, fit: str = "resize") -> bytes:
    """The JPEG bytes of the picture at `path`, upright, RGB and `size` x `size`.

    `fit` says how a picture that is not square becomes square: "resize" squashes the whole
    picture (nothing is cut off, so a lesion at the edge of a leaf stays in; the model learns the
    squashed shapes, and test pictures are squashed the same way), "crop" cuts the centre square,
    "pad" fits the whole picture into the square and fills the rest with black.
    """
    from PIL import Image, ImageOps

    with Image.open(path) as image:
        if image.format == "JPEG":
            image.draft(image.mode, (size, size))  # decode at 1/2, 1/4 or 1/8 scale while still >= size
        ImageOps.exif_transpose(image, in_place=True)
        image = to_square(_to_rgb(image), size, fit)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=_QUALITY)
    return buffer.getvalue()


def _to_rgb(image: Any) -> Any:
    """An 8-bit RGB copy of `image`: transparency composited on white, 16-bit values scaled, not clipped."""
    from PIL import Image

    if image.mode == "RGB":
        return image
    if image.mode.startswith("I"):  # 16-bit: scaled to 0-255, rounded (Pillow's convert clips at 255)
        return image.convert("I").point(lambda v: v / 257 + 0.5).convert("RGB")
    if (image.mode == "P" and "transparency" in image.info) or image.mode in ("PA", "LA", "La", "RGBA", "RGBa"):
        rgba = image.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    return image.convert("RGB")  # L, 1, P, CMYK (Adobe's inverted CMYK is undone by the decoder), YCbCr, F...


def to_square(image: Any, size: int, fit: str) -> Any:
    """`image` made `size` x `size` the way `fit` says (see square_jpeg)."""
    from PIL import Image, ImageOps

    # Pillow's bilinear filter widens with the reduction (antialiased, unlike a GPU's bilinear): as
    # smooth as bicubic for training pictures, at half its cost, and resizing is most of the time.
    resample = Image.Resampling.BILINEAR
    if fit == "crop":
        return ImageOps.fit(image, (size, size), resample)
    if fit == "pad":
        return ImageOps.pad(image, (size, size), resample, color=(0, 0, 0))
    return image.resize((size, size), resample, reducing_gap=3.0)  # box-reduce, then resample: looks the same


def _encode_batch(paths: Sequence[str], size: int, fit: str) -> list[bytes | str]:
    """square_jpeg of each path, or, for a picture Pillow cannot read, why (a str). Runs in worker processes."""
    from PIL import Image

    results: list[bytes | str] = []
    for path in paths:
        try:
            results.append(square_jpeg(path, size, fit))
        except (*_UNREADABLE, Image.DecompressionBombError) as error:
            results.append(f"{type(error).__name__}: {error}")
    return results


_CHUNK = 8  # pictures per task: fewer round trips to the workers, progress still fine-grained
_AHEAD = 4  # tasks queued per worker: enough to keep each busy
_EVERY_S = 10.0  # a progress line at least this often, besides every tenth of the way


def cores() -> int:
    """The cores this process may use (its CPU affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _encoded(paths: Sequence[Path], size: int, fit: str, workers: int) -> Iterator[bytes | str]:
    """`square_jpeg` of each path, in order: JPEG bytes, or why the picture could not be read.
    `workers=1` encodes in this process."""
    chunks = [[str(p) for p in paths[start : start + _CHUNK]] for start in range(0, len(paths), _CHUNK)]
    if workers == 1:
        for chunk in chunks:
            yield from _encode_batch(chunk, size, fit)
        return
    pool = ProcessPoolExecutor(min(workers, len(chunks) or 1), mp_context=multiprocessing.get_context("spawn"))
    try:
        waiting: deque[Future[list[bytes | str]]] = deque()
        for chunk in chunks:
            waiting.append(pool.submit(_encode_batch, chunk, size, fit))
            if len(waiting) > workers * _AHEAD:
                yield from waiting.popleft().result()
        while waiting:
            yield from waiting.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # a failure stops the queued tasks, not just this loop


class _Progress:
    """Counts pictures and prints `done/total pictures (p%), N images/s` every tenth of the way and
    at least every _EVERY_S seconds: plain lines, for notebooks as much as terminals."""

    def __init__(self, total: int, say: Callable[[str], None]) -> None:
        self.total, self.say, self.done = total, say, 0
        self.start = self.last = time.perf_counter()

    @property
    def rate(self) -> float:  # pictures per second so far
        return self.done / max(time.perf_counter() - self.start, 1e-9)

    def advance(self, doing: str) -> None:
        """One more picture done; `doing` says what (e.g. "train")."""
        self.done += 1
        now = time.perf_counter()
        if self.done * 10 // self.total > (self.done - 1) * 10 // self.total or now - self.last >= _EVERY_S:
            self.last = now
            percent = 100 * self.done // self.total
            self.say(f"  {self.done:,}/{self.total:,} pictures ({percent}%), {self.rate:,.0f} images/s, {doing}")


_ESTIMATE_FROM = 32  # pictures encoded before the files are planned; their mean size stands for all


def _balanced(count: int, parts: int) -> list[int]:
    """`count` records in `parts` files whose sizes differ by one at most."""
    return [count // parts + (i < count % parts) for i in range(parts)]


def _plan(group_sizes: Sequence[int], bytes_per_record: float) -> list[list[int]]:
    """Records per file for each group of one split (the split itself, or each of its folds: a file
    never mixes folds), the split's files shared among the groups by their sizes."""
    total = sum(group_sizes)  # never 0: every split has pictures
    files = writer.shard_count(round(bytes_per_record * total), total)
    return [_balanced(size, min(size, math.ceil(files * size / total))) for size in group_sizes]


def _write_files(
    records: Iterator[bytes | None], folder: Path, image_size: int, counts: Sequence[Sequence[int]]
) -> list[list[str]]:
    """Write the next records of `records` into files of `counts` (per group, as `_plan` gives them);
    a None (a skipped picture) takes its place but writes nothing. The file names, per group."""
    folder.mkdir(parents=True, exist_ok=True)
    names: list[list[str]] = []
    for group in counts:
        names.append([])
        for count in group:
            kept = [record for record in islice(records, count) if record is not None]  # one file: ~100 MB
            if kept:  # else every picture of this file was skipped
                name = writer.file_name(sum(map(len, names)), image_size, len(kept))
                writer.write_records(folder / name, kept)
                names[-1].append(name)
    return names


def write_splits(
    splits: dict[str, list[Any]], staging: Path, options: Any, say: Callable[[str], None]
) -> tuple[dict[str, list[list[str]]], list[str], _Progress]:
    """Encode every picture of `splits` ({split: its groups}, see nbkit.convert.run) with `options.workers`
    processes and write each split's files in `staging`: (the file names per split and group, the ids of
    the damaged pictures left out, the progress: pictures done and their rate)."""
    everything = [picture for groups in splits.values() for group in groups for picture in group.pictures]
    progress = _Progress(len(everything), say)
    say(f"encoding {len(everything):,} pictures with {options.workers} worker(s)")
    names, skipped = {}, []
    stream = _encoded([picture.path for picture in everything], options.size, options.fit, options.workers)
    with contextlib.closing(stream):  # a failure stops the worker processes now, not when `stream` is collected
        head = list(islice(stream, _ESTIMATE_FROM))
        sizes = [len(r) for r in head if isinstance(r, bytes)]
        bytes_per_record = sum(sizes) / len(sizes) if sizes else options.size**2 / 4
        results = chain(head, stream)
        for name, groups in splits.items():
            counts = _plan([len(g.pictures) for g in groups], bytes_per_record)
            records = (r for g in groups for r in _examples(g, results, options.skip_damaged, skipped, progress, say))
            folder = Path(layout.split_folder(staging, options.size, name))
            names[name] = _write_files(records, folder, options.size, counts)
    return names, skipped, progress


def _examples(
    group: Any, results: Iterator[bytes | str], skip_damaged: bool, skipped: list[str], progress: _Progress, say: Any
) -> Iterator[bytes | None]:
    """The group's serialized examples (`image`, `id`, and `class` when labeled), in order; None
    for a damaged picture when skipping, else a DataError naming it."""
    for picture, label, result in zip(group.pictures, group.labels, results):
        progress.advance(group.split)
        if isinstance(result, bytes):
            yield writer.encode_example(
                {"image": result, "id": picture.id, **({} if label is None else {"class": label})}
            )
        elif skip_damaged and label is not None:
            say(f"  skipped {picture.where}: {result}")
            skipped.append(picture.id)
            yield None
        else:
            advice = (
                "it: a test picture cannot be left out (the submission needs it)"
                if label is None
                else "or delete it, or pass --skip-damaged (skip_damaged=True) to leave it out and list it"
            )
            raise DataError(f"{picture.where}: cannot decode {picture.path} as a picture ({result}). Replace {advice}.")


def preview(files: Sequence[str | Path], path: str | Path | None = None) -> Any:
    """Picture files as a decoder that ignores EXIF orientation sees them (tf.io.decode_jpeg does),
    titled with their name, size, mode and EXIF orientation: phone pictures show up turned."""
    import numpy as np
    from PIL import Image

    from nbkit.images.grids import grid
    from nbkit.plots import save

    figure, panels = grid(len(files), 3.1)
    for index, axis in enumerate(panels):
        with Image.open(files[index]) as image:
            orientation = image.getexif().get(0x0112, 1)  # the EXIF Orientation tag
            title = f"{Path(files[index]).name}\n{image.width}x{image.height} {image.mode}"
            axis.imshow(np.asarray(image.convert("RGB")))
        turned = orientation != 1
        axis.set_title(
            title + (f", EXIF turn {orientation}" if turned else ""), fontsize=8, color="red" if turned else "black"
        )
    return save(figure, path)
