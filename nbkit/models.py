"""Keras image classifiers that take uint8 images and rescale inside: a small CNN that runs anywhere,
keras.applications backbones with a new head; and saving / loading them whole."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import pretrained
from nbkit.errors import DataError, ParameterError


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

    weights: "none"; "imagenet" (Keras' ImageNet file: a local copy under one of the `search` folders,
    e.g. the attached Kaggle inputs, else downloaded once into Keras' cache); or that file itself (or a
    folder holding it), for running with the internet off (see `nbkit.pretrained`).
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
            raise DataError(
                f"WEIGHTS={weights!r}: no such file or folder. Give 'imagenet', 'none' or Keras' ImageNet file."
            )
        backbone = pretrained.imagenet_backbone(constructor, input_shape, weights, search)
    scale, offset = INPUT_SCALING[_family(constructor)]
    inputs = keras.Input(input_shape, dtype="uint8")
    x = layers.Rescaling(scale, offset)(inputs)
    x = layers.Dropout(dropout)(backbone(x))
    outputs = layers.Dense(num_classes, dtype="float32")(x)  # float32 logits under mixed precision
    return keras.Model(inputs, outputs, name=f"{name.lower()}_classifier")


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
    import keras

    with acc.scope() if acc is not None else contextlib.nullcontext():
        return keras.models.load_model(Path(path))
