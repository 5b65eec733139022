"""The data a notebook trains on, every record read once before training so bad data stops naming its file and
record: checksums, features, each image decoded at its size, labels within the classes, ids unique, no empty split,
counts against file names. `load` gives one `Data`, whose methods are what the data decides (the batch, the scores,
submission.csv / oof.csv). Framework-free: nbkit.tfrecord and Pillow (which refuses the damaged JPEGs TensorFlow
does: a test feeds both)."""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import metrics, tfrecord
from nbkit.errors import DataError, ParameterError
from nbkit.images import layout
from nbkit.images.description import Description
from nbkit.params import check_int


@dataclass(frozen=True)
class Split:
    """One checked split: its files, how many records they hold, and the records when kept."""

    name: str
    files: list[str]
    count: int
    ids: list[str]  # every record's id, in file order: its `id` feature, or file:index where it has none
    items: list[tuple[bytes, Any]] | None = None  # (JPEG bytes, class or id), in file order
    classes: dict[str, int] | None = None  # id -> class of every record of a labeled split

    @property
    def labeled(self) -> bool:
        return self.name != "test"

    @functools.cached_property
    def compression(self) -> str:
        """ "", "GZIP" or "ZLIB": what tf.data.TFRecordDataset must be told (`compression_type`), one for all files."""
        kinds = {name: tfrecord.compression(name) for name in self.files}
        if len(set(kinds.values())) > 1:
            shown = ", ".join(f"{Path(name).name}: {kind or 'none'}" for name, kind in kinds.items())
            raise DataError(f"The files of one split are compressed in different ways ({shown}): write them all alike.")
        return next(iter(kinds.values()), "")


# What each feature of a record must hold: (Python type of its one value, in words).
_FEATURES = {
    "image": (bytes, "one bytes value (the JPEG)"),
    "class": (int, "one int64 value"),
    "id": (bytes, "one bytes value (UTF-8 text)"),
}
_KINDS = {bytes: "bytes", int: "int64", float: "float"}


def _available_memory() -> int | None:
    """Bytes of memory available now (Linux /proc/meminfo), or None where that cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def _record_item(raw: bytes, labeled: bool, where: str) -> tuple[bytes, int | str, str | None]:
    """(JPEG bytes, class or id, id or None) of one serialized record (a labeled record's `id` is
    optional); a DataError says `where` it is wrong."""
    key = "class" if labeled else "id"
    kind = "labeled" if labeled else "test"
    try:
        example = tfrecord.decode_example(raw)
    except ValueError as error:
        raise DataError(f"{where} is not a tf.train.Example ({error}).") from None
    if "image" not in example or key not in example:
        raise DataError(f"{where} is not a {kind} record (needs one image and one {key}; has {sorted(example)}).")
    for name in ("image", key, "id") if "id" in example else ("image", key):
        needed, in_words = _FEATURES[name]
        values = example[name]
        if len(values) != 1 or type(values[0]) is not needed:
            kinds = ", ".join(sorted({_KINDS[type(v)] for v in values}))
            found = f"{len(values)} {kinds} value{'s' if len(values) > 1 else ''}" if values else "no value"
            raise DataError(
                f"{where}: feature '{name}' holds {found}, but a {kind} record needs {in_words}. Is the file from "
                "another split or dataset? Re-download or regenerate it."
            )
    try:
        record_id = example["id"][0].decode() if "id" in example else None
    except UnicodeDecodeError:
        raise DataError(
            f"{where}: feature 'id' is not UTF-8 text ({example['id'][0][:20]!r}), but a {kind} record needs "
            f"{_FEATURES['id'][1]}. Re-download or regenerate the file."
        ) from None
    return example["image"][0], example["class"][0] if labeled else record_id, record_id


def _check_image(jpeg: bytes, image_size: int, where: str) -> None:
    """Decode the whole JPEG (not just its header) and check its size; a DataError says `where`."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(jpeg)) as image:
            image.load()
            width, height = image.size
    except (OSError, SyntaxError, ValueError) as error:  # Pillow's errors for damaged or truncated data
        raise DataError(
            f"{where}: the image cannot be decoded ({error}). Re-download or regenerate the file."
        ) from None
    if (width, height) != (image_size, image_size):
        raise DataError(
            f"{where}: the image is {width}x{height}, but every image in the {image_size}x{image_size} folder "
            f"must be {image_size}x{image_size}: this file was written at another size. Convert the pictures "
            f"again (python -m nbkit tfrecords ... --size {image_size}), or re-download the data."
        )


def check_splits(
    files: dict[str, Sequence[str]], image_size: int, num_classes: int, keep_items: bool = False
) -> dict[str, Split]:
    """Each split's files (`layout.split_files`) read once and checked (each id once in a split); with
    `keep_items` the records kept too."""
    splits = {}
    for split, names in files.items():
        labeled, items = split != "test", [] if keep_items else None
        seen: dict[str, tuple[str, Any]] = {}  # id -> (where, class or id); in file order
        for name in names:
            _check_file(name, image_size, labeled, num_classes, seen, items)
        if not seen:
            raise DataError(
                f"The {split} split ({len(names)} files in {Path(names[0]).parent}) holds no records: re-download "
                "or regenerate it."
            )
        classes = {record_id: key for record_id, (_, key) in seen.items()} if labeled else None
        splits[split] = Split(split, list(names), len(seen), list(seen), items, classes)
    return splits


def _check_file(
    name: str,
    image_size: int,
    labeled: bool,
    num_classes: int,
    seen: dict[str, tuple[str, Any]],
    items: list[tuple[bytes, Any]] | None,
) -> None:
    """One file of a split checked (see `check_splits`): its ids join `seen`, its records `items` when given."""
    count = 0
    for count, raw in enumerate(tfrecord.read_records(name), 1):
        where = f"{name}: record {count - 1}"
        jpeg, key, record_id = _record_item(raw, labeled, where)
        _check_image(jpeg, image_size, where)
        if labeled and not 0 <= key < num_classes:
            raise DataError(
                f"{where} has class {key}, outside 0..{num_classes - 1}: the dataset's description names "
                f"{num_classes} classes. If a class was removed from the data's nbkit-dataset.json, put it "
                "back (a record's class numbers that list; to drop a class, convert again without its "
                "pictures); else the file is damaged or from another dataset: re-download or regenerate it."
            )
        record_id = record_id if record_id is not None else f"{Path(name).name}:{count - 1}"
        if record_id in seen:
            why = "out-of-fold scores need each id once" if labeled else "submission.csv needs each id once"
            raise DataError(
                f"{where} repeats the {'test ' * (not labeled)}id {record_id!r} of {seen[record_id][0]}: {why}."
            )
        seen[record_id] = (where, key)
        if items is not None:
            items.append((jpeg, key))
    if count != layout.count_in_name(name):
        raise DataError(
            f"{name}: its name promises {layout.count_in_name(name)} records but it holds {count}. Rename it "
            "(the number before .tfrec is the file's record count) or re-download / regenerate it."
        )


_MEMORY_SHARE = 0.5  # of the memory available: the rest is for the model, the cache, the notebook


def _check_batch(
    per_replica_batch: int, replicas: int, item_bytes: int, counts: dict[str, int], available_bytes: int | None = None
) -> int:
    """The global batch, once it is known to work: no larger than any split in `counts` (an epoch and
    a validation pass each need a full batch), and small enough for the memory available (default:
    what this machine has free now). A ParameterError says what to pass as PER_REPLICA_BATCH instead."""
    parameter = "PER_REPLICA_BATCH"
    check_int(parameter, per_replica_batch, minimum=1)
    global_batch = per_replica_batch * replicas
    what = f"{parameter}={per_replica_batch} x {replicas} replica(s) = a global batch of {global_batch}"
    if counts and global_batch > min(counts.values()):
        smallest, split = min((count, split) for split, count in counts.items())
        fits = smallest // replicas
        instead = f"{parameter}={fits} or less" if fits else f"at most {smallest} replicas"
        raise ParameterError(
            f"{what}, more than the {smallest} images of the {split} split: every step and every "
            f"validation pass needs a full batch. Use {instead}."
        )
    available_bytes = _available_memory() if available_bytes is None else available_bytes
    per_image = item_bytes * (1 + 4)  # its uint8 pixels, and the float32 copy the model's first layer makes
    needed = global_batch * per_image
    if available_bytes is not None and needed > _MEMORY_SHARE * available_bytes:
        fits = int(_MEMORY_SHARE * available_bytes // (replicas * per_image))
        raise ParameterError(
            f"{what} needs about {needed / 2**30:.1f} GiB of memory per step; "
            f"{available_bytes / 2**30:.1f} GiB are free here. Use {parameter}={fits} or less."
        )
    return global_batch


def describe(splits: dict[str, Split]) -> str:
    """`train 832, val 208, test 104 images`."""
    return ", ".join(f"{s.name} {s.count}" for s in splits.values()) + " images"


@dataclass(frozen=True)
class Data:
    """Checked data: `splits` by name ("train", "val", "test"; with a FOLD, val is that fold)."""

    path: str
    reason: str  # why this folder (DATA_ROOT itself, the attached competition, the generated sample)
    dataset: Description
    image_size: int
    splits: dict[str, Split]
    fold: int = -1

    @property
    def train(self) -> Split:
        return self.splits["train"]

    @property
    def val(self) -> Split:
        return self.splits["val"]

    @property
    def test(self) -> Split | None:
        """None where the data has no test split (converted without --test; a code competition's test
        pictures appear only when Kaggle reruns the notebook)."""
        return self.splits.get("test")

    def describe(self) -> str:
        """Three lines: where the data is and why, the dataset, the images of each split."""
        sizes = f"{self.image_size}x{self.image_size} images: {describe(self.splits)}"
        fold = f" (fold {self.fold} validates)" if self.fold != -1 else ""
        fold += " (no test split: no submission)" if self.test is None else ""
        return f"data: {self.reason}\ndataset: {self.dataset.describe()}\n{sizes}{fold}"

    def check_batch(self, per_replica_batch: int, replicas: int) -> int:
        """`_check_batch` for this data's labeled splits and image size."""
        counts = {name: split.count for name, split in self.splits.items() if split.labeled}
        return _check_batch(per_replica_batch, replicas, self.image_size * self.image_size * 3, counts)

    def fits_in_memory(self, split: Split, available_bytes: int | None = None) -> bool:
        """Whether `split`'s decoded images (uint8) take at most half the memory available (default: free now;
        unknown: no): the notebooks' CACHE="auto"."""
        available_bytes = _available_memory() if available_bytes is None else available_bytes
        needed = split.count * self.image_size * self.image_size * 3
        return available_bytes is not None and needed <= _MEMORY_SHARE * available_bytes

    def score(self, labels: Sequence[int], probabilities: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """(confusion matrix, scores): accuracy, macro F1 / precision / recall and the competition's metric."""
        return metrics.of_predictions(labels, probabilities, self.dataset.metric)

    def write_submission(self, ids: Sequence[str], labels: Sequence[int], path: str | Path) -> Path:
        """submission.csv in the competition's form, checked against its sample submission when there is one."""
        return metrics.write_submission(ids, labels, self.dataset, path)

    def write_oof(self, labels: Sequence[int], probabilities: np.ndarray, path: str | Path) -> Path:
        """oof.csv: this fold's validation predictions, one row per validation id (`python -m nbkit oof`)."""
        return metrics.write_oof(self.val.ids, labels, probabilities, self.fold, self.dataset, path)


def load(
    path: str, reason: str, dataset: Description, image_size: int = 0, fold: int = -1, names: Sequence[str] = ()
) -> Data:
    """The data in `path` (described by `dataset`), every record checked now: IMAGE_SIZE `image_size` (0: the
    smallest there), the splits `names` (default all, test where there is one), fold `fold` validating."""
    size = layout.choose_size(path, image_size)
    optional = () if names else ("test",)
    files = layout.split_files(path, size, dataset.folds, fold, names=names or layout.SPLITS, optional=optional)
    return Data(path, reason, dataset, size, check_splits(files, size, dataset.num_classes), fold)
