"""MNIST-shaped digits made up on the spot for runs that cannot download MNIST: each class a fixed pattern
of strokes, shifted, dimmed and noisy; deterministic, learnable, shaped as `keras.datasets.mnist.load_data()`."""

from __future__ import annotations

import numpy as np

from nbkit.errors import ParameterError

_NUM_CLASSES = 10


def generate(num_train: int, num_test: int, seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """((x_train, y_train), (x_test, y_test)): images (N, 28, 28) uint8, labels (N,) uint8."""
    if num_train < 1 or num_test < 1:
        raise ParameterError(f"generate() needs an image per split, got num_train={num_train}, num_test={num_test}.")
    rng = np.random.default_rng(seed)
    templates = np.zeros((_NUM_CLASSES, 28, 28), np.float32)
    for digit in templates:  # three straight strokes inside the central 20 x 20, like a handwritten digit
        for _ in range(3):
            (r0, c0), (r1, c1) = rng.integers(6, 22, size=(2, 2))
            for t in np.linspace(0.0, 1.0, 40):
                r, c = int(round(r0 + t * (r1 - r0))), int(round(c0 + t * (c1 - c0)))
                digit[r - 1 : r + 2, c - 1 : c + 2] = 1.0
    return _sample(templates, num_train, rng), _sample(templates, num_test, rng)


def _sample(templates: np.ndarray, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, _NUM_CLASSES, size=count)
    shifts = rng.integers(-3, 4, size=(count, 2))
    images = np.stack([np.roll(templates[label], shift, axis=(0, 1)) for label, shift in zip(labels, shifts)])
    images = images * rng.uniform(0.6, 1.0, size=(count, 1, 1)) + rng.normal(0, 0.15, images.shape)
    return (np.clip(images, 0, 1) * 255).astype(np.uint8), labels.astype(np.uint8)
