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


def test_build_classifier_small_cnn_and_unknown_names():
    import pytest

    from nbkit.errors import ParameterError

    model = models.build_classifier("small_cnn", 192, 104)
    assert tuple(model.output_shape) == (None, 104)
    with pytest.raises(ParameterError, match="MODEL='ResNet50' is not offered.*EfficientNetB0"):
        models.build_classifier("ResNet50", 192, 104)  # caffe-style input: not offered
    with pytest.raises(ParameterError, match="small_cnn has no pretrained weights"):
        models.build_classifier("small_cnn", 192, 104, weights="imagenet")


def test_build_classifier_application_without_weights():
    model = models.build_classifier("MobileNetV2", 96, 5, weights="none")
    logits = model(np.zeros((1, 96, 96, 3), np.uint8))
    assert tuple(logits.shape) == (1, 5)


def test_imagenet_weights_offline_give_a_clear_message(tmp_path, monkeypatch):
    import urllib.error

    import pytest
    from keras.src.utils import file_utils

    from nbkit.errors import ModelError

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))  # empty cache: Keras must download

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no internet")

    monkeypatch.setattr(file_utils, "urlretrieve", offline)
    with pytest.raises(ModelError, match="WEIGHTS='none'"):
        models.build_classifier("MobileNetV2", 96, 5, weights="imagenet")
    with pytest.raises(ModelError, match="no such file"):
        models.build_classifier("MobileNetV2", 96, 5, weights=str(tmp_path / "missing.h5"))


def test_save_and_load_round_trip(tmp_path):
    import numpy as np

    model = models.small_cnn((8, 8, 3), 3, filters=(2,), dense=4)
    path = models.save_model(model, tmp_path / "nested" / "model.keras")
    assert path.exists() and [p.name for p in path.parent.iterdir()] == ["model.keras"]  # no partial file left
    loaded = models.load_model(path)
    images = np.random.default_rng(0).integers(0, 255, (2, 8, 8, 3), dtype=np.uint8)
    assert np.allclose(model.predict(images, verbose=0), loaded.predict(images, verbose=0))
