import numpy as np
import pytest

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


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """An empty Keras cache and no internet: every download fails as it does with the internet off."""
    import urllib.error

    from keras.src.utils import file_utils

    local = file_utils.urlretrieve

    def no_internet(url, *args, **kwargs):
        if url.startswith("file://"):  # a local copy: there is no network in that
            return local(url, *args, **kwargs)
        raise urllib.error.URLError("no internet")

    monkeypatch.setattr(file_utils, "urlretrieve", no_internet)
    from keras.src.backend import config

    (tmp_path / "keras-home").mkdir()  # Keras falls back to /tmp/.keras where its folder is missing
    monkeypatch.setattr(config, "_KERAS_DIR", str(tmp_path / "keras-home"))  # KERAS_HOME is read at import


def legacy_weights(model, path):
    """Weights in the legacy HDF5 layout of Keras' ImageNet files."""
    import h5py
    from keras.src.legacy.saving import legacy_h5_format

    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)
    return path


@pytest.fixture
def imagenet_file(tmp_path, monkeypatch):
    """A stand-in for Keras' efficientnetb0_notop.h5 (random weights, the real layout), registered with
    its checksum in Keras' own table, as the real file is: nbkit's code sees what it would see."""
    import hashlib

    import keras
    from keras.src.applications import efficientnet

    keras.utils.set_random_seed(3)
    source = keras.applications.EfficientNetB0(include_top=False, weights=None, input_shape=(64, 64, 3))
    path = legacy_weights(source, tmp_path / "attached" / "some-dataset" / "efficientnetb0_notop.h5")
    monkeypatch.setitem(efficientnet.WEIGHTS_HASHES, "b0", ("unused", hashlib.md5(path.read_bytes()).hexdigest()))
    return path, source


def backbone_of(model):
    return next(layer for layer in model.layers if layer.name.startswith("efficientnet"))


def test_offline_imagenet_weights_come_from_an_attached_copy_and_build_what_online_builds(offline, imagenet_file):
    path, source = imagenet_file
    for weights, search in (("imagenet", [path.parents[1]]), (str(path), []), (str(path.parent), [])):
        model = models.build_classifier("EfficientNetB0", 64, 5, weights=weights, search=search)
        backbone = backbone_of(model)
        kernel = backbone.get_layer("stem_conv").kernel
        assert np.array_equal(np.asarray(kernel), np.asarray(source.get_layer("stem_conv").kernel)), weights
        # The ImageNet-only rescaling layer of keras.applications' EfficientNet is there, as online.
        assert sum(layer.__class__.__name__ == "Rescaling" for layer in backbone.layers) == 2, weights


@pytest.mark.parametrize(
    "case, message",
    [
        (
            "imagenet-offline",
            "Could not download efficientnetb0_notop.h5.*attach a Kaggle dataset holding efficientnetb0_notop.h5",
        ),
        ("wrong-name", "is not efficientnetb0_notop.h5, the ImageNet file keras.applications asks for"),
        ("wrong-checksum", "its checksum differs, so it is damaged or another file"),
        ("text-file", "is not a readable weights file"),
        ("another-architecture", "is not EfficientNetB0's ImageNet weights"),
        ("missing", "no such file or folder"),
    ],
)
def test_bad_weights_are_a_model_error_naming_the_file(offline, imagenet_file, tmp_path, monkeypatch, case, message):
    import hashlib

    import keras
    from keras.src.applications import efficientnet

    from nbkit.errors import DataError

    path, _ = imagenet_file
    weights = {"imagenet-offline": "imagenet", "missing": str(tmp_path / "nope.h5")}.get(case, str(path))
    if case == "wrong-name":
        weights = str(path.rename(path.with_name("b0.h5")))
    elif case == "wrong-checksum":
        path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    elif case in ("text-file", "another-architecture"):
        if case == "text-file":
            path.write_text("not weights")
        else:
            legacy_weights(
                keras.applications.EfficientNetB1(include_top=False, weights=None, input_shape=(64, 64, 3)), path
            )
        monkeypatch.setitem(efficientnet.WEIGHTS_HASHES, "b0", ("unused", hashlib.md5(path.read_bytes()).hexdigest()))
    with pytest.raises(DataError, match=message):
        models.build_classifier("EfficientNetB0", 64, 5, weights=weights)


def test_save_and_load_round_trip(tmp_path):
    import numpy as np

    model = models.small_cnn((8, 8, 3), 3, filters=(2,), dense=4)
    path = models.save_model(model, tmp_path / "nested" / "model.keras")
    assert path.exists() and [p.name for p in path.parent.iterdir()] == ["model.keras"]  # no partial file left
    loaded = models.load_model(path)
    images = np.random.default_rng(0).integers(0, 255, (2, 8, 8, 3), dtype=np.uint8)
    assert np.allclose(model.predict(images, verbose=0), loaded.predict(images, verbose=0))
