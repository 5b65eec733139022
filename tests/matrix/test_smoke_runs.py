"""Every Keras notebook's smoke run, and the model hand-off both ways, in whatever environment runs this
file: `make test` runs it in each environment of the version matrix (tools/matrix.py), so the versions
of Kaggle's TPU image, the oldest declared ones and Colab's are each proven on the notebooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import check_submission, execute, text_outputs

from nbkit.handoff import package
from nbkit.images import metrics as results
from nbkit.images import sample as flower_sample

JAX8 = {"BACKEND": "jax", "SIMULATE_DEVICES": 8}  # Kaggle's TPUs today: Keras on JAX, 8 cores
FLOWERS_FILES = (
    "model.keras",
    "batch.png",
    "training_curves.png",
    "input_wait.png",
    "confusion_matrix.png",
    "predictions.png",
)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return flower_sample.make_sample(tmp_path_factory.mktemp("flowers"), 104)


def test_01_tpu_setup_on_eight_jax_devices(tmp_path):
    out = " ".join(text_outputs(execute(tmp_path, "01_tpu_setup.ipynb", **JAX8)).split())
    assert "Keras backend jax, 8 replica(s)" in out and "keras.distribution.DataParallel" in out
    assert out.count("[[22.0, 28.0], [49.0, 64.0]]") == 8 and "global batch 128, " in out
    assert "learned (validation accuracy above 3x chance): True" in out


def test_02_flowers_on_eight_jax_devices_learns_and_submits(made, tmp_path):
    out = text_outputs(
        execute(
            tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(made), OUTPUT_DIR=str(tmp_path / "flowers"), **JAX8
        )
    )
    assert "learned (validation accuracy above 3x chance): True" in out
    assert "Keras backend jax, 8 replica(s)" in " ".join(out.split()) and "global batch 128" in out
    metrics = check_submission(made, tmp_path / "flowers", FLOWERS_FILES)
    assert metrics["replicas"] == 8 and metrics["global_batch"] == 128
    epochs = metrics["epochs"]
    assert [f"input wait, epoch {e}:" in out for e in range(1, epochs + 1)] == [True] * epochs  # the monitor's lines


def test_03_private_dataset_reads_records(tmp_path):
    assert "record 3: {'id': " in text_outputs(execute(tmp_path, "03_private_dataset.ipynb"))


@pytest.mark.parametrize(
    "trained, predicted",
    [(JAX8, {"BACKEND": "tensorflow"}), ({"BACKEND": "tensorflow"}, {"BACKEND": "jax"})],
    ids=["jax8-to-tensorflow", "tensorflow-to-jax"],
)
def test_05_package_predicts_the_same_in_06(made, tmp_path, trained, predicted):
    execute(
        tmp_path, "05_train_on_tpu.ipynb", DATA_ROOT=str(made), OUTPUT_DIR=str(tmp_path / "train"), EPOCHS=2, **trained
    )
    folder = tmp_path / "train" / "model-package"
    assert package.read_manifest(folder)["trained_with"]["keras_backend"] == trained["BACKEND"]
    out = text_outputs(
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            output="06.ipynb",
            DATA_ROOT=str(made),
            PACKAGES=str(folder),
            OUTPUT_DIR=str(tmp_path / "submit"),
            **predicted,
        )
    )
    assert "checked its outputs against the manifest" in out
    submitted = results.read_csv(tmp_path / "submit" / "submission.csv")
    assert submitted == results.read_csv(tmp_path / "train" / "submission.csv")


def test_08_text_on_eight_jax_devices_learns_the_sample_and_submits_in_its_order(tmp_path):
    import csv
    import json

    from nbkit import text_sample

    out = text_outputs(execute(tmp_path, "08_text_classifier.ipynb", OUTPUT_DIR=str(tmp_path / "text"), **JAX8))
    assert "learned (validation accuracy above 1.5x chance): True" in out and "a tiny BERT from scratch" in out
    assert "Keras backend jax, 8 replica(s)" in " ".join(out.split()) and "global batch 128" in out
    assert "of the training examples are longer than 32 tokens and get cut" in out
    folder, sample = tmp_path / "text", tmp_path / "work" / "text-sample"

    def rows(path):
        with open(path, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))

    truth = {r["id"]: text_sample._label_of(r["hypothesis"], r["language"]) for r in rows(sample / "test.csv")}
    submitted = rows(folder / "submission.csv")
    assert [r["id"] for r in submitted] == [r["id"] for r in rows(sample / "sample_submission.csv")]
    assert sum(int(r["prediction"]) == truth[r["id"]] for r in submitted) / len(submitted) > 0.9
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["replicas"] == 8 and metrics["global_batch"] == 128 and metrics["test_rows"] == len(truth)
    per_language = metrics["accuracy_per_language"]
    assert len(per_language) == 15
    weighted = sum(v["accuracy"] * v["examples"] for v in per_language.values()) / sum(
        v["examples"] for v in per_language.values()
    )
    assert weighted == pytest.approx(metrics["accuracy"])  # the languages' accuracies add up to the whole
    for name in (
        "model.keras",
        "training_curves.png",
        "learning_rate.png",
        "confusion_matrix.png",
        "accuracy_per_language.png",
        "input_wait.png",
    ):
        assert (folder / name).is_file(), name
