"""What a GPU does with nbkit's Keras path, without TensorFlow's input pipeline: the accelerator and
precision nbkit picks, both profiles' models fitted and predicting, the one-device prediction check,
and a saved model reloaded. Prints a table (times include XLA compiling).

    python bench/gpu_check.py [PRECISION]     # on a machine with a GPU (JAX's CUDA build, or TensorFlow)
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nbkit import accel


def main(precision: str = "auto") -> None:
    acc = accel.setup(backend="auto")  # JAX where TensorFlow is not installed (a CUDA image with JAX only)
    print(acc.describe())
    print(acc.set_precision(precision))
    import keras
    from keras import layers

    from nbkit import models as predict

    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (512, 192, 192, 3), dtype=np.uint8)
    labels = rng.integers(0, 104, 512)
    rows = ["| model | layer compute dtypes | optimizer | fit s (2 x 8 steps) | predict s (512) | reload max diff |"]
    rows.append("|---|---|---|---|---|---|")
    for name in ("small_cnn", "EfficientNetB0"):
        with acc.scope():  # notebook 02's two models, written out
            inputs = keras.Input([192, 192, 3], dtype="uint8")
            if name == "small_cnn":
                x = layers.AveragePooling2D(4)(layers.Rescaling(1 / 255)(inputs))
                for width in (16, 32, 64):
                    x = layers.MaxPooling2D()(layers.Conv2D(width, 3, padding="same", activation="relu")(x))
                x = layers.Dense(128, activation="relu")(layers.Flatten()(x))
            else:
                backbone = keras.applications.EfficientNetB0(include_top=False, weights=None, pooling="avg")
                x = layers.Dropout(0.2)(backbone(inputs))
            model = keras.Model(inputs, layers.Dense(104, dtype="float32")(x), name=name.lower())
            model.compile(
                optimizer=keras.optimizers.Adam(1e-3),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                steps_per_execution=4,
            )
        start = time.perf_counter()
        model.fit(images, labels, batch_size=64, epochs=2, verbose=0)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        logits = np.asarray(model.predict(images, batch_size=128, verbose=0))
        predict_s = time.perf_counter() - start
        predict.check_rows(model, images[:128], logits)  # raises AcceleratorError if rows differ
        model.save(f"/tmp/nbkit-gpu-{name}.keras")
        with acc.scope():
            again = keras.saving.load_model(f"/tmp/nbkit-gpu-{name}.keras")
        reload_diff = float(np.abs(np.asarray(again.predict(images[:64], verbose=0)) - logits[:64]).max())
        computes = sorted({layer.dtype_policy.compute_dtype for layer in model.layers})
        rows.append(
            f"| {name} | {', '.join(computes)} | {type(model.optimizer).__name__} | {fit_s:.1f} | "
            f"{predict_s:.1f} | {reload_diff:.2g} |"
        )
    print("\n".join(rows))


if __name__ == "__main__":
    main(*sys.argv[1:])
