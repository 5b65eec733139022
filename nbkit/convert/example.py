"""A small generated competition in the layout of Kaggle's Cassava Leaf Disease Classification: the
converter's stand-in where no competition is attached, and its tests' data. Deterministic,
learnable (each class its own colours and shape, as in the flowers sample), written in a
second or two.

    train_images/*.jpg          64-256 px, landscape and portrait; a few phone-style pictures stored
                                turned, upright only by their EXIF orientation; and the awkward kinds:
                                grayscale, CMYK JPEG, RGBA, palette and 16-bit PNG
    train.csv                   image_id,label (1000015157.jpg,3): ids with extension, labels 0-4
    label_num_to_disease_map.json   {"0": "Cassava Bacterial Blight (CBB)", ...}
    test_images/*.jpg
    sample_submission.csv       image_id,label

`form="folders"` writes train_images/<class>/... (no CSV) instead; `ids_with_extension=False`
writes ids as `1000015157`; `name_labels=True` writes labels as names (`cbb`, ...).
"""

from __future__ import annotations

import colorsys
import csv
import json
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.images import sample

_DISEASES = (
    "Cassava Bacterial Blight (CBB)",
    "Cassava Brown Streak Disease (CBSD)",
    "Cassava Green Mottle (CGM)",
    "Cassava Mosaic Disease (CMD)",
    "Healthy",
)
_SHORT_NAMES = ("cbb", "cbsd", "cgm", "cmd", "healthy")
# The first training pictures are of these kinds, one each: (file suffix, how it is stored).
_ODD_KINDS = (
    (".jpg", "exif-6"),  # stored turned a quarter to the left: a viewer turns it right (phones)
    (".jpg", "exif-8"),
    (".jpg", "exif-3"),  # stored upside down
    (".jpg", "gray"),
    (".jpg", "cmyk"),
    (".png", "rgba"),
    (".png", "palette"),
    (".png", "gray16"),
)
# What a viewer must do to the stored pixels for each EXIF orientation, undone here to store them.
_STORED_TURN = {"exif-6": "ROTATE_90", "exif-8": "ROTATE_270", "exif-3": "ROTATE_180"}


def drawing(label: int, width: int, height: int, rng: Any) -> Any:
    """One learnable RGB uint8 picture, `height` x `width`: the class sets the background hue, the
    shape and its hue; position, size and brightness vary."""
    import numpy as np

    background = np.array(colorsys.hsv_to_rgb((label * 0.618) % 1.0, 0.55, rng.uniform(0.45, 0.75)))
    foreground = np.array(colorsys.hsv_to_rgb((label * 0.29 + 0.5) % 1.0, 0.9, rng.uniform(0.8, 1.0)))
    side = min(width, height)
    y, x = np.mgrid[0:height, 0:width] / side
    cy, cx = rng.uniform(0.4, 0.6) * height / side, rng.uniform(0.4, 0.6) * width / side
    radius = rng.uniform(0.2, 0.32)
    dy, dx = np.abs(y - cy), np.abs(x - cx)
    if label % 5 < 4:  # the sample's shapes, then stripes
        mask = sample.shape_mask(label % 5, dy, dx, radius)
    else:
        mask = (np.floor(x * 8) % 2 == 0) & (dy < radius)
    picture = np.where(mask[..., None], foreground, background) + rng.normal(0, 0.03, (height, width, 3))
    return (np.clip(picture, 0, 1) * 255).astype(np.uint8)


def _save_picture(pixels: Any, path: Path, kind: str = "plain") -> None:
    """Write RGB `pixels` to `path` stored as `kind` says (see ODD_KINDS; "plain": a JPEG as it is)."""
    import numpy as np
    from PIL import Image

    image = Image.fromarray(pixels)
    if kind in _STORED_TURN:
        exif = Image.Exif()
        exif[0x0112] = int(kind.split("-")[1])  # the Orientation tag
        image.transpose(getattr(Image.Transpose, _STORED_TURN[kind])).save(path, "JPEG", quality=92, exif=exif)
    elif kind in ("gray", "cmyk"):
        image.convert("L" if kind == "gray" else "CMYK").save(path, "JPEG", quality=92)
    elif kind == "rgba":
        alpha = np.full(pixels.shape[:2], 255, np.uint8)
        alpha[: pixels.shape[0] // 4] = 0  # a transparent top quarter: white once composited
        Image.fromarray(np.dstack([pixels, alpha]), "RGBA").save(path)
    elif kind == "palette":
        image.quantize(64).save(path, transparency=0)
    elif kind == "gray16":
        gray = np.asarray(image.convert("L"), np.uint16) * 257  # 0-255 spread over 0-65535
        Image.fromarray(gray).save(path)
    else:
        image.save(path, "JPEG", quality=92)


def _make_example(
    folder: str | Path,
    *,
    per_class: int = 20,
    test_pictures: int = 15,
    num_classes: int = 5,
    form: str = "csv",
    ids_with_extension: bool = True,
    name_labels: bool = False,
) -> Path:
    """Write the example competition into `folder` (replacing it whole, never half written); returns it."""
    import numpy as np

    rng = np.random.default_rng(0)
    # Sorted: the odd kinds (written first) come first in a folder listing too.
    numbers = np.sort(rng.choice(9 * 10**9, per_class * num_classes + test_pictures, replace=False) + 10**9)
    labels = [i % num_classes for i in range(per_class * num_classes)]
    values = [_SHORT_NAMES[i] if name_labels or form == "folders" else i for i in range(num_classes)]
    with atomic.staged_dir(folder) as staging:
        rows = []
        for i, label in enumerate(labels):
            suffix, kind = _ODD_KINDS[i] if i < len(_ODD_KINDS) else (".jpg", "plain")
            name = f"{numbers[i]}{suffix}"
            where = staging / "train_images" / (str(values[label]) if form == "folders" else "")
            where.mkdir(parents=True, exist_ok=True)
            width, height = (int(v) for v in rng.integers(64, 257, 2))
            _save_picture(drawing(label, width, height, rng), where / name, kind)
            rows.append((name if ids_with_extension else name.rsplit(".", 1)[0], values[label]))
        if form == "csv":
            _write_csv(staging / "train.csv", rows)
        names = {str(values[i]): _DISEASES[i] for i in range(num_classes)}
        (staging / "label_num_to_disease_map.json").write_text(json.dumps(names, indent=1) + "\n")
        tests = []
        for number in numbers[len(labels) :]:
            (staging / "test_images").mkdir(exist_ok=True)
            width, height = (int(v) for v in rng.integers(64, 257, 2))
            _save_picture(
                drawing(int(rng.integers(num_classes)), width, height, rng), staging / f"test_images/{number}.jpg"
            )
            tests.append((f"{number}.jpg" if ids_with_extension else str(number), values[-1]))
        _write_csv(staging / "sample_submission.csv", tests)
    return Path(folder)


def _write_csv(path: Path, rows: list[tuple[str, Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image_id", "label"])
        writer.writerows(rows)


def stand_in(environment: Any) -> Any:
    """The example in the working folder (written the first time), as the DataSource notebook 07
    converts where no competition is attached."""
    from nbkit.inputs.datasets import DataSource

    folder = Path(environment.working_dir) / "cassava-example"
    if not folder.is_dir():
        _make_example(folder)
    return DataSource(str(folder), f"a generated Cassava-style competition in {folder} stands in")
