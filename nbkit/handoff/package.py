"""Model packages: a trained model plus what predicting with it needs, in a folder that uploads
as a Kaggle dataset (`kaggle datasets create -p <folder>`, later `kaggle datasets version -p`) or
to Kaggle Models (`publish_model`, with kagglehub).

    model.keras            the model (Keras 3 format; loads with either backend)
    manifest.json          classes, image size, input format, versions, metrics, data fingerprint,
                           and the logits of two fixed images, to check the model after loading
    dataset-metadata.json  title, id (owner/slug), license: what the Kaggle CLI reads
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.env import installed_versions
from nbkit.errors import PackageError
from nbkit.inputs import account
from nbkit.inputs.account import DATASET_SLUG, PLACEHOLDER_OWNER, default_dataset_id  # noqa: F401  (package.* names)

FORMAT = "nbkit-model-package"
FORMAT_VERSION = 1
MODEL_FILE = "model.keras"
MANIFEST_FILE = "manifest.json"
METADATA_FILE = "dataset-metadata.json"
INPUT_FORMAT = "uint8 RGB, 0-255, shape [image_size, image_size, 3]; the model rescales inside"
REQUIRED_KEYS = (
    "format",
    "format_version",
    "model_file",
    "classes",
    "image_size",
    "input",
    "trained_with",
    "metrics",
    "data",
    "check",
)


def versions(backend: str) -> dict[str, str]:
    """What a model was trained with: Keras backend and library versions (read without importing them)."""
    names = ("keras", "tensorflow", "tensorflow-cpu", "jax", "jaxlib", "numpy", "nbkit")
    return {"keras_backend": backend, "python": platform.python_version(), **installed_versions(names)}


def dataset_metadata(dataset_id: str, title: str, license_name: str = "CC0-1.0") -> dict[str, Any]:
    """The package's `dataset-metadata.json` contents, checked the way `kaggle datasets create` checks them."""
    resources = [
        {"path": MODEL_FILE, "description": "Keras 3 model"},
        {"path": MANIFEST_FILE, "description": "classes, input format, versions, metrics"},
    ]
    return account.dataset_metadata(dataset_id, title, resources, license_name)


def check_images(image_size: int, count: int = 2) -> np.ndarray:
    """Fixed uint8 images whose logits the manifest keeps, to check a loaded model."""
    return np.random.default_rng(0).integers(0, 256, (count, image_size, image_size, 3), dtype=np.uint8)


def check_logits(model: Any, image_size: int, count: int = 2) -> np.ndarray:
    """The model's logits for `check_images`, as float64."""
    # One batch of 64 rows (the images, then zeros): any replica count up to 64 that divides it
    # gets an equal share, which a batch of 2 would not give 8 TPU cores.
    images = np.zeros((64, image_size, image_size, 3), np.uint8)
    images[:count] = check_images(image_size, count)
    return np.asarray(model.predict(images, batch_size=64, verbose=0), np.float64)[:count]


def write_package(
    folder: str | Path,
    model: Any,
    *,
    classes: Sequence[str],
    image_size: int,
    backend: str,
    metrics: dict[str, Any],
    training: dict[str, Any],
    data_fingerprint: str,
    dataset_id: str,
    title: str,
) -> Path:
    """Write the package into `folder`, replacing an older one only once the new one is complete."""
    folder = Path(folder)
    dataset = dataset_metadata(dataset_id, title)  # a bad id stops here, before anything is written
    logits = check_logits(model, image_size)
    if logits.shape[-1] != len(classes):
        raise PackageError(f"The model has {logits.shape[-1]} outputs but {len(classes)} class names were given.")
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_file": MODEL_FILE,
        "model_name": model.name,
        "classes": list(classes),
        "image_size": image_size,
        "input": INPUT_FORMAT,
        "output": "logits (argmax is the class; softmax gives probabilities)",
        "trained_with": versions(backend),
        "training": training,
        "metrics": {k: (v.item() if hasattr(v, "item") else v) for k, v in metrics.items()},
        "data": {"fingerprint": data_fingerprint},
        "check": {"images": "check_images(image_size): numpy default_rng(0) uint8", "logits": logits.round(6).tolist()},
    }
    with atomic.staged_dir(folder) as staging:
        model.save(staging / MODEL_FILE)
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
        (staging / METADATA_FILE).write_text(json.dumps(dataset, indent=2) + "\n")
    return folder


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of the package in `folder`, checked: format, version, keys, model file present."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PackageError(f"No model package at {folder}: give the folder holding {MANIFEST_FILE} and {MODEL_FILE}.")
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise PackageError(
            f"{folder} has no {MANIFEST_FILE}, so it is not a model package (or its upload is incomplete)."
        )
    try:
        manifest = json.loads(path.read_text())
    except ValueError as error:
        raise PackageError(f"{path} is not valid JSON ({error}); re-upload the package.") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise PackageError(f"{path} is not an nbkit model manifest (format should be {FORMAT!r}).")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise PackageError(
            f"{path} has format_version {manifest.get('format_version')!r}; this nbkit reads version {FORMAT_VERSION}. "
            "Use the nbkit version that wrote the package, or write the package again with this one."
        )
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise PackageError(f"{path} lacks {', '.join(missing)}: the package is incomplete; write it again.")
    if not (folder / manifest["model_file"]).is_file():
        raise PackageError(
            f"{folder} lacks {manifest['model_file']}, the model named in its manifest (incomplete upload?)."
        )
    return manifest


def check_compatible(manifest: dict[str, Any], image_size: int, classes: Sequence[str]) -> None:
    """Stop with a clear message if the package does not fit the data it is about to predict."""
    if manifest["image_size"] != image_size:
        raise PackageError(
            f"The model takes {manifest['image_size']}x{manifest['image_size']} images but the data given is "
            f"{image_size}x{image_size}: set IMAGE_SIZE={manifest['image_size']} (or 0: the model's own size)."
        )
    if len(manifest["classes"]) != len(classes):
        raise PackageError(
            f"The model knows {len(manifest['classes'])} classes but this data has {len(classes)}: "
            "it was trained for another task."
        )
    if list(manifest["classes"]) != list(classes):
        raise PackageError("The model's class names differ from this data's (same count, other order or names).")


def load_package(folder: str | Path, acc: Any = None) -> tuple[Any, dict[str, Any]]:
    """Load the model (in `acc`'s scope when given) and check it against its manifest: input shape,
    class count, and the logits of the check images."""
    from nbkit.models import load_model

    folder = Path(folder)
    manifest = read_manifest(folder)
    try:
        model = load_model(folder / manifest["model_file"], acc)
    except Exception as error:  # Keras raises ValueError, OSError, zipfile errors... for a bad file
        raise PackageError(
            f"Could not load {folder / manifest['model_file']}: {error}. Re-upload the package."
        ) from error
    size, classes = manifest["image_size"], manifest["classes"]
    if tuple(model.input_shape[1:]) != (size, size, 3) or model.output_shape[-1] != len(classes):
        raise PackageError(
            f"{manifest['model_file']} takes {model.input_shape} and gives {model.output_shape}, but the manifest "
            f"says {size}x{size} images and {len(classes)} classes: model and manifest do not belong together."
        )
    expected = np.asarray(manifest["check"]["logits"])
    logits = check_logits(model, size, len(expected))
    scale = max(1.0, float(np.abs(expected).max()))
    if not np.allclose(logits, expected, rtol=1e-2, atol=1e-2 * scale):
        worst = float(np.abs(logits - expected).max())
        raise PackageError(
            f"The loaded model's outputs differ from those recorded when it was saved (by up to {worst:.3g}): "
            "the model file does not match its manifest, or it loads differently here."
        )
    return model, manifest


def find_package(location: str, local_default: str | Path, input_dir: str | Path | None = None) -> Path:
    """The package folder: `location` if it is a folder; a Kaggle Models handle
    (owner/model/framework/variation[/version]) attached or downloaded by kagglehub; "auto" looks for
    one under Kaggle's input folder (`input_dir`) when on Kaggle, else uses `local_default` (where
    notebook 05 writes it)."""
    if location != "auto":
        return _folder_or_model(location)
    if input_dir is None:
        return Path(local_default)
    # Datasets mount as <input>/<slug>/..., models as <input>/<model>/<framework>/<variation>/<version>
    # or, in newer sessions, <input>/models/<owner>/<model>/<framework>/<variation>/<version>.
    found = sorted({p.parent for depth in range(1, 8) for p in Path(input_dir).glob("*/" * depth + MANIFEST_FILE)})
    packages = [p for p in found if _is_package(p)]
    if not packages:
        raise PackageError(
            f"No model package under {input_dir}: attach notebook 05's package (its Kaggle dataset or model) "
            "with 'Add Input', or set PACKAGE to its folder or its Kaggle Models handle."
        )
    if len(packages) > 1:
        raise PackageError(
            f"Several model packages are attached ({', '.join(map(str, packages))}): set PACKAGE to one."
        )
    return packages[0]


def _folder_or_model(location: str) -> Path:
    if Path(location).exists() or location.count("/") not in (3, 4):
        return Path(location)  # a folder (read_manifest says so if it is not one)
    from nbkit.errors import DataError
    from nbkit.inputs import kaggle_hub

    try:
        return Path(kaggle_hub.fetch("model", location))
    except DataError as error:
        raise PackageError(f"PACKAGE={location!r} is no folder here, and as a Kaggle Models handle: {error}") from None


def publish_model(folder: str | Path, handle: str, version_notes: str = "") -> str:
    """Publish the package in `folder` to Kaggle Models as `handle` (owner/model/keras/variation) with
    kagglehub, a new version when the variation exists; the model's URL. Notebook 06 reads it by handle."""
    from nbkit.inputs import kaggle_hub

    manifest = read_manifest(folder)  # only a complete package goes out
    f1 = manifest["metrics"].get("f1_macro")
    notes = version_notes or f"{manifest['model_name']}, {manifest['image_size']}px" + (
        f", validation F1 {f1:.3f}" if isinstance(f1, (int, float)) else ""
    )
    return kaggle_hub.upload_model(handle, folder, notes, ignore=[METADATA_FILE])  # the dataset route's file


def _is_package(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False
