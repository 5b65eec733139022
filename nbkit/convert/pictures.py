"""One picture file -> one upright, square, RGB JPEG of exactly `size` x `size`, with Pillow.

Phone pictures are turned upright by their EXIF orientation; grayscale, palette, transparent
(composited on white), CMYK and 16-bit pictures all become 8-bit RGB. Large JPEGs are decoded at a
reduced scale (`Image.draft`): a phone's 4000x3000 picture decodes at 1/4 or 1/8 of its size.
Same file, same options -> same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FITS = ("resize", "crop", "pad")
SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")  # what Pillow reads cheaply
_RESAMPLE_GAP = 3.0  # Pillow's reducing_gap: box-reduce first, then resample; 3.0 looks like a full resample
_ORIENTATION = 0x0112  # the EXIF tag
_WHITE = (255, 255, 255)
# What Pillow raises for a file that is not a picture, is cut short, or is too large to open safely.
_UNREADABLE = (OSError, ValueError, SyntaxError, EOFError, IndexError)


def square_jpeg(path: str | Path, size: int, fit: str = "resize", quality: int = 95) -> bytes:
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
        if image.getexif().get(_ORIENTATION, 1) != 1:
            image = ImageOps.exif_transpose(image)  # a copy: only for the pictures that need turning
        image = to_square(_to_rgb(image), size, fit)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def _to_rgb(image: Any) -> Any:
    """An 8-bit RGB copy of `image`: transparency composited on white, 16-bit values scaled, not clipped."""
    from PIL import Image

    if image.mode == "RGB":
        return image
    if image.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        return _sixteen_bit_to_rgb(image)
    if (image.mode == "P" and "transparency" in image.info) or image.mode in ("PA", "LA", "La", "RGBA", "RGBa"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, _WHITE + (255,))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")  # L, 1, P, CMYK (Adobe's inverted CMYK is undone by the decoder), YCbCr, F...


def _sixteen_bit_to_rgb(image: Any) -> Any:
    """A 16-bit grayscale picture (PNG, TIFF) as RGB, 0..65535 scaled to 0..255 (Pillow's own
    conversion clips everything above 255 to white)."""
    import numpy as np
    from PIL import Image

    values = np.asarray(image).astype(np.int64)
    scaled = np.clip((values + 128) // 257, 0, 255).astype(np.uint8)  # 257 * 255 == 65535
    return Image.fromarray(scaled, "L").convert("RGB")


def to_square(image: Any, size: int, fit: str) -> Any:
    """`image` made `size` x `size` the way `fit` says (see square_jpeg)."""
    from PIL import Image

    width, height = image.size
    # Pillow's bilinear filter widens with the reduction (antialiased, unlike a GPU's bilinear): as
    # smooth as bicubic for training pictures, at half its cost, and resizing is most of the time.
    resample = Image.Resampling.BILINEAR
    if fit == "resize":
        return image.resize((size, size), resample, reducing_gap=_RESAMPLE_GAP)
    if fit == "crop":
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        return image.resize(
            (size, size), resample, box=(left, top, left + side, top + side), reducing_gap=_RESAMPLE_GAP
        )
    # pad: the whole picture scaled to fit the square, centred on black (letterbox)
    longest = max(width, height)
    inner = (max(1, round(width * size / longest)), max(1, round(height * size / longest)))
    canvas = Image.new("RGB", (size, size))
    canvas.paste(
        image.resize(inner, resample, reducing_gap=_RESAMPLE_GAP), ((size - inner[0]) // 2, (size - inner[1]) // 2)
    )
    return canvas


def encode_batch(paths: Sequence[str], size: int, fit: str, quality: int) -> list[bytes | str]:
    """square_jpeg of each path, or, for a picture Pillow cannot read, why (a str). Runs in worker processes."""
    from PIL import Image

    results: list[bytes | str] = []
    for path in paths:
        try:
            results.append(square_jpeg(path, size, fit, quality))
        except (*_UNREADABLE, Image.DecompressionBombError) as error:
            results.append(f"{type(error).__name__}: {error}")
    return results
