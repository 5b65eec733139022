"""Small Keras models that run anywhere (they take uint8 images and rescale inside)."""

from __future__ import annotations

from typing import Any, Sequence


def small_cnn(
    input_shape: Sequence[int], num_classes: int, filters: Sequence[int] = (32, 64), dense: int = 128
) -> Any:
    """Conv-ReLU-pool blocks, then a dense layer; outputs logits (use `from_logits=True`)."""
    import keras
    from keras import layers

    model = keras.Sequential([keras.Input(tuple(input_shape)), layers.Rescaling(1.0 / 255)], name="small_cnn")
    for width in filters:
        model.add(layers.Conv2D(width, 3, padding="same", activation="relu"))
        model.add(layers.MaxPooling2D())
    model.add(layers.Flatten())
    model.add(layers.Dense(dense, activation="relu"))
    # Logits stay float32 under mixed precision, where the softmax/loss need the range.
    model.add(layers.Dense(num_classes, dtype="float32"))
    return model
