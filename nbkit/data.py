"""The "Flower Classification with TPUs" TFRecord format: find, count, read, write, and a sample.

Layout under a data root: `tfrecords-jpeg-{192x192,224x224,331x331,512x512}/{train,val,test}/*.tfrec`.
Labeled records hold `image` (JPEG bytes) and `class` (int64); test records hold `image` and
`id` (string). File names end in `-<count>.tfrec`, so item counts come from the names.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

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
                # Sorted map keys: without this the feature order (and so the file's bytes and
                # its fingerprint) depends on what else the process imported first.
                writer.write(_example(record).SerializeToString(deterministic=True))
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


def _features(labeled: bool) -> dict[str, Any]:
    """The tf.Example spec: `image` + `class` (labeled) or `image` + `id` (test)."""
    import tensorflow as tf

    key = {"class": tf.io.FixedLenFeature([], tf.int64)} if labeled else {"id": tf.io.FixedLenFeature([], tf.string)}
    return {"image": tf.io.FixedLenFeature([], tf.string), **key}


@contextlib.contextmanager
def _reading(name: str, labeled: bool) -> Iterator[None]:
    """Turn TensorFlow's read errors for file `name` into a DataError that names it."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.DataLossError as error:
        raise DataError(f"{name} is truncated or corrupt ({str(error).splitlines()[0]}). Re-download or regenerate it.") from error
    except tf.errors.InvalidArgumentError as error:
        raise DataError(
            f"{name}: not a readable {'labeled' if labeled else 'test'} record (needs image + "
            f"{'class' if labeled else 'id'}): {str(error).splitlines()[0]}"
        ) from error


def read_records(files: Sequence[str], labeled: bool) -> list[dict[str, Any]]:
    """Every record of `files` in order, as Python values (for checks and small data; not for training)."""
    import tensorflow as tf

    features = _features(labeled)
    key = "class" if labeled else "id"
    records = []
    for name in files:
        with _reading(name, labeled):
            for raw in tf.data.TFRecordDataset(name):
                parsed = tf.io.parse_single_example(raw, features)
                value = parsed[key].numpy()
                records.append({"image": parsed["image"].numpy(), key: int(value) if labeled else value.decode()})
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
    Returns `data_root`. (`nbkit.tfrecord.make_sample` writes the same files without TensorFlow.)
    """
    import tensorflow as tf

    def encode(image: Any) -> bytes:
        return tf.io.encode_jpeg(image, quality=90).numpy()

    for size in image_sizes:
        for split, records in sample_splits(size, encode, train_per_class, val_per_class, test_images, num_classes, seed):
            write_tfrecords(records, data_root, size, split)
    return Path(data_root)


def sample_splits(image_size: int, encode: Callable[[Any], bytes], train_per_class: int = 8, val_per_class: int = 2,
                  test_images: int = 104, num_classes: int = len(CLASSES), seed: int = 0
                  ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(split, records) of the generated sample at one size; `encode` turns a uint8 image into JPEG bytes."""
    import numpy as np

    if not 1 <= num_classes <= len(CLASSES):
        raise DataError(f"num_classes={num_classes} must be between 1 and {len(CLASSES)}.")
    plan = {
        "train": np.tile(np.arange(num_classes), train_per_class),
        "val": np.tile(np.arange(num_classes), val_per_class),
        "test": np.random.default_rng(seed + 1).integers(0, num_classes, test_images),
    }
    for split_index, (split, labels) in enumerate(plan.items()):
        rng = np.random.default_rng([seed, split_index])  # same draws at every image size
        records = []
        for i, label in enumerate(labels):
            jpeg = encode(sample_image(int(label), image_size, rng))
            if split == "test":
                records.append({"image": jpeg, "id": f"{seed:03x}{split_index}{i:05x}"})
            else:
                records.append({"image": jpeg, "class": int(label)})
        yield split, records


COMPETITION = "flower-classification-with-tpus"


@dataclass(frozen=True)
class DataRoot:
    """Where the TFRecords are read from, and why that place was chosen."""

    path: str  # a local folder or a gs:// URL
    reason: str


def resolve_root(
    data_root: str,
    slug: str = COMPETITION,
    needs_gcs: bool = False,
    sample_dir: str | Path = "out/sample-data",
    environment: Any = None,
) -> DataRoot:
    """Find the data: an explicit path; else on Kaggle the attached input (or its GCS path where a
    remote TPU needs one); else a generated sample in the competition format.

    data_root: "auto", "sample", or a folder / gs:// URL.
    needs_gcs: the TPU reads the files itself over the network (legacy TPU Node), so local
    `/kaggle/input` paths are useless to it.
    """
    from nbkit import env as nbenv

    if data_root not in ("auto", "sample"):
        if data_root.startswith("gs://") or Path(data_root).is_dir():
            return DataRoot(data_root, "DATA_ROOT was given")
        raise DataError(
            f"DATA_ROOT={data_root!r} does not exist. Give the folder that holds tfrecords-jpeg-*/, "
            "or use DATA_ROOT='auto' (Kaggle input, else a generated sample) or 'sample'."
        )
    environment = environment or nbenv.detect(probe_internet=lambda: False)
    if data_root == "auto" and environment.platform == "kaggle":
        attached = environment.input_dir / slug
        if needs_gcs:
            from kaggle_datasets import KaggleDatasets  # only inside Kaggle

            return DataRoot(KaggleDatasets().get_gcs_path(slug), "a remote TPU reads the Kaggle data from its GCS copy")
        if attached.is_dir():
            return DataRoot(str(attached), f"the Kaggle input {slug!r} is attached")
        raise DataError(f"{attached} is not attached: add the competition data ({slug}) with 'Add Input', or set DATA_ROOT='sample'.")
    sample = Path(sample_dir)
    if not (sample / "tfrecords-jpeg-192x192" / "test").is_dir():
        make_sample(sample)  # once; later runs reuse it
    return DataRoot(str(sample), f"no competition data here, so the generated sample in {sample} is used")


def decode_ratio(stored_size: int, image_size: int) -> int:
    """The largest JPEG decode-time scale-down (1, 2, 4 or 8) that still gives at least `image_size` pixels."""
    ratio = 1
    while ratio < 8 and stored_size // (2 * ratio) >= image_size:
        ratio *= 2
    return ratio


def decode_image(jpeg: Any, image_size: int, stored_size: int | None = None) -> Any:
    """JPEG bytes to a uint8 [image_size, image_size, 3] tensor; the explicit shape is what TPUs need.

    Images stored larger (`stored_size`) are decoded at a reduced scale where possible (libjpeg
    scales in the DCT: ~15% less work for 512 -> 256), then area-averaged down to `image_size`.
    """
    import tensorflow as tf

    stored_size = stored_size or image_size
    ratio = decode_ratio(stored_size, image_size)
    decoded = -(-stored_size // ratio)
    image = tf.reshape(tf.io.decode_jpeg(jpeg, channels=3, ratio=ratio), [decoded, decoded, 3])
    if decoded != image_size:
        image = tf.image.resize(image, [image_size, image_size], method="area")  # antialiased: 2x slower
        image = tf.saturate_cast(tf.round(image), tf.uint8)
    return image


def _records(files: Sequence[str], labeled: bool, ordered: bool) -> Any:
    """(JPEG bytes, class or id) pairs, one record at a time (checks and keys); an ordered read
    gives the same order on every pass."""
    import tensorflow as tf

    features = _features(labeled)

    def parse(raw: Any) -> Any:
        example = tf.io.parse_single_example(raw, features)
        return example["image"], example["class" if labeled else "id"]

    return _serialized(files, ordered).map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def _serialized(files: Sequence[str], ordered: bool) -> Any:
    """The records of `files` as serialized bytes, several files read at once (interleaved)."""
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = ordered  # training reads files as they come; val/test keep their order
    return tf.data.TFRecordDataset(list(files), num_parallel_reads=tf.data.AUTOTUNE).with_options(options)


def decode_batch(serialized: Any, image_size: int, labeled: bool, stored_size: int | None = None,
                 flip_seed: Any = None) -> tuple[Any, Any]:
    """A batch of serialized records to (uint8 images [n, size, size, 3], labels or ids).

    One vectorized parse per batch; each image is decoded (and, with a `flip_seed`, flipped like
    `flip_images` does) while it is still in the CPU cache. Images stay uint8: the model converts
    to float on the accelerator, and a quarter of the bytes cross to it.
    """
    import tensorflow as tf

    examples = tf.io.parse_example(serialized, _features(labeled))
    jpegs = examples["image"]
    flips = tf.zeros_like(jpegs, tf.bool) if flip_seed is None else _flips(tf.shape(jpegs)[0], flip_seed)

    def decode(item: Any) -> Any:
        jpeg, flip = item
        return _flipped(decode_image(jpeg, image_size, stored_size), flip)

    spec = tf.TensorSpec([image_size, image_size, 3], tf.uint8)
    images = tf.map_fn(decode, (jpegs, flips), fn_output_signature=spec)
    return images, examples["class" if labeled else "id"]


def _flipped(image: Any, flip: Any) -> Any:
    # Per image, under a condition: a copy only for the flipped half. (tf.where over the batch
    # copies everything and, broadcast, was 7x slower than the whole cached pipeline.)
    import tensorflow as tf

    return tf.cond(flip, lambda: tf.reverse(image, [1]), lambda: image)


def _flips(count: Any, seed: Any) -> Any:
    """Which images of a batch to flip: a coin per image, from the batch's seed ([2] ints)."""
    import tensorflow as tf

    return tf.random.stateless_uniform([count], seed) < 0.5


def flip_images(images: Any, seed: Any) -> Any:
    """Flip each image of a uint8 batch left-right with probability 1/2, repeatably for a `seed`."""
    import tensorflow as tf

    flips = _flips(tf.shape(images)[0], seed)
    spec = tf.TensorSpec(images.shape[1:], images.dtype)
    return tf.map_fn(lambda item: _flipped(*item), (images, flips), fn_output_signature=spec)


def fits_in_memory(num_bytes: int, share: float = 0.25) -> bool:
    """True when `num_bytes` is at most `share` of the memory available now (Linux; else False)."""
    try:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return False
    return num_bytes <= share * available


def train_dataset(files: Sequence[str], image_size: int, global_batch: int, augmented: bool = True,
                  shuffle_buffer: int = 2048, seed: int | None = None, first_epoch: int = 0,
                  batches_per_epoch: int | None = None, stored_size: int | None = None,
                  cache: bool | None = None) -> Any:
    """Shuffled, augmented (random left-right flip) (image uint8, label) batches of `global_batch`,
    epoch after epoch without end.

    Fast (see bench/): records are shuffled and batched while still small (serialized), then each
    batch is parsed and decoded in one call, batches in parallel. With `cache` (default: when the
    decoded images take at most a quarter of the free memory) every image is decoded once, here,
    and kept in memory; epochs then only shuffle and flip them: same batches, no decoding.

    An epoch is one pass over the files, cut to `batches_per_epoch` batches when given (the steps
    per epoch of `train.epoch_plan`, so data epochs and Keras epochs stay aligned). With a `seed`,
    the batches of epoch e depend only on (seed, e), so a run resumed at `first_epoch` sees exactly
    what an uninterrupted run saw there (files are then read in a fixed order). Without one, every
    call shuffles differently. `stored_size`: the files' image size when it is larger than
    `image_size` (e.g. train at 192 from the 512 files).
    """
    import tensorflow as tf

    repeatable = seed is not None
    seed = seed if repeatable else random.SystemRandom().randrange(2**31)
    count = count_items(files)
    passes = -(-global_batch // max(1, count))  # an epoch needs at least one full batch
    if cache is None:
        cache = fits_in_memory(count * image_size * image_size * 3)
    records = _serialized(files, ordered=repeatable)
    if cache:  # decoded once, in file order when seeded, so the shuffles below see the same order
        decoded = records.batch(256).map(lambda batch: decode_batch(batch, image_size, True, stored_size),
                                         num_parallel_calls=tf.data.AUTOTUNE)
        records = decoded.unbatch().cache()
        # Fill the cache now, in one pass: an epoch cut short (batches_per_epoch) would leave it
        # incomplete, and tf.data then drops it and decodes again every epoch.
        records.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)

    def epoch(index: Any) -> Any:
        epoch_seed = seed * 1_000_003 + index  # one seed per epoch, never shared between epochs
        # The order must follow `seed` alone, not a global seed set by keras.utils.set_random_seed;
        # a global seed of 0 would even break the trace (TF compares (0, tensor) == (0, 0)).
        tf.compat.v1.get_default_graph().seed = None
        # Full batches only: every replica gets the same per-replica batch, shapes stay static.
        batches = records.repeat(passes).shuffle(shuffle_buffer, seed=epoch_seed).batch(global_batch, drop_remainder=True)
        if batches_per_epoch is not None:
            batches = batches.take(batches_per_epoch)
        return batches.enumerate().map(lambda i, batch: (tf.stack([epoch_seed, i]), batch))

    def finish(batch_seed: Any, batch: Any) -> Any:
        flip_seed = batch_seed if augmented else None
        if not cache:
            return decode_batch(batch, image_size, True, stored_size, flip_seed)
        images, labels = batch
        return (images if flip_seed is None else flip_images(images, flip_seed)), labels

    stream = tf.data.Dataset.range(first_epoch, 2**62).flat_map(epoch)
    return stream.map(finish, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def fingerprint(files: Sequence[str], sample_bytes: int = 2**16) -> str:
    """A short hash of the files' names, sizes, and first and last `sample_bytes`: it tells whether a
    model or a checkpoint was made from these files, without reading gigabytes."""
    import hashlib

    import tensorflow as tf  # tf.io.gfile reads gs:// URLs as well as local files

    digest = hashlib.sha256()
    for name in sorted(files):
        if not tf.io.gfile.exists(name):
            raise DataError(f"{name} does not exist: the data folder changed after the files were listed.")
        with tf.io.gfile.GFile(name, "rb") as f:
            size = f.size()
            head = f.read(sample_bytes)
            f.seek(max(0, size - sample_bytes))
            tail = f.read(sample_bytes)
        digest.update(f"{Path(name).name}:{size}:".encode() + head + tail)
    return "sha256:" + digest.hexdigest()[:16]


def val_dataset(files: Sequence[str], image_size: int, global_batch: int, stored_size: int | None = None) -> Any:
    """Ordered (image, label) batches, cached in memory after the first epoch (full batches only)."""
    import tensorflow as tf

    batches = _serialized(files, ordered=True).batch(global_batch, drop_remainder=True)
    dataset = batches.map(lambda batch: decode_batch(batch, image_size, True, stored_size), num_parallel_calls=tf.data.AUTOTUNE)
    # The batch count is known from the file names; telling tf.data lets Keras stop without a warning.
    known = tf.data.experimental.assert_cardinality(count_items(files) // global_batch)
    return dataset.apply(known).cache().prefetch(tf.data.AUTOTUNE)


def images_in_order(files: Sequence[str], image_size: int, labeled: bool, global_batch: int,
                    stored_size: int | None = None) -> tuple[Any, Any]:
    """Every image of `files` in a fixed order, padded to whole global batches, and their labels or ids.

    Returns (dataset of image batches, numpy array of labels or ids). Predict on the dataset and
    keep the first len(labels) rows: padding lets every replica get a full batch.
    """
    import numpy as np
    import tensorflow as tf

    # The keys come from a first pass in the same order, without decoding the images.
    keys = [key for _, key in _records(files, labeled, ordered=True).as_numpy_iterator()]
    keys = np.array(keys if labeled else [key.decode() for key in keys])

    def padded(batch: Any) -> Any:
        images, _ = decode_batch(batch, image_size, labeled, stored_size)
        images = tf.pad(images, [[0, global_batch - tf.shape(images)[0]], [0, 0], [0, 0], [0, 0]])
        return tf.ensure_shape(images, [global_batch, image_size, image_size, 3])

    images = _serialized(files, ordered=True).batch(global_batch).map(padded, num_parallel_calls=tf.data.AUTOTUNE)
    batches = tf.data.experimental.assert_cardinality(-(-len(keys) // global_batch))
    return images.apply(batches).prefetch(tf.data.AUTOTUNE), keys


def checked_splits(data_root: str | Path, image_size: int, splits: Sequence[str] = SPLITS
                   ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The files of each split, each read once (`check_files`), and the item counts.

    Counts are also read from the file names (what training plans with), so names that lie stop here.
    """
    files = {split: find_files(data_root, image_size, split) for split in splits}
    counts = {split: check_files(files[split], image_size, labeled=split != "test") for split in splits}
    for split in splits:
        named = count_items(files[split])
        if counts[split] != named:
            raise DataError(
                f"The {split} file names promise {named} records but the files hold {counts[split]}: "
                "rename the files (the number before .tfrec is the record count) or regenerate them."
            )
    return files, counts


def check_files(files: Sequence[str], image_size: int, labeled: bool) -> int:
    """Read every record of `files` once before training (CRC and features; the JPEG header of each
    file's first image gives the image size) and return the count.

    A truncated or corrupt file, a missing feature, or images of another size raise a DataError
    naming the file, instead of failing halfway through training.
    """
    import tensorflow as tf

    total = 0
    for name in files:
        with _reading(name, labeled):
            for index, (jpeg, _) in enumerate(_records([name], labeled, ordered=True)):
                if index == 0:
                    size = tuple(tf.io.extract_jpeg_shape(jpeg).numpy()[:2])
                    if size != (image_size, image_size):
                        raise DataError(
                            f"{name}: its images are {size[0]}x{size[1]}, not {image_size}x{image_size}. "
                            "Set IMAGE_SIZE to the size in the folder name."
                        )
                total += 1
    return total
