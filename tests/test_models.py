import re
from pathlib import Path

import numpy as np
import pytest

from nbkit import backbones, models
from nbkit.errors import ParameterError

NOTEBOOKS = Path(__file__).parents[1] / "notebooks"


def test_a_backbone_without_weights_is_built_as_asked():
    backbone = backbones.backbone("MobileNetV2", (96, 96, 3), "none")
    assert tuple(backbone.output_shape) == (None, 1280)  # no top, average pooled


def test_a_model_whose_outputs_are_not_the_classes_is_named_before_training():
    import keras

    def model(*heads):
        inputs = keras.Input([8])
        outputs = [keras.layers.Dense(n)(inputs) for n in heads]
        return keras.Model(inputs, outputs if len(outputs) > 1 else outputs[0])

    models.check_outputs(model(104), 104)
    with pytest.raises(
        ParameterError, match=re.escape("build_model() gives 10 logits per input, but the data has 104 classes")
    ):
        models.check_outputs(model(10), 104)  # Dense(10) edited in: trained a whole run on JAX, failed in scoring
    with pytest.raises(
        ParameterError, match=re.escape("gives 2 outputs ((None, 104), (None, 1)), but the data has 104")
    ):
        models.check_outputs(model(104, 1), 104)
    flat = keras.Sequential([keras.Input([4, 8]), keras.layers.Dense(104)])  # no pooling: a row of logits per step
    with pytest.raises(ParameterError, match=re.escape("outputs of shape (None, 4, 104) (batch first)")):
        models.check_outputs(flat, 104)


@pytest.mark.parametrize(
    "notebook, classes",
    [
        ("02_flowers_classifier.py", "dataset.num_classes"),
        ("05_train_on_tpu.py", "dataset.num_classes"),
        ("08_text_classifier.py", "len(data.classes)"),
    ],
)
def test_the_notebooks_check_their_models_outputs_right_after_building_it(notebook, classes):
    source = (NOTEBOOKS / notebook).read_text()
    built = source.index("    model = build_model()\n")
    assert (
        source[built:].split("\n")[1]
        == f"    models.check_outputs(model, {classes})  # one logit per class, said before any training"
    )
    assert built < source.index("model.fit(")


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


def test_offline_imagenet_weights_come_from_an_attached_copy_and_build_what_online_builds(offline, imagenet_file):
    path, source = imagenet_file
    for weights, search in (("imagenet", [path.parents[1]]), (str(path), []), (str(path.parent), [])):
        backbone = backbones.backbone("EfficientNetB0", (64, 64, 3), weights, search=search)
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
        backbones.backbone("EfficientNetB0", (64, 64, 3), weights)
