"""Notebooks 05 -> 06: train TPU-shaped (JAX, 8 replicas), write the model package, predict with
TensorFlow from the package; and a training run killed mid-way that resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import papermill
import pytest
from conftest import execute, kill_notebook_when, split_keys, text_outputs

from nbkit.handoff import package, resume
from nbkit.images import sample as flower_sample
from nbkit.images import submission

EPOCHS = 5
TRAIN = dict(BACKEND="jax", SIMULATE_DEVICES=8, EPOCHS=EPOCHS)  # Kaggle's TPUs today: Keras on JAX, 8 cores


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return flower_sample.make_sample(tmp_path_factory.mktemp("flowers"), 104)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample) -> Path:
    """An uninterrupted run of notebook 05; returns its OUTPUT_DIR."""
    tmp = tmp_path_factory.mktemp("trained")
    execute(tmp, "05_train_on_tpu.ipynb", DATA_ROOT=str(sample), OUTPUT_DIR=str(tmp / "train"), **TRAIN)
    return tmp / "train"


def state(output_dir: Path) -> dict:
    return json.loads((output_dir / "checkpoints" / resume.STATE_FILE).read_text())


def test_06_predicts_with_tensorflow_what_05_trained_with_jax(trained, sample, tmp_path):
    manifest = package.read_manifest(trained / "model-package")
    assert manifest["trained_with"]["keras_backend"] == "jax" and manifest["training"]["replicas"] == 8
    assert manifest["training"]["epochs"] == EPOCHS and manifest["metrics"]["accuracy"] >= 3 / 104
    out = text_outputs(
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            PACKAGES=str(trained / "model-package"),
            DATA_ROOT=str(sample),
            BACKEND="tensorflow",
            OUTPUT_DIR=str(tmp_path / "submit"),
        )
    )
    assert "Keras backend tensorflow" in " ".join(out.split())
    assert "checked its outputs against the manifest" in out
    submitted = submission.read(tmp_path / "submit" / "submission.csv")
    assert [i for i, _ in submitted[1]] == split_keys(sample, "test")
    assert submitted == submission.read(trained / "submission.csv")  # the same predictions as in 05
    assert (tmp_path / "submit" / "test_predictions.png").stat().st_size > 0


def test_training_killed_mid_way_resumes_and_ends_like_an_uninterrupted_run(trained, sample, tmp_path):
    output_dir = tmp_path / "train"
    state_file = output_dir / "checkpoints" / resume.STATE_FILE
    kill_notebook_when(
        tmp_path,
        "05_train_on_tpu.ipynb",
        lambda: state_file.exists() and state(output_dir)["epochs_done"] >= 2,
        within_s=400,
        what="no checkpoint of epoch 2",
        **{**TRAIN, "DATA_ROOT": str(sample), "OUTPUT_DIR": str(output_dir)},
    )
    killed_at = state(output_dir)["epochs_done"]
    assert 2 <= killed_at < EPOCHS, f"the kill came too late ({killed_at} epochs done)"

    out = text_outputs(
        execute(
            tmp_path,
            "05_train_on_tpu.ipynb",
            output="resumed.ipynb",
            DATA_ROOT=str(sample),
            OUTPUT_DIR=str(output_dir),
            **TRAIN,
        )
    )
    assert f"resuming after epoch {killed_at} of {EPOCHS}" in out
    assert "compiled program(s) loaded" in out  # the killed run's compile cache, in OUTPUT_DIR/compile-cache
    epochs_run = [line.split()[1] for line in out.splitlines() if line.startswith("Epoch ")]
    assert epochs_run == [f"{e}/{EPOCHS}" for e in range(killed_at + 1, EPOCHS + 1)]

    resumed, uninterrupted = state(output_dir), state(trained)
    assert resumed["epochs_done"] == EPOCHS and resumed["settings"] == uninterrupted["settings"]
    for key in ("loss", "val_loss", "learning_rate"):
        assert np.allclose(resumed["history"][key], uninterrupted["history"][key], rtol=1e-3), key
    accuracy = [package.read_manifest(d / "model-package")["metrics"]["accuracy"] for d in (output_dir, trained)]
    assert abs(accuracy[0] - accuracy[1]) <= 0.02, accuracy


def test_a_finished_run_is_not_trained_again(trained, sample, tmp_path):
    before = state(trained)
    weights = trained / "checkpoints" / before["weights_file"]
    modified = weights.stat().st_mtime_ns
    out = text_outputs(
        execute(tmp_path, "05_train_on_tpu.ipynb", DATA_ROOT=str(sample), OUTPUT_DIR=str(trained), **TRAIN)
    )
    assert f"finished earlier: {EPOCHS} epochs done" in out
    assert not [line for line in out.splitlines() if line.startswith("Epoch ")]
    assert state(trained) == before and weights.stat().st_mtime_ns == modified


def rerun_refused(trained: Path, sample: Path, tmp_path: Path, **changed: object) -> pytest.ExceptionInfo:
    """The error (ExceptionInfo) of notebook 05 run again on the finished run's folder with `changed` settings."""
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(
            tmp_path, "05_train_on_tpu.ipynb", DATA_ROOT=str(sample), OUTPUT_DIR=str(trained), **{**TRAIN, **changed}
        )
    return error


def test_a_misspelt_model_is_named_before_any_resume_check(trained, sample, tmp_path):
    error = rerun_refused(trained, sample, tmp_path, MODEL="EfficientNetB9")
    assert error.value.ename == "ParameterError" and "MODEL='EfficientNetB9' is not offered" in error.value.evalue


def test_06_stops_at_once_on_an_output_folder_it_cannot_write(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, "06_infer_on_gpu.ipynb", OUTPUT_DIR=str(tmp_path / "a-file" / "out"))
    assert error.value.ename == "ParameterError" and "cannot be written (Not a directory)" in error.value.evalue
    assert "params.check_parameters(globals())" in error.value.source  # the first cell: nothing loaded yet


def test_05_refuses_to_resume_with_other_settings(trained, sample, tmp_path):
    error = rerun_refused(trained, sample, tmp_path, PER_REPLICA_BATCH=8)
    assert error.value.ename == "ResumeError"
    assert "global_batch: checkpoint 128, now 64" in error.value.evalue and "RESUME='restart'" in error.value.evalue


def copy_without_model(trained: Path, tmp_path: Path) -> Path:
    damaged = shutil.copytree(trained / "model-package", tmp_path / "damaged")
    (damaged / "model.keras").unlink()
    return damaged


@pytest.mark.parametrize(
    "params, message",
    [
        (lambda trained, tmp: {"PACKAGES": str(tmp / "nowhere")}, "No model package at"),
        (lambda trained, tmp: {"PACKAGES": str(trained / "model-package"), "IMAGE_SIZE": 224}, "takes 192x192 images"),
        (lambda trained, tmp: {"PACKAGES": str(copy_without_model(trained, tmp))}, "lacks model.keras"),
    ],
    ids=["missing", "image-size", "incomplete"],
)
def test_06_stops_on_a_package_that_cannot_be_used(trained, sample, tmp_path, params, message):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            DATA_ROOT=str(sample),
            OUTPUT_DIR=str(tmp_path / "submit"),
            **params(trained, tmp_path),
        )
    assert error.value.ename == "PackageError" and message in error.value.evalue
    assert not (tmp_path / "submit" / "submission.csv").exists()
