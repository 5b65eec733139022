"""The model packages notebook 06 predicts with (`nbkit.handoff.package` writes them): found (folders, Kaggle
Models handles, or every package attached), checked against each other and against the data, and loaded with
their model checked against the manifest."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit.errors import DataError
from nbkit.handoff.package import DATASET_FIELDS, FORMAT, MANIFEST_FILE, MODEL_FILE, check_logits, read_manifest
from nbkit.images.description import Description
from nbkit.inputs import datasets


def _dataset_of(manifest: Mapping[str, Any]) -> Description:
    """The description of the data a package was trained on."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in manifest["dataset"].items() if k in DATASET_FIELDS}
    return Description(image_sizes=(manifest["image_size"],), **fields)


def check_compatible(manifest: Mapping[str, Any], image_size: int, dataset: Description, name: str = "") -> None:
    """A DataError if the package does not fit the data: image size, classes, label values, columns."""
    model = f"The model{f' {name}' if name else ''}"
    trained = _dataset_of(manifest)
    if manifest["image_size"] != image_size:
        raise DataError(
            f"{model} takes {manifest['image_size']}x{manifest['image_size']} images but the data given is "
            f"{image_size}x{image_size}: set IMAGE_SIZE={manifest['image_size']} (or 0: the model's own size)."
        )
    if trained.num_classes != dataset.num_classes:
        raise DataError(
            f"{model} knows {trained.num_classes} classes but this data has {dataset.num_classes}: "
            "it was trained for another task."
        )
    same_values = list(map(str, trained.label_values)) == list(map(str, dataset.label_values))
    if trained.classes != dataset.classes or not same_values:
        raise DataError(
            f"{model}'s classes or label values differ from this data's (same count, other order or names): "
            "its predictions would name the wrong classes."
        )
    if (trained.id_column, trained.label_column) != (dataset.id_column, dataset.label_column):
        raise DataError(
            f"{model} writes submissions as {trained.id_column},{trained.label_column} but this data's are "
            f"{dataset.id_column},{dataset.label_column}: it was trained for another competition."
        )


def check_same(manifests: Sequence[Mapping[str, Any]], names: Sequence[str]) -> None:
    """Models averaged in one ensemble must be different models (each counts once) and agree on image
    size, classes, label values and columns."""
    first = manifests[0]
    for index, (manifest, name) in enumerate(zip(manifests, names)):
        if manifest in manifests[:index]:  # the same manifest: the same model, by its check logits
            raise DataError(
                f"{names[manifests.index(manifest)]} and {name} are the same model package: the ensemble would "
                "count it twice. Give each package once in PACKAGES (or attach it once)."
            )
    if len({m["image_size"] for m in manifests}) > 1:
        sizes = ", ".join(f"{n}: {m['image_size']}" for m, n in zip(manifests, names))
        raise DataError(
            f"The packages take images of different sizes ({sizes}): the members of an ensemble must be "
            "trained at one IMAGE_SIZE. Average only the packages of one size, or train the others again."
        )
    for manifest, name in zip(manifests[1:], names[1:]):
        try:
            check_compatible(manifest, first["image_size"], _dataset_of(first), name)
        except DataError as error:
            raise DataError(f"{error} ({names[0]} is the first package: ensemble members must agree.)") from None


def load_package(folder: str | Path, acc: Any = None) -> tuple[Any, dict[str, Any]]:
    """Load the model (in `acc`'s scope when given) and check it against its manifest: input shape,
    class count, and the logits of the check images."""
    import keras

    folder = Path(folder)
    manifest = read_manifest(folder)
    size, classes = manifest["image_size"], len(manifest["dataset"]["classes"])
    try:
        with acc.scope() if acc is not None else contextlib.nullcontext():
            model = keras.models.load_model(folder / MODEL_FILE)
    except Exception as error:  # Keras raises ValueError, OSError, zipfile errors... for a bad file
        raise DataError(f"Could not load {folder / MODEL_FILE}: {error}. Re-upload the package.") from error
    if tuple(model.input_shape[1:]) != (size, size, 3) or model.output_shape[-1] != classes:
        raise DataError(
            f"{MODEL_FILE} takes {model.input_shape} and gives {model.output_shape}, but the manifest "
            f"says {size}x{size} images and {classes} classes: model and manifest do not belong together."
        )
    expected = np.asarray(manifest["check"]["logits"])
    logits = check_logits(model, size, len(expected))
    scale = max(1.0, float(np.abs(expected).max()))
    if not np.allclose(logits, expected, rtol=1e-2, atol=1e-2 * scale):
        worst = float(np.abs(logits - expected).max())
        raise DataError(
            f"The loaded model's outputs differ from those recorded when it was saved (by up to {worst:.3g}): "
            "the model file does not match its manifest, or it loads differently here."
        )
    return model, manifest


def find_packages(locations: str, local_default: str | Path, input_dir: str | Path | None = None) -> list[Path]:
    """The package folders: each of `locations` (separated by commas), a folder or a Kaggle Models handle
    (owner/model/framework/variation[/version]) attached or downloaded by kagglehub; "auto": every
    package under Kaggle's input folder (`input_dir`) when on Kaggle, else `local_default` (where
    notebook 05 writes its package)."""
    if locations != "auto":
        return [_folder_or_model(os.path.expanduser(place.strip())) for place in locations.split(",") if place.strip()]
    if input_dir is None:
        return [Path(local_default)]
    # Datasets mount as <input>/<slug>/..., models as <input>/<model>/<framework>/<variation>/<version>
    # or, in newer sessions, <input>/models/<owner>/<model>/<framework>/<variation>/<version>.
    found = sorted({p.parent for depth in range(1, 8) for p in Path(input_dir).glob("*/" * depth + MANIFEST_FILE)})
    packages = [p for p in found if _is_package(p)]
    if not packages:
        raise DataError(
            f"No model package under {input_dir}: attach notebook 05's package (its Kaggle dataset or model) "
            "with 'Add Input', or set PACKAGES to its folder or its Kaggle Models handle."
        )
    return packages


def _folder_or_model(location: str) -> Path:
    if Path(location).exists() or location.count("/") not in (3, 4):
        return Path(location)  # a folder (read_manifest says so if it is not one)
    try:
        return Path(datasets.fetch("model", location))
    except DataError as error:
        raise DataError(f"PACKAGES: {location!r} is no folder here, and as a Kaggle Models handle: {error}") from None


def _is_package(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False
