import numpy as np

from nbkit import models


def test_small_cnn_takes_uint8_and_returns_float32_logits_under_mixed_precision():
    import keras

    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = models.small_cnn((28, 28, 1), 10, filters=(4, 8), dense=16)
        logits = model(np.zeros((2, 28, 28, 1), np.uint8))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert tuple(logits.shape) == (2, 10)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"  # the loss needs float32 range
    assert keras.backend.standardize_dtype(model.layers[1].compute_dtype) == "bfloat16"
    assert [layer.__class__.__name__ for layer in model.layers][:2] == ["Rescaling", "Conv2D"]
