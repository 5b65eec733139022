"""Model packages: a trained model plus what predicting with it needs, in a folder that uploads as a
Kaggle dataset (`kaggle datasets create -p <folder>`) or to Kaggle Models (`publish_model`).

    model.keras            the model (Keras 3 format; loads with either backend)
    manifest.json          what the predictions mean (the dataset's classes, label values, submission
                           columns, metric), image size, input format, versions, settings, metrics, and
                           the logits of two fixed images, to check the model after loading; checked
                           against _SCHEMA on every read
    dataset-metadata.json  title, id (owner/slug), license: what the Kaggle CLI reads
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic, models
from nbkit.env import installed_versions
from nbkit.errors import DataError
from nbkit.images.description import Description
from nbkit.inputs import account, datasets
from nbkit.params import check_handle

FORMAT = "nbkit-model-package"
_FORMAT_VERSION = 2  # 2: the dataset's description (classes, label values, submission columns, metric)
MODEL_FILE = "model.keras"
MANIFEST_FILE = "manifest.json"
_METADATA_FILE = "dataset-metadata.json"
_INPUT_FORMAT = "uint8 RGB, 0-255, shape [image_size, image_size, 3]; the model rescales inside"
_MODEL_LICENSE = "Apache 2.0"  # of a model nbkit publishes; change it on the model's Kaggle page
DATASET_FIELDS = ("title", "competition", "classes", "label_values", "id_column", "label_column", "metric")

# What a package must hold, key by key (nested dicts are checked the same way); other keys are free.
_SCHEMA: dict[str, Any] = {
    "format": str,
    "format_version": int,
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
    "check": {"logits": list},
}


def _dataset_fields(dataset: Description) -> dict[str, Any]:
    """The manifest's "dataset": what the predictions mean (lists for the description's tuples)."""
    return {name: list(v) if isinstance(v := getattr(dataset, name), tuple) else v for name in DATASET_FIELDS}


def _wrong(values: Any, schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    problems = []
    for key, kind in schema.items():
        name = prefix + key
        if not isinstance(values, Mapping) or key not in values:
            problems.append(f"{name} is missing")
        elif isinstance(kind, dict):
            problems += _wrong(values[key], kind, name + ".")
        elif not isinstance(values[key], kind) or isinstance(values[key], bool):
            problems.append(f"{name} is {type(values[key]).__name__}, not {kind.__name__}")
    return problems


def _check_schema(manifest: Any, path: str | Path) -> dict[str, Any]:
    """`manifest` if it holds everything _SCHEMA lists, and its score in the dataset's metric."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{path} is not an nbkit model manifest (format should be {FORMAT!r}).")
    if manifest.get("format_version") != _FORMAT_VERSION:
        raise DataError(
            f"{path} has format_version {manifest.get('format_version')!r}; "
            f"this nbkit reads version {_FORMAT_VERSION}. "
            "Use the nbkit version that wrote the package, or write the package again with this one (notebook 05)."
        )
    problems = _wrong(manifest, _SCHEMA)
    if not problems:
        metric = manifest["dataset"]["metric"]
        if not isinstance(manifest["metrics"].get(metric), (int, float)):
            problems.append(f"metrics.{metric} (the dataset's metric) is missing")
        if len(manifest["dataset"]["classes"]) != len(manifest["dataset"]["label_values"]):
            problems.append("dataset.classes and dataset.label_values differ in length")
    if problems:
        raise DataError(f"{path}: {'; '.join(problems)}. The package is incomplete or damaged: write it again.")
    return manifest


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The checked manifest of the package in `folder`, whose model file must be there."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"No model package at {folder}: give the folder holding {MANIFEST_FILE} and {MODEL_FILE}.")
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise DataError(f"{folder} has no {MANIFEST_FILE}, so it is not a model package (or its upload is incomplete).")
    try:
        manifest = _check_schema(json.loads(path.read_text()), path)
    except ValueError as error:
        raise DataError(f"{path} is not valid JSON ({error}); re-upload the package.") from None
    if not (folder / MODEL_FILE).is_file():
        raise DataError(f"{folder} lacks {MODEL_FILE}, the package's model (incomplete upload?).")
    return manifest


def default_dataset_id(dataset: Description, suffix: str = "model") -> str:
    """`<your Kaggle user name>/<the data's name>-<suffix>`, with a placeholder owner where the name is not known."""
    slug = re.sub(r"[^a-z0-9]+", "-", dataset.title.lower()).strip("-")[: 49 - len(suffix)].strip("-")
    return account.default_dataset_id(f"{slug}-{suffix}")


def check_logits(model: Any, image_size: int, count: int = 2) -> np.ndarray:
    """The model's float64 logits for `count` fixed uint8 images (the manifest keeps them, to check a loaded model)."""
    # One batch of 64 rows (the images, then zeros): any replica count up to 64 that divides it
    # gets an equal share, which a batch of 2 would not give 8 TPU cores.
    images = np.zeros((64, image_size, image_size, 3), np.uint8)
    images[:count] = np.random.default_rng(0).integers(0, 256, (count, image_size, image_size, 3), dtype=np.uint8)
    return models.global_logits(model, images)[:count]


def write_package(
    folder: str | Path,
    model: Any,
    *,
    dataset: Description,
    metrics: dict[str, Any],
    training: dict[str, Any],
    dataset_id: str,
) -> Path:
    """Write the package into `folder`, replacing an older one only once the new one is complete.
    `training`: the run's settings (its data fingerprint among them), kept for whoever reads the manifest."""
    import keras

    folder, image_size = Path(folder), model.input_shape[1]
    resources = [
        {"path": MODEL_FILE, "description": "Keras 3 model"},
        {"path": MANIFEST_FILE, "description": "classes, input format, versions, metrics"},
    ]
    # A bad id stops here, before anything is written.
    kaggle_dataset = account.dataset_metadata(dataset_id, f"{dataset.title[:44].strip()} model", resources)
    logits = check_logits(model, image_size)
    if logits.shape[-1] != dataset.num_classes:
        raise DataError(f"The model has {logits.shape[-1]} outputs but the data has {dataset.num_classes} classes.")
    manifest = {
        "format": FORMAT,
        "format_version": _FORMAT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_name": model.name,
        "image_size": image_size,
        "input": _INPUT_FORMAT,
        "output": "logits (argmax is the class; softmax gives probabilities)",
        "dataset": _dataset_fields(dataset),
        "trained_with": {  # read without importing the libraries
            "keras_backend": keras.backend.backend(),
            "python": platform.python_version(),
            **installed_versions(("keras", "tensorflow", "tensorflow-cpu", "jax", "jaxlib", "numpy", "nbkit")),
        },
        "training": training,
        "metrics": {k: (v.item() if hasattr(v, "item") else v) for k, v in metrics.items()},
        "check": {"logits": logits.round(6).tolist()},  # of check_logits' images
    }
    _check_schema(manifest, MANIFEST_FILE)  # what 06 reads is there
    with atomic.staged_dir(folder) as staging:
        model.save(staging / MODEL_FILE)
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
        (staging / _METADATA_FILE).write_text(json.dumps(kaggle_dataset, indent=2) + "\n")
    return folder


def describe(manifest: Mapping[str, Any]) -> str:
    """One line: which model, what it takes, what it was trained with, how it scored."""
    trained, metric = manifest["trained_with"], manifest["dataset"]["metric"]
    return (
        f"{manifest['model_name']}, {manifest['image_size']}x{manifest['image_size']}, "
        f"{len(manifest['dataset']['classes'])} classes, trained with Keras {trained['keras']} on "
        f"{trained['keras_backend']}; validation {metric} {manifest['metrics'][metric]:.3f}"
    )


def publish_model(folder: str | Path, handle: str) -> str:
    """Publish the package in `folder` to Kaggle Models as `handle` (owner/model/keras/variation) with kagglehub:
    a new version when the variation exists, else a private model. Its URL; notebook 06 reads it by handle."""
    notes = describe(read_manifest(folder))  # only a complete package goes out
    check_handle("model", handle, "owner/model/framework/variation", "alice/flowers-model/keras/default")
    import kagglehub

    try:  # without the dataset route's file
        kagglehub.model_upload(handle, str(folder), _MODEL_LICENSE, notes, ignore_patterns=[_METADATA_FILE])
    except Exception as error:  # kagglehub raises requests' errors, its own, and ValueError
        raise DataError(datasets.kagglehub_failure("model", handle, error, "publish") + ".") from None
    return f"https://www.kaggle.com/models/{handle}"
