"""A small, learnable sample in the kit's layout and format (the flowers notebooks' stand-in when the
competition is not there): coloured shapes as real JPEGs, one look per class, the same drawings at
every image size. Written without TensorFlow."""

from __future__ import annotations

import colorsys
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import ParameterError
from nbkit.images import writer


def _sample_image(label: int, size: int, rng: Any) -> Any:
    """One learnable RGB uint8 image: the class sets the background hue, the shape and its hue;
    position, size and brightness vary per image."""
    import numpy as np

    background = np.array(colorsys.hsv_to_rgb((label * 0.618) % 1.0, 0.5, rng.uniform(0.5, 0.8)))
    foreground = np.array(colorsys.hsv_to_rgb((label * 0.29 + 0.5) % 1.0, 0.9, rng.uniform(0.8, 1.0)))
    y, x = np.mgrid[0:size, 0:size] / size
    cy, cx = rng.uniform(0.35, 0.65, size=2)
    radius = rng.uniform(0.18, 0.3)
    mask = shape_mask(label % 4, np.abs(y - cy), np.abs(x - cx), radius)
    image = np.where(mask[..., None], foreground, background) + rng.normal(0, 0.03, (size, size, 3))
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


def shape_mask(shape: int, dy: Any, dx: Any, radius: float) -> Any:
    """Where shape 0-3 (disc, square, ring, cross) covers the pixels `dy`, `dx` away from its centre."""
    import numpy as np

    if shape == 0:  # disc
        return dy**2 + dx**2 < radius**2
    if shape == 1:  # square
        return np.maximum(dy, dx) < radius
    if shape == 2:  # ring
        return np.abs(np.sqrt(dy**2 + dx**2) - radius) < radius / 3
    return (np.minimum(dy, dx) < radius / 3) & (np.maximum(dy, dx) < radius)  # cross


def _encode_jpeg(image: Any, quality: int = 90) -> bytes:
    """JPEG bytes of a uint8 RGB array, byte for byte what `tf.io.encode_jpeg(image, quality)` writes
    (baseline, 4:2:0, 300 dpi in the JFIF header)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality, dpi=(300, 300))
    return buffer.getvalue()


def _sample_splits(
    image_size: int,
    num_classes: int,
    train_per_class: int = 8,
    val_per_class: int = 2,
    test_images: int = 104,
    seed: int = 0,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(split, records) of the generated sample at one size; every record has an `id`."""
    import numpy as np

    if num_classes < 1:
        raise ParameterError(f"num_classes={num_classes} must be at least 1.")
    plan = {
        "train": np.tile(np.arange(num_classes), train_per_class),
        "val": np.tile(np.arange(num_classes), val_per_class),
        "test": np.random.default_rng(seed + 1).integers(0, num_classes, test_images),
    }
    for split_index, (split, labels) in enumerate(plan.items()):
        rng = np.random.default_rng([seed, split_index])  # same draws at every image size
        records = []
        for i, label in enumerate(labels):
            jpeg = _encode_jpeg(_sample_image(int(label), image_size, rng))
            label_or_not = {} if split == "test" else {"class": int(label)}
            records.append({"image": jpeg, "id": f"{seed:03x}{split_index}{i:05x}", **label_or_not})
        yield split, records


def make_sample(
    data_root: str | Path,
    num_classes: int,
    image_sizes: Sequence[int] = (192,),
    train_per_class: int = 8,
    val_per_class: int = 2,
    test_images: int = 104,
    seed: int = 0,
) -> Path:
    """Write the sample (deterministic for a `seed`) under `data_root`, every size in `image_sizes`."""
    for size in image_sizes:
        for split, records in _sample_splits(size, num_classes, train_per_class, val_per_class, test_images, seed):
            writer.write_split(records, data_root, size, split)
    return Path(data_root)


def ensure_sample(sample_dir: str | Path, num_classes: int) -> Path:
    """The default sample of `num_classes` classes in `sample_dir`, written the first time (later runs
    reuse it). It is written into a staging folder and renamed into place, so a killed run never leaves
    half a sample."""
    sample_dir = Path(sample_dir)
    if not sample_dir.is_dir():
        with atomic.staged_dir(sample_dir) as staging:
            make_sample(staging, num_classes)
    return sample_dir
