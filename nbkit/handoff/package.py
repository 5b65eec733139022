"""Model packages: a trained model plus what predicting with it needs, in a folder that uploads
as a Kaggle dataset (`kaggle datasets create -p <folder>`, later `kaggle datasets version -p`) or
to Kaggle Models (`publish_model`, with kagglehub).

    model.keras            the model (Keras 3 format; loads with either backend)
    manifest.json          what the predictions mean (the dataset's classes, label values, submission
                           columns, metric), image size, input format, versions, metrics, data
                           fingerprint, and the logits of two fixed images, to check the model after
                           loading (schema: `nbkit.handoff.manifest`)
    dataset-metadata.json  title, id (owner/slug), license: what the Kaggle CLI reads
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic, models
from nbkit.env import installed_versions
from nbkit.errors import DataError
from nbkit.handoff import manifest as manifest_schema
from nbkit.handoff.manifest import MANIFEST_FILE, MODEL_FILE, check_compatible, check_same
from nbkit.handoff.manifest import read as read_manifest
from nbkit.images.description import Description
from nbkit.inputs import account
from nbkit.inputs.account import PLACEHOLDER_OWNER

# What notebooks 05 and 06 use: writing, finding, reading, checking, loading and publishing packages.
__all__ = [
    "MANIFEST_FILE",
    "MODEL_FILE",
    "PLACEHOLDER_OWNER",
    "check_compatible",
    "default_dataset_id",
    "check_same",
    "describe",
    "find_packages",
    "load_package",
    "publish_model",
    "read_manifest",
    "write_package",
]
_METADATA_FILE = "dataset-metadata.json"
_INPUT_FORMAT = "uint8 RGB, 0-255, shape [image_size, image_size, 3]; the model rescales inside"


def _versions(backend: str) -> dict[str, str]:
    """What a model was trained with: Keras backend and library versions (read without importing them)."""
    names = ("keras", "tensorflow", "tensorflow-cpu", "jax", "jaxlib", "numpy", "nbkit")
    return {"keras_backend": backend, "python": platform.python_version(), **installed_versions(names)}


def default_dataset_id(dataset: Description, suffix: str = "model") -> str:
    """`<your Kaggle user name>/<the data's name>-<suffix>`, with a placeholder owner where the name is not known."""
    slug = re.sub(r"[^a-z0-9]+", "-", dataset.title.lower()).strip("-")[: 49 - len(suffix)].strip("-")
    return account.default_dataset_id(f"{slug}-{suffix}")


def _dataset_metadata(dataset_id: str, title: str, license_name: str = "CC0-1.0") -> dict[str, Any]:
    """The package's `dataset-metadata.json` contents, checked the way `kaggle datasets create` checks them."""
    resources = [
        {"path": MODEL_FILE, "description": "Keras 3 model"},
        {"path": MANIFEST_FILE, "description": "classes, input format, versions, metrics"},
    ]
    return account.dataset_metadata(dataset_id, title, resources, license_name)


def _check_images(image_size: int, count: int = 2) -> np.ndarray:
    """Fixed uint8 images whose logits the manifest keeps, to check a loaded model."""
    return np.random.default_rng(0).integers(0, 256, (count, image_size, image_size, 3), dtype=np.uint8)


def _check_logits(model: Any, image_size: int, count: int = 2) -> np.ndarray:
    """The model's logits for `_check_images`, as float64."""
    # One batch of 64 rows (the images, then zeros): any replica count up to 64 that divides it
    # gets an equal share, which a batch of 2 would not give 8 TPU cores.
    images = np.zeros((64, image_size, image_size, 3), np.uint8)
    images[:count] = _check_images(image_size, count)
    return models.global_logits(model, images[models.process_rows(len(images))])[:count]


def write_package(
    folder: str | Path,
    model: Any,
    *,
    dataset: Description,
    image_size: int,
    backend: str,
    metrics: dict[str, Any],
    training: dict[str, Any],
    dataset_id: str,
) -> Path:
    """Write the package into `folder`, replacing an older one only once the new one is complete.
    `training` holds the run's settings, its data fingerprint among them (as `data`)."""
    folder = Path(folder)
    title = f"{dataset.title[:44].strip()} model"
    kaggle_dataset = _dataset_metadata(dataset_id, title)  # a bad id stops here, before anything is written
    logits = _check_logits(model, image_size)
    if logits.shape[-1] != dataset.num_classes:
        raise DataError(f"The model has {logits.shape[-1]} outputs but the data has {dataset.num_classes} classes.")
    manifest = {
        "format": manifest_schema.FORMAT,
        "format_version": manifest_schema.FORMAT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_file": MODEL_FILE,
        "model_name": model.name,
        "image_size": image_size,
        "input": _INPUT_FORMAT,
        "output": "logits (argmax is the class; softmax gives probabilities)",
        "dataset": manifest_schema.dataset_fields(dataset),
        "trained_with": _versions(backend),
        "training": training,
        "metrics": {k: (v.item() if hasattr(v, "item") else v) for k, v in metrics.items()},
        "data": {"fingerprint": str(training.get("data", ""))},
        "check": {"images": "check_images(image_size): numpy default_rng(0) uint8", "logits": logits.round(6).tolist()},
    }
    manifest_schema.check_schema(manifest, MANIFEST_FILE)  # what 06 reads is there
    with atomic.staged_dir(folder) as staging:
        model.save(staging / MODEL_FILE)
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
        (staging / _METADATA_FILE).write_text(json.dumps(kaggle_dataset, indent=2) + "\n")
    return folder


def load_package(folder: str | Path, acc: Any = None) -> tuple[Any, dict[str, Any]]:
    """Load the model (in `acc`'s scope when given) and check it against its manifest: input shape,
    class count, and the logits of the check images."""
    import keras

    folder = Path(folder)
    manifest = read_manifest(folder)
    classes = manifest["dataset"]["classes"]
    try:
        with acc.scope() if acc is not None else contextlib.nullcontext():
            model = keras.models.load_model(folder / manifest["model_file"])
    except Exception as error:  # Keras raises ValueError, OSError, zipfile errors... for a bad file
        raise DataError(f"Could not load {folder / manifest['model_file']}: {error}. Re-upload the package.") from error
    size = manifest["image_size"]
    if tuple(model.input_shape[1:]) != (size, size, 3) or model.output_shape[-1] != len(classes):
        raise DataError(
            f"{manifest['model_file']} takes {model.input_shape} and gives {model.output_shape}, but the manifest "
            f"says {size}x{size} images and {len(classes)} classes: model and manifest do not belong together."
        )
    expected = np.asarray(manifest["check"]["logits"])
    logits = _check_logits(model, size, len(expected))
    scale = max(1.0, float(np.abs(expected).max()))
    if not np.allclose(logits, expected, rtol=1e-2, atol=1e-2 * scale):
        worst = float(np.abs(logits - expected).max())
        raise DataError(
            f"The loaded model's outputs differ from those recorded when it was saved (by up to {worst:.3g}): "
            "the model file does not match its manifest, or it loads differently here."
        )
    return model, manifest


def describe(folder: Path, manifest: dict[str, Any]) -> str:
    """One line: which model, what it takes, what it was trained with, how it scored."""
    trained, metric = manifest["trained_with"], manifest["dataset"]["metric"]
    return (
        f"{folder}: {manifest['model_name']}, {manifest['image_size']}x{manifest['image_size']}, "
        f"{len(manifest['dataset']['classes'])} classes, trained with Keras {trained['keras']} on "
        f"{trained['keras_backend']}; validation {metric} {manifest['metrics'][metric]:.3f}"
    )


def find_packages(locations: str, local_default: str | Path, input_dir: str | Path | None = None) -> list[Path]:
    """The package folders: each of `locations` (separated by commas), a folder or a Kaggle Models handle
    (owner/model/framework/variation[/version]) attached or downloaded by kagglehub; "auto": every
    package under Kaggle's input folder (`input_dir`) when on Kaggle, else `local_default` (where
    notebook 05 writes its package)."""
    from nbkit.storage import user_path

    if locations != "auto":
        return [_folder_or_model(user_path(place.strip())) for place in locations.split(",") if place.strip()]
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
    from nbkit.errors import DataError
    from nbkit.inputs import datasets

    try:
        return Path(datasets.fetch("model", location))
    except DataError as error:
        raise DataError(f"PACKAGES: {location!r} is no folder here, and as a Kaggle Models handle: {error}") from None


def publish_model(folder: str | Path, handle: str, version_notes: str = "") -> str:
    """Publish the package in `folder` to Kaggle Models as `handle` (owner/model/keras/variation) with
    kagglehub, a new version when the variation exists; the model's URL. Notebook 06 reads it by handle."""
    from nbkit.inputs import datasets

    manifest = read_manifest(folder)  # only a complete package goes out
    metric = manifest["dataset"]["metric"]
    notes = version_notes or (
        f"{manifest['model_name']}, {manifest['image_size']}px, validation {metric} {manifest['metrics'][metric]:.3f}"
    )
    return datasets.upload_model(handle, folder, notes, ignore=[_METADATA_FILE])  # the dataset route's file


def _is_package(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST_FILE).read_text()).get("format") == manifest_schema.FORMAT
    except (OSError, ValueError, AttributeError):
        return False
