"""A model package's `manifest.json`: one schema for what notebook 06 reads, checked on every read, so a
damaged or foreign manifest stops naming the wrong key, never with a KeyError halfway through predicting."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nbkit.errors import DataError
from nbkit.images.description import Description

FORMAT = "nbkit-model-package"
FORMAT_VERSION = 2  # 2: the dataset's description (classes, label values, submission columns, metric)
MODEL_FILE = "model.keras"
MANIFEST_FILE = "manifest.json"
_NUMBER = (int, float)

# What a package must hold, key by key (nested dicts are checked the same way); other keys are free.
_SCHEMA: dict[str, Any] = {
    "format": str,
    "format_version": int,
    "model_file": str,
    "model_name": str,
    "image_size": int,
    "input": str,
    "dataset": {
        "title": str,
        "classes": list,
        "label_values": list,
        "id_column": str,
        "label_column": str,
        "metric": str,
    },
    "trained_with": {"keras": str, "keras_backend": str},
    "training": dict,
    "metrics": dict,
    "data": {"fingerprint": str},
    "check": {"logits": list},
}


def dataset_fields(dataset: Description) -> dict[str, Any]:
    return {
        "title": dataset.title,
        "competition": dataset.competition,
        "classes": list(dataset.classes),
        "label_values": list(dataset.label_values),
        "id_column": dataset.id_column,
        "label_column": dataset.label_column,
        "metric": dataset.metric,
    }


def _dataset_of(manifest: Mapping[str, Any]) -> Description:
    fields = manifest["dataset"]
    return Description(
        title=fields["title"],
        classes=tuple(fields["classes"]),
        label_values=tuple(fields["label_values"]),
        image_sizes=(manifest["image_size"],),
        id_column=fields["id_column"],
        label_column=fields["label_column"],
        metric=fields["metric"],
        competition=fields.get("competition"),
    )


def _wrong(values: Any, schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    problems = []
    for key, kind in schema.items():
        name = prefix + key
        if not isinstance(values, Mapping) or key not in values:
            problems.append(f"{name} is missing")
        elif isinstance(kind, dict):
            problems += _wrong(values[key], kind, name + ".")
        elif not isinstance(values[key], kind) or isinstance(values[key], bool) and kind is not bool:
            problems.append(f"{name} is {type(values[key]).__name__}, not {kind.__name__}")
    return problems


def check_schema(manifest: Any, path: str | Path) -> dict[str, Any]:
    """`manifest` if it holds everything _SCHEMA lists, and its score in the dataset's metric."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path} is not an nbkit model manifest (format should be {FORMAT!r}).")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DataError(
            f"{path} has format_version {manifest.get('format_version')!r}; this nbkit reads version {FORMAT_VERSION}. "
            "Use the nbkit version that wrote the package, or write the package again with this one (notebook 05)."
        )
    problems = _wrong(manifest, _SCHEMA)
    if not problems:
        metric = manifest["dataset"]["metric"]
        if not isinstance(manifest["metrics"].get(metric), _NUMBER):
            problems.append(f"metrics.{metric} (the dataset's metric) is missing")
        if len(manifest["dataset"]["classes"]) != len(manifest["dataset"]["label_values"]):
            problems.append("dataset.classes and dataset.label_values differ in length")
    if problems:
        raise DataError(f"{path}: {'; '.join(problems)}. The package is incomplete or damaged: write it again.")
    return manifest


def read(folder: str | Path) -> dict[str, Any]:
    """The checked manifest of the package in `folder`, whose model file must be there."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"No model package at {folder}: give the folder holding {MANIFEST_FILE} and {MODEL_FILE}.")
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise DataError(f"{folder} has no {MANIFEST_FILE}, so it is not a model package (or its upload is incomplete).")
    try:
        values = json.loads(path.read_text())
    except ValueError as error:
        raise DataError(f"{path} is not valid JSON ({error}); re-upload the package.") from None
    manifest = check_schema(values, path)
    if not (folder / manifest["model_file"]).is_file():
        raise DataError(
            f"{folder} lacks {manifest['model_file']}, the model named in its manifest (incomplete upload?)."
        )
    return manifest


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
    if trained.classes != dataset.classes or list(map(str, trained.label_values)) != list(
        map(str, dataset.label_values)
    ):
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
        if manifest["image_size"] != first["image_size"]:
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
