"""The path a Kaggle TPU user runs, in miniature on the CPU: the full profile (EfficientNetB0), Keras
on JAX over 8 simulated devices, mixed bfloat16, one capped epoch on a small sample; then notebook 06
predicting with the package notebook 05 wrote (TensorFlow, one device). 02 and 05 build the same model and
share one compile cache, as a later session would: 05 loads what 02 compiled."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import execute, split_keys, text_outputs

from nbkit import metrics as results
from nbkit.handoff import package
from nbkit.images import sample as flower_sample

SIZE = 64  # EfficientNetB0 takes 32 px and more
FULL = {
    "PROFILE": "full",
    "BACKEND": "jax",
    "SIMULATE_DEVICES": 8,
    "PRECISION": "mixed_bfloat16",
    "WEIGHTS": "none",
    "EPOCHS": 1,
    "STEPS_PER_EPOCH": 1,
    "PER_REPLICA_BATCH": 2,  # what keeps it short: one step, global batch 16
}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    # 16 of the 104 classes, one picture each per split, 64 px: one global batch of 16 each, so the
    # bfloat16 EfficientNet (emulated on a CPU) computes 3 small batches; compiling is what is tested.
    return flower_sample.make_sample(
        tmp_path_factory.mktemp("flowers"), 16, image_sizes=(SIZE,), train_per_class=1, val_per_class=1, test_images=16
    )


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture(scope="module")
def notebook_02(small, compile_cache, tmp_path_factory) -> tuple[Path, str]:
    """Notebook 02's full-profile run (the first to compile here): its folder and its text output."""
    folder = tmp_path_factory.mktemp("notebook-02")
    run = execute(
        folder,
        "02_flowers_classifier.ipynb",
        DATA_ROOT=str(small),
        OUTPUT_DIR=str(folder / "classifier"),
        COMPILE_CACHE=str(compile_cache),
        **FULL,
    )
    return folder, text_outputs(run)


def computed_in_bfloat16(model_file: Path) -> tuple[set[str], str]:
    """The dtypes the saved model's backbone convolutions really produce, and its logits' dtype."""
    import keras

    model = keras.models.load_model(model_file)
    backbone = next(layer for layer in model.layers if layer.name.startswith("efficientnet"))
    convolutions = [layer for layer in backbone.layers if isinstance(layer, keras.layers.Conv2D)]
    probe = keras.Model(backbone.inputs, [layer.output for layer in convolutions[:3] + convolutions[-2:]])
    outputs = probe.predict(np.zeros((1, SIZE, SIZE, 3), "float32"), verbose=0)
    logits = model.predict(np.zeros((1, SIZE, SIZE, 3), "uint8"), verbose=0)
    return {str(o.dtype) for o in outputs}, str(logits.dtype)


def test_notebook_02_full_profile_in_bfloat16_on_eight_devices(small, notebook_02):
    tmp_path, out = notebook_02
    joined = " ".join(out.split())
    assert "empty, so this run compiles and stores its programs there" in joined
    assert "Keras backend jax, 8 replica(s)" in joined and "full: EfficientNetB0 (weights none)" in joined
    assert "precision mixed_bfloat16 (PRECISION='mixed_bfloat16' was asked for)" in joined
    assert "1 steps per epoch" in joined
    metrics = json.loads((tmp_path / "classifier" / "metrics.json").read_text())
    assert (metrics["precision"], metrics["model"], metrics["replicas"]) == ("mixed_bfloat16", "EfficientNetB0", 8)
    _, rows = results.read_csv(tmp_path / "classifier" / "submission.csv")
    assert [i for i, _ in rows] == split_keys(small, "test", SIZE)
    assert computed_in_bfloat16(tmp_path / "classifier" / "model.keras") == ({"bfloat16"}, "float32")


def test_notebook_05_full_profile_package_predicts_in_notebook_06(small, compile_cache, notebook_02, tmp_path):
    trained = text_outputs(
        execute(
            tmp_path,
            "05_train_on_tpu.ipynb",
            DATA_ROOT=str(small),
            OUTPUT_DIR=str(tmp_path / "train"),
            COMPILE_CACHE=str(compile_cache),
            **FULL,
        )
    )
    loaded = re.search(r"compile cache: (\d+) compiled program\(s\) loaded", trained)
    assert loaded and int(loaded[1]) >= 3, trained
    assert len(list(compile_cache.rglob("jit_train_step-*"))) == 1  # 05 trained with what 02 compiled
    manifest = package.read_manifest(tmp_path / "train" / "model-package")
    assert (
        manifest["training"]["precision"] == "mixed_bfloat16"
        and manifest["model_name"] == "efficientnetb0"  # build_model names it after MODEL
    )
    out = text_outputs(
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            output="06.ipynb",
            DATA_ROOT=str(small),
            PACKAGES=str(tmp_path / "train" / "model-package"),
            BACKEND="tensorflow",
            OUTPUT_DIR=str(tmp_path / "submit"),
        )
    )
    assert "checked its outputs against the manifest" in out
    submitted = results.read_csv(tmp_path / "submit" / "submission.csv")
    assert submitted == results.read_csv(tmp_path / "train" / "submission.csv")  # what 05 predicted
    assert [i for i, _ in submitted[1]] == split_keys(small, "test", SIZE)
