"""The "Flower Classification with TPUs" TFRecord format: find, count, read, write, and a sample.

Layout under a data root: `tfrecords-jpeg-{192x192,224x224,331x331,512x512}/{train,val,test}/*.tfrec`.
Labeled records hold `image` (JPEG bytes) and `class` (int64); test records hold `image` and
`id` (string). File names end in `-<count>.tfrec`, so item counts come from the names.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from nbkit.errors import DataError

IMAGE_SIZES = (192, 224, 331, 512)
SPLITS = ("train", "val", "test")
COUNT_IN_NAME = re.compile(r"-(\d+)\.tfrec$")
TARGET_SHARD_BYTES = 100 * 2**20  # "tens to hundreds of files of tens to hundreds of MB"
MIN_SHARDS = 16  # enough files for parallel reads on 8 cores

# The competition's 104 classes, in label order.
CLASSES = [
    "pink primrose", "hard-leaved pocket orchid", "canterbury bells", "sweet pea", "wild geranium",
    "tiger lily", "moon orchid", "bird of paradise", "monkshood", "globe thistle",
    "snapdragon", "colt's foot", "king protea", "spear thistle", "yellow iris",
    "globe-flower", "purple coneflower", "peruvian lily", "balloon flower", "giant white arum lily",
    "fire lily", "pincushion flower", "fritillary", "red ginger", "grape hyacinth",
    "corn poppy", "prince of wales feathers", "stemless gentian", "artichoke", "sweet william",
    "carnation", "garden phlox", "love in the mist", "cosmos", "alpine sea holly",
    "ruby-lipped cattleya", "cape flower", "great masterwort", "siam tulip", "lenten rose",
    "barberton daisy", "daffodil", "sword lily", "poinsettia", "bolero deep blue",
    "wallflower", "marigold", "buttercup", "daisy", "common dandelion",
    "petunia", "wild pansy", "primula", "sunflower", "lilac hibiscus",
    "bishop of llandaff", "gaura", "geranium", "orange dahlia", "pink-yellow dahlia",
    "cautleya spicata", "japanese anemone", "black-eyed susan", "silverbush", "californian poppy",
    "osteospermum", "spring crocus", "iris", "windflower", "tree poppy",
    "gazania", "azalea", "water lily", "rose", "thorn apple",
    "morning glory", "passion flower", "lotus", "toad lily", "anthurium",
    "frangipani", "clematis", "hibiscus", "columbine", "desert-rose",
    "tree mallow", "magnolia", "cyclamen", "watercress", "canna lily",
    "hippeastrum", "bee balm", "pink quill", "foxglove", "bougainvillea",
    "camellia", "mallow", "mexican petunia", "bromelia", "blanket flower",
    "trumpet creeper", "blackberry lily", "common tulip", "wild rose",
]


def split_folder(data_root: str | Path, image_size: int, split: str) -> Path:
    """`<root>/tfrecords-jpeg-<s>x<s>/<split>`."""
    if split not in SPLITS:
        raise DataError(f"split={split!r} is not one of {SPLITS}.")
    return Path(data_root) / f"tfrecords-jpeg-{image_size}x{image_size}" / split


def find_files(data_root: str | Path, image_size: int, split: str) -> list[str]:
    """The `.tfrec` files of one split, sorted; a DataError says what is missing."""
    root = Path(data_root)
    if not root.is_dir():
        raise DataError(f"Data root {root} does not exist: set DATA_ROOT to the competition folder or to a generated sample.")
    folder = split_folder(root, image_size, split)
    files = sorted(str(p) for p in folder.glob("*.tfrec"))
    if not files:
        sizes = sorted(p.name for p in root.glob("tfrecords-jpeg-*"))
        raise DataError(
            f"No .tfrec files in {folder}. Folders under {root}: {sizes or 'none'}; "
            f"pick IMAGE_SIZE from those (competition sizes: {IMAGE_SIZES})."
        )
    return files


def count_items(files: Iterable[str]) -> int:
    """Total items, read from the `-<count>.tfrec` ending of each file name."""
    total = 0
    for name in files:
        match = COUNT_IN_NAME.search(str(name))
        if match is None:
            raise DataError(f"{name}: the file name does not end in -<count>.tfrec, so its item count is unknown.")
        total += int(match.group(1))
    return total


def shard_count(total_bytes: int, num_records: int, target_bytes: int = TARGET_SHARD_BYTES) -> int:
    """Files to write: about `target_bytes` each, and at least MIN_SHARDS when there are enough records."""
    by_size = math.ceil(total_bytes / target_bytes)
    return max(1, min(num_records, max(by_size, MIN_SHARDS)))


def write_tfrecords(
    records: Sequence[Mapping[str, Any]],
    data_root: str | Path,
    image_size: int,
    split: str,
    shards: int | None = None,
) -> list[Path]:
    """Write records ({"image": jpeg bytes, "class": int} or {"image": ..., "id": str}) in the
    competition layout and naming (`00-192x192-798.tfrec`); return the files written.

    The shard count follows `shard_count()` unless `shards` is given.
    """
    import tensorflow as tf

    if not records:
        raise DataError(f"No records to write for split {split!r}.")
    folder = split_folder(data_root, image_size, split)
    folder.mkdir(parents=True, exist_ok=True)
    total_bytes = sum(len(r["image"]) for r in records)
    shards = shards or shard_count(total_bytes, len(records))
    per_shard = math.ceil(len(records) / shards)
    written = []
    for index, start in enumerate(range(0, len(records), per_shard)):
        chunk = records[start : start + per_shard]
        path = folder / f"{index:02d}-{image_size}x{image_size}-{len(chunk)}.tfrec"
        partial = path.with_suffix(".partial")  # a crash mid-write leaves no valid-looking file
        with tf.io.TFRecordWriter(str(partial)) as writer:
            for record in chunk:
                writer.write(_example(record).SerializeToString())
        partial.replace(path)
        written.append(path)
    return written


def _example(record: Mapping[str, Any]) -> Any:
    import tensorflow as tf

    def bytes_feature(value: bytes) -> Any:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    feature = {"image": bytes_feature(record["image"])}
    if "class" in record:
        feature["class"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(record["class"])]))
    else:
        feature["id"] = bytes_feature(str(record["id"]).encode())
    return tf.train.Example(features=tf.train.Features(feature=feature))


def read_records(files: Sequence[str], labeled: bool) -> list[dict[str, Any]]:
    """Every record of `files` in order, as Python values (for checks and small data; not for training)."""
    import tensorflow as tf

    features = {"image": tf.io.FixedLenFeature([], tf.string)}
    features.update({"class": tf.io.FixedLenFeature([], tf.int64)} if labeled else {"id": tf.io.FixedLenFeature([], tf.string)})
    records = []
    for name in files:
        try:
            for raw in tf.data.TFRecordDataset(name):
                parsed = tf.io.parse_single_example(raw, features)
                record = {"image": parsed["image"].numpy()}
                if labeled:
                    record["class"] = int(parsed["class"])
                else:
                    record["id"] = parsed["id"].numpy().decode()
                records.append(record)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
            raise DataError(f"{name}: not a readable competition TFRecord ({type(error).__name__}: "
                            f"{str(error).splitlines()[0]}). Re-download or regenerate it.") from error
    return records


def sample_image(label: int, size: int, rng: Any) -> Any:
    """One learnable RGB uint8 image: the class sets the background hue, the shape and its hue;
    position, size and brightness vary per image."""
    import colorsys

    import numpy as np

    background = np.array(colorsys.hsv_to_rgb((label * 0.618) % 1.0, 0.5, rng.uniform(0.5, 0.8)))
    foreground = np.array(colorsys.hsv_to_rgb((label * 0.29 + 0.5) % 1.0, 0.9, rng.uniform(0.8, 1.0)))
    y, x = np.mgrid[0:size, 0:size] / size
    cy, cx = rng.uniform(0.35, 0.65, size=2)
    radius = rng.uniform(0.18, 0.3)
    dy, dx = np.abs(y - cy), np.abs(x - cx)
    shape = label % 4
    if shape == 0:  # disc
        mask = dy**2 + dx**2 < radius**2
    elif shape == 1:  # square
        mask = np.maximum(dy, dx) < radius
    elif shape == 2:  # ring
        mask = np.abs(np.sqrt(dy**2 + dx**2) - radius) < radius / 3
    else:  # cross
        mask = (np.minimum(dy, dx) < radius / 3) & (np.maximum(dy, dx) < radius)
    image = np.where(mask[..., None], foreground, background) + rng.normal(0, 0.03, (size, size, 3))
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


def make_sample(
    data_root: str | Path,
    image_sizes: Sequence[int] = (192,),
    train_per_class: int = 8,
    val_per_class: int = 2,
    test_images: int = 104,
    num_classes: int = len(CLASSES),
    seed: int = 0,
) -> Path:
    """Write a small, deterministic, learnable dataset in exactly the competition layout and format.

    The same images (same seed) are written at every size in `image_sizes`, like the competition.
    Returns `data_root`.
    """
    import numpy as np
    import tensorflow as tf

    if not 1 <= num_classes <= len(CLASSES):
        raise DataError(f"num_classes={num_classes} must be between 1 and {len(CLASSES)}.")
    plan = {
        "train": np.tile(np.arange(num_classes), train_per_class),
        "val": np.tile(np.arange(num_classes), val_per_class),
        "test": np.random.default_rng(seed + 1).integers(0, num_classes, test_images),
    }
    for size in image_sizes:
        for split_index, (split, labels) in enumerate(plan.items()):
            rng = np.random.default_rng([seed, split_index])  # same draws at every image size
            records = []
            for i, label in enumerate(labels):
                jpeg = tf.io.encode_jpeg(sample_image(int(label), size, rng), quality=90).numpy()
                if split == "test":
                    records.append({"image": jpeg, "id": f"{seed:03x}{split_index}{i:05x}"})
                else:
                    records.append({"image": jpeg, "class": int(label)})
            write_tfrecords(records, data_root, size, split)
    return Path(data_root)
