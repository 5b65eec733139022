"""The competition's layout: `tfrecords-jpeg-<s>x<s>/{train,val,test}/NN-<s>x<s>-<count>.tfrec`,
its 104 classes, and the item counts written in the file names."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from nbkit import storage
from nbkit.errors import DataError, ParameterError

IMAGE_SIZES = (192, 224, 331, 512)
SPLITS = ("train", "val", "test")
COUNT_IN_NAME = re.compile(r"-(\d+)\.tfrec$")

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
]  # fmt: skip


def split_folder(data_root: str | Path, image_size: int, split: str) -> str:
    """`<root>/tfrecords-jpeg-<s>x<s>/<split>` (a local path or a gs:// URL)."""
    if split not in SPLITS:
        raise ParameterError(f"split={split!r} is not one of {SPLITS}.")
    return storage.join(data_root, f"tfrecords-jpeg-{image_size}x{image_size}", split)


def file_name(index: int, image_size: int, count: int) -> str:
    """`00-192x192-798.tfrec`: the competition's naming, the item count last."""
    return f"{index:02d}-{image_size}x{image_size}-{count}.tfrec"


def find_files(data_root: str | Path, image_size: int, split: str) -> list[str]:
    """The `.tfrec` files of one split, sorted; a DataError says what is missing."""
    if not storage.is_dir(data_root):
        raise DataError(
            f"Data root {data_root} does not exist: set DATA_ROOT to the folder that holds tfrecords-jpeg-*/."
        )
    folder = split_folder(data_root, image_size, split)
    files = storage.list_folder(folder, "*.tfrec")
    if files:
        return files
    size_folder = storage.join(data_root, f"tfrecords-jpeg-{image_size}x{image_size}")
    if storage.is_dir(size_folder):
        raise DataError(
            f"No .tfrec files in {folder}: the {split} split is missing or empty. The competition data has "
            f"{', '.join(SPLITS)} under each size folder; re-download or regenerate it."
        )
    sizes = [Path(p).name for p in storage.list_folder(data_root, "tfrecords-jpeg-*")]
    raise DataError(
        f"No .tfrec files in {folder}. Folders under {data_root}: {sizes or 'none'}; "
        f"pick IMAGE_SIZE from those (competition sizes: {IMAGE_SIZES})."
    )


def count_in_name(name: str) -> int:
    """The item count a file's name promises (`...-<count>.tfrec`)."""
    match = COUNT_IN_NAME.search(str(name))
    if match is None:
        raise DataError(f"{name}: the file name does not end in -<count>.tfrec, so its item count is unknown.")
    return int(match.group(1))


def count_items(files: Iterable[str]) -> int:
    """Total items, read from the `-<count>.tfrec` ending of each file name."""
    return sum(count_in_name(name) for name in files)
