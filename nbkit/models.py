"""Keras image classifiers that take uint8 images and rescale inside: a small CNN that runs anywhere,
keras.applications backbones with a new head; and saving / loading them whole."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nbkit.errors import ModelError, ParameterError


def small_cnn(
    input_shape: Sequence[int],
    num_classes: int,
    filters: Sequence[int] = (32, 64),
    dense: int = 128,
    downsample: int = 1,
) -> Any:
    """Conv-ReLU-pool blocks, then a dense layer; outputs logits (use `from_logits=True`).

    downsample > 1 average-pools the input first: a quick baseline on large images, and a CNN
    that trains in seconds on a CPU.
    """
    import keras
    from keras import layers

    model = keras.Sequential([keras.Input(tuple(input_shape)), layers.Rescaling(1.0 / 255)], name="small_cnn")
    if downsample > 1:
        model.add(layers.AveragePooling2D(downsample))
    for width in filters:
        model.add(layers.Conv2D(width, 3, padding="same", activation="relu"))
        model.add(layers.MaxPooling2D())
    model.add(layers.Flatten())
    model.add(layers.Dense(dense, activation="relu"))
    # Logits stay float32 under mixed precision, where the softmax/loss need the range.
    model.add(layers.Dense(num_classes, dtype="float32"))
    return model


# How each keras.applications family wants its input, as Rescaling(scale, offset) of 0-255 pixels.
# Families that want BGR / mean-subtracted input ("caffe": ResNet50, VGG) are not offered.
INPUT_SCALING = {
    "efficientnet": (1.0, 0.0),  # rescales inside the model
    "efficientnet_v2": (1.0, 0.0),
    "convnext": (1.0, 0.0),
    "mobilenet": (1 / 127.5, -1.0),
    "mobilenet_v2": (1 / 127.5, -1.0),
    "xception": (1 / 127.5, -1.0),
    "inception_v3": (1 / 127.5, -1.0),
    "inception_resnet_v2": (1 / 127.5, -1.0),
    "resnet_v2": (1 / 127.5, -1.0),
    "nasnet": (1 / 127.5, -1.0),
}


def application_names() -> list[str]:
    """The keras.applications models `build_classifier` accepts."""
    import keras

    return sorted(
        name
        for name in dir(keras.applications)
        if name[0].isupper() and _family(getattr(keras.applications, name)) in INPUT_SCALING
    )


def _family(constructor: Any) -> str:
    return constructor.__module__.rsplit(".", 1)[-1]


def check_name(name: str) -> str:
    """`name` if `build_classifier` builds it ("small_cnn" or an offered keras.applications name), else a
    ParameterError listing them (and the name in its right letter case, when only that was wrong)."""
    if name == "small_cnn":
        return name
    offered = application_names()
    if name in offered:
        return name
    same = [n for n in ["small_cnn", *offered] if n.lower() == str(name).lower()]
    hint = f"Did you mean {same[0]!r}? " if same else ""
    raise ParameterError(f"MODEL={name!r} is not offered. {hint}Use 'small_cnn' or one of {offered}.")


def build_classifier(
    name: str,
    image_size: int,
    num_classes: int,
    weights: str = "none",
    dropout: float = 0.2,
    search: Sequence[Path] = (),
) -> Any:
    """`small_cnn` or a keras.applications backbone with a new head; takes uint8 images, gives logits.

    weights: "none"; "imagenet" (a local copy of Keras' ImageNet file under one of the `search`
    folders, e.g. the attached Kaggle inputs, else downloaded once into the Keras cache); or the
    ImageNet file itself (or a folder holding it), for running with the internet off.
    """
    import keras
    from keras import layers

    input_shape = (image_size, image_size, 3)
    if name == "small_cnn":
        if weights != "none":
            raise ParameterError(f"WEIGHTS={weights!r}: small_cnn has no pretrained weights; use WEIGHTS='none'.")
        # Pooled to about 48x48 first: a baseline, not a competitor of the pretrained backbones.
        return small_cnn(input_shape, num_classes, filters=(16, 32, 64), dense=128, downsample=max(1, image_size // 48))
    constructor = getattr(keras.applications, check_name(name))
    if weights == "none":
        backbone = constructor(include_top=False, weights=None, input_shape=input_shape, pooling="avg")
    else:
        if weights != "imagenet" and not Path(weights).exists():
            raise ModelError(
                f"WEIGHTS={weights!r}: no such file or folder. Give 'imagenet', 'none' or Keras' ImageNet file."
            )
        backbone = imagenet_backbone(constructor, input_shape, weights, search)
    scale, offset = INPUT_SCALING[_family(constructor)]
    inputs = keras.Input(input_shape, dtype="uint8")
    x = layers.Rescaling(scale, offset)(inputs)
    x = layers.Dropout(dropout)(backbone(x))
    outputs = layers.Dense(num_classes, dtype="float32")(x)  # float32 logits under mixed precision
    return keras.Model(inputs, outputs, name=f"{name.lower()}_classifier")


def imagenet_backbone(constructor: Any, input_shape: tuple[int, ...], weights: str, search: Sequence[Path]) -> Any:
    """keras.applications' ImageNet backbone, exactly as `weights="imagenet"` builds it online (EfficientNet
    adds a rescaling layer only then), its weights file taken from a local copy when there is one."""
    roots = list(search) if weights == "imagenet" else [Path(weights)]
    requested: list[str] = []
    try:
        with _local_imagenet_files(roots, requested, required=weights != "imagenet"):
            return constructor(include_top=False, weights="imagenet", input_shape=input_shape, pooling="avg")
    except ModelError:
        raise
    except Exception as error:  # Keras: a bare Exception offline; h5py: OSError; a mismatch: ValueError
        raise _weights_error(constructor.__name__, weights, requested, error) from None


@contextlib.contextmanager
def _local_imagenet_files(roots: list[Path], requested: list[str], required: bool) -> Iterator[None]:
    """Answer keras.applications' own request for its ImageNet file (`file_utils.get_file`, which every
    application calls) from a file of that name under `roots`, after the checksum Keras expects."""
    from unittest import mock

    from keras.src.utils import file_utils

    download = file_utils.get_file

    def get_file(fname: str | None = None, origin: str | None = None, *args: Any, **kwargs: Any) -> str:
        fname = fname or str(origin).rsplit("/", 1)[-1]
        requested.append(fname)
        local = _find(fname, roots)
        if local is None and required:
            raise ModelError(
                f"WEIGHTS={str(roots[0])!r} is not {fname}, the ImageNet file keras.applications asks for "
                "(without its top), and holds no file of that name."
            )
        if local is None:
            return download(fname, origin, *args, **kwargs)
        expected = kwargs.get("file_hash") or kwargs.get("md5_hash")
        if expected and _checksum(local, expected) != expected:
            raise ModelError(
                f"{local} is not the {fname} keras.applications expects: its checksum differs, so it is "
                "damaged or another file. Attach the original file (from ~/.keras/models/ after one online run)."
            )
        return str(local)

    with mock.patch.object(file_utils, "get_file", get_file):
        yield


def _find(name: str, roots: list[Path]) -> Path | None:
    """`name` itself, or the first file called `name` under the folders in `roots`."""
    for root in roots:
        if root.is_file():
            if root.name == name:
                return root
        elif root.is_dir():
            found = sorted(root.rglob(name))
            if found:
                return found[0]
    return None


def _checksum(path: Path, like: str) -> str:
    """The file's md5, or sha256 when `like` is that long (Keras' "auto" rule)."""
    digest = hashlib.md5() if len(like) == 32 else hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _weights_error(name: str, weights: str, requested: list[str], error: Exception) -> ModelError:
    file = requested[0] if requested else "its ImageNet weights file"
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if "URL fetch failure" in str(error) or isinstance(error, (ConnectionError, TimeoutError)):
        return ModelError(
            f"Could not download {file}, the ImageNet weights of {name} (is the internet off?). Offline: attach a Kaggle "
            f"dataset holding {file} (Keras keeps it in ~/.keras/models/ after one online run) and keep "
            "WEIGHTS='imagenet', which finds it under /kaggle/input; or give its path as WEIGHTS; or use WEIGHTS='none'."
        )
    what = (
        "not a readable weights file" if isinstance(error, OSError) else f"not {name}'s ImageNet weights (without top)"
    )
    return ModelError(f"WEIGHTS={weights!r} ({file}) is {what}: {first_line}")


def save_model(model: Any, path: str | Path) -> Path:
    """Save in the Keras 3 format (`.keras`), via a partial file, so a failed save loses nothing.

    Keras 3 writes the file from the host in Python (zip + h5), so the TPU-Node-era
    `experimental_io_device="/job:localhost"` of TF SavedModels is not needed here.
    """
    from nbkit import atomic

    with atomic.replacing(path) as partial:
        model.save(partial)
    return Path(path)


def load_model(path: str | Path, acc: Any = None) -> Any:
    """Load a `.keras` model, inside the accelerator's scope when given (variables on every replica)."""
    import contextlib

    import keras

    with acc.scope() if acc is not None else contextlib.nullcontext():
        return keras.models.load_model(Path(path))
