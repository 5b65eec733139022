"""MNIST for the TPU-setup notebook: the real data when it can be had, else a learnable stand-in."""

from __future__ import annotations

import os
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import ParameterError

MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28, 1)


@dataclass
class Mnist:
    """Images (N, 28, 28, 1) uint8, labels (N,) int64, and where they came from."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str  # "mnist" or "generated"


def keras_cache_file() -> Path:
    """Where `keras.datasets.mnist.load_data()` keeps its download."""
    return Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets" / "mnist.npz"


def load(
    prefer_real: bool,
    num_train: int = 60000,
    num_test: int = 10000,
    seed: int = 0,
    url: str = MNIST_URL,
    cache_file: Path | None = None,
    timeout: float = 20.0,
) -> Mnist:
    """Real MNIST (from the Keras cache, else downloaded) if `prefer_real`, falling back to generated data.

    The fallback prints why, so a notebook with internet off still runs.
    """
    if prefer_real:
        cache_file = cache_file or keras_cache_file()
        try:
            if not cache_file.exists():
                _download(url, cache_file, timeout)
            with np.load(cache_file) as f:
                data = Mnist(
                    f["x_train"][:num_train, ..., None],
                    f["y_train"][:num_train].astype(np.int64),
                    f["x_test"][:num_test, ..., None],
                    f["y_test"][:num_test].astype(np.int64),
                    source="mnist",
                )
            return data
        except (OSError, ValueError, KeyError) as error:
            print(f"MNIST could not be loaded ({type(error).__name__}: {error}); using generated MNIST-shaped data.")
    return generate(num_train, num_test, seed)


def _download(url: str, target: Path, timeout: float) -> None:
    # Through a partial file renamed into place, so an interrupted download leaves no corrupt cache.
    with atomic.replacing(target) as partial, open(partial, "wb") as out:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            shutil.copyfileobj(response, out)


def generate(num_train: int, num_test: int, seed: int = 0) -> Mnist:
    """A deterministic, learnable MNIST stand-in: each class is a fixed blurred stroke pattern,
    randomly shifted by up to 3 pixels, with noise."""
    if num_train < 1 or num_test < 1:
        raise ParameterError(
            f"generate() needs at least one image per split, got num_train={num_train}, num_test={num_test}."
        )
    rng = np.random.default_rng(seed)
    templates = _class_templates(rng)
    x_train, y_train = _sample(templates, num_train, rng)
    x_test, y_test = _sample(templates, num_test, rng)
    return Mnist(x_train, y_train, x_test, y_test, source="generated")


def _class_templates(rng: np.random.Generator) -> np.ndarray:
    templates = np.zeros((NUM_CLASSES, 28, 28), np.float32)
    for c in range(NUM_CLASSES):
        # A few random strokes per class inside the central 20x20, like a digit.
        for _ in range(3):
            (r0, c0), (r1, c1) = rng.integers(6, 22, size=(2, 2))
            for t in np.linspace(0.0, 1.0, 40):
                r, col = int(round(r0 + t * (r1 - r0))), int(round(c0 + t * (c1 - c0)))
                templates[c, r - 1 : r + 2, col - 1 : col + 2] = 1.0
    return templates


def _sample(templates: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, NUM_CLASSES, size=count)
    shifts = rng.integers(-3, 4, size=(count, 2))
    images = np.empty((count, 28, 28), np.float32)
    for i, (label, (dy, dx)) in enumerate(zip(labels, shifts)):
        images[i] = np.roll(templates[label], (dy, dx), axis=(0, 1))
    images = images * rng.uniform(0.6, 1.0, size=(count, 1, 1)) + rng.normal(0, 0.15, images.shape)
    return (np.clip(images, 0, 1) * 255).astype(np.uint8)[..., None], labels.astype(np.int64)


def to_dataset(
    x: np.ndarray, y: np.ndarray, batch_size: int, training: bool, input_context: Any = None, seed: int = 0
) -> Any:
    """A tf.data pipeline of (uint8 image, label) batches; repeated and shuffled for training.

    With an `input_context` (from `strategy.distribute_datasets_from_function`) each input
    pipeline reads its own shard and `batch_size` is the per-replica batch.
    """
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if training:
        # Infinite and shuffled: every step sees a full batch, so replicas stay in step.
        ds = ds.shuffle(min(len(x), 10000), seed=seed).repeat()
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
