"""A small stand-in for Kaggle's "I'm Something of a Painter Myself", in exactly its layout: `photo_tfrec/`
and `monet_tfrec/` (`photoNN-COUNT.tfrec`: `image_name`, `image` = a 256x256 JPEG, `target`) and the same
pictures in `photo_jpg/`, `monet_jpg/`. The "photos" are coloured shapes on a gradient; the "paintings" are
other such photos under a style this module knows (`style`: a colour mapping, then smoothing), so a test
can measure how well a generator learnt it. Written without TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nbkit import atomic
from nbkit.images import sample, writer

_SIZE = 256
# The style: each pixel's colour mapped to a warm, low-contrast palette (out = rgb @ _MIX + _SHIFT), then a
# 5-pixel box blur (at 256 px) that softens the edges.
_MIX = np.array([[0.55, 0.10, 0.00], [0.15, 0.45, 0.05], [0.00, 0.15, 0.40]])
_SHIFT = np.array([0.35, 0.25, 0.15])
_BLUR_RADIUS = 2  # a box of 2 * 2 + 1 = 5 pixels


def style(image: np.ndarray) -> np.ndarray:
    """The sample's "painting" of a uint8 RGB picture (any size; the blur is scaled to it)."""
    from PIL import Image, ImageFilter

    mapped = np.round(np.clip(image / 255.0 @ _MIX + _SHIFT, 0, 1) * 255).astype(np.uint8)
    radius = _BLUR_RADIUS * image.shape[0] / _SIZE
    return np.asarray(Image.fromarray(mapped).filter(ImageFilter.BoxBlur(radius)))


def _photo(rng: np.random.Generator) -> np.ndarray:
    y, x = np.mgrid[0:_SIZE, 0:_SIZE] / _SIZE
    top, bottom = rng.uniform(0, 1, (2, 3))
    image = top + (bottom - top) * y[..., None]  # a gradient, like a sky over the ground
    for _ in range(3):
        cy, cx = rng.uniform(0.2, 0.8, 2)
        mask = sample.shape_mask(int(rng.integers(4)), np.abs(y - cy), np.abs(x - cx), rng.uniform(0.1, 0.25))
        image = np.where(mask[..., None], rng.uniform(0, 1, 3), image)
    return (np.clip(image + rng.normal(0, 0.02, image.shape), 0, 1) * 255).astype(np.uint8)


def _make(folder: str | Path, photos: int = 60, paintings: int = 40, per_file: int = 20, seed: int = 0) -> Path:
    """Write the sample into `folder`: `photos` photos and `paintings` paintings (styled photos of their own,
    never the photos themselves), `per_file` a TFRecord file."""
    folder = Path(folder)
    for domain, count, styled in (("photo", photos, False), ("monet", paintings, True)):
        rng = np.random.default_rng([seed, styled])
        records = []
        for _ in range(count):
            picture = _photo(rng)
            records.append(
                {
                    "image_name": f"{rng.integers(16**10):010x}",
                    "image": sample._encode_jpeg(style(picture) if styled else picture, quality=95),
                    "target": domain,
                }
            )
        (folder / f"{domain}_tfrec").mkdir(parents=True, exist_ok=True)
        (folder / f"{domain}_jpg").mkdir(exist_ok=True)
        for index, start in enumerate(range(0, count, per_file)):
            chunk = records[start : start + per_file]
            path = folder / f"{domain}_tfrec" / f"{domain}{index:02d}-{len(chunk)}.tfrec"
            writer.write_records(path, map(writer.encode_example, chunk))
        for record in records:
            (folder / f"{domain}_jpg" / f"{record['image_name']}.jpg").write_bytes(record["image"])
    return folder


def ensure(folder: str | Path) -> Path:
    """The default sample in `folder`, written the first time (into a staging folder renamed into place)."""
    folder = Path(folder)
    if not folder.is_dir():
        with atomic.staged_dir(folder) as staging:
            _make(staging)
    return folder
