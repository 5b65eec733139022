"""Kaggle's "Flower Classification with TPUs", the kit's worked example: the only place that knows its
104 classes, image sizes, slug and metric, as a `Description` like those `python -m nbkit tfrecords`
writes (the competition's files have none)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit.images import checks, description
from nbkit.inputs.datasets import DataSource, generated_sample, locate

_COMPETITION = "flower-classification-with-tpus"
_IMAGE_SIZES = (192, 224, 331, 512)

# The competition's 104 classes, in label order.
_CLASSES = (
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
)  # fmt: skip

# submission.csv is `id,label` (the default columns) with the class number; the competition scores macro F1.
_DATASET = description.Description(
    title="Flower Classification with TPUs",
    classes=_CLASSES,
    label_values=tuple(range(len(_CLASSES))),
    image_sizes=_IMAGE_SIZES,
    metric="f1_macro",
    competition=_COMPETITION,
)


def sample_source(environment: Any) -> DataSource:
    """The generated sample in the working folder (written the first time)."""

    def generator() -> Any:
        from nbkit.images import sample

        return lambda folder: sample.ensure_sample(folder, len(_CLASSES))

    holding = "a copy of the data, or run the notebook from a clone of nbkit"
    return generated_sample(environment, "sample-data", generator, _COMPETITION, holding)


def locate_data(data_root: str, environment: Any = None) -> DataSource:
    """Where the TFRecords are, and why there: DATA_ROOT itself; "auto": this competition attached on
    Kaggle, else kagglehub (downloaded with Kaggle credentials), else the generated sample; "sample"."""
    environment = environment or nbenv.detect()
    if data_root == "sample":
        stand_in = sample_source(environment)
        return DataSource(stand_in.path, "DATA_ROOT='sample', so " + stand_in.reason.removesuffix(" stands in"))
    return locate(data_root, _COMPETITION, fallback=sample_source, environment=environment)


def load_data(data_root: str, image_size: int = 0, fold: int = -1, names: Sequence[str] = ()) -> checks.Data:
    """The notebooks' data, found (`locate_data`), described (`load_description`) and checked
    (`nbkit.images.checks.load`): DATA_ROOT, IMAGE_SIZE, FOLD; `names`: the splits to read (default all)."""
    found = locate_data(data_root)
    return checks.load(found.path, found.reason, load_description(found.path), image_size, fold, names)


def load_description(data_root: str) -> description.Description:
    """The description of the data in `data_root`: its nbkit-dataset.json where it has one (converted data), else
    this competition's (Kaggle's files, the sample); its `origin` says which."""
    if Path(data_root, description.DESCRIPTION_FILE).exists():
        return description.load(data_root)
    return replace(
        _DATASET,
        origin=f"no {description.DESCRIPTION_FILE} in {data_root}, so read as Kaggle's flowers competition; "
        "convert other data with `python -m nbkit tfrecords`, which writes one",
    )
