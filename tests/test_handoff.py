"""Notebooks 05 -> 06: train TPU-shaped (JAX, 8 replicas), write the model package, predict with
TensorFlow from the package; notebook 02 on a pod slice in miniature (2 processes x 4 devices) against
1 x 8; and a 2-process training run killed mid-way that stops whole and resumes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import papermill
import pytest
from conftest import REPO, check_data, execute, sample_test_accuracy, split_keys, text_outputs, wait_gone

from nbkit import metrics
from nbkit.handoff import package, resume
from nbkit.images import sample as flower_sample

EPOCHS = 4
TRAIN = dict(BACKEND="jax", SIMULATE_DEVICES=8, EPOCHS=EPOCHS)  # Kaggle's TPUs today: Keras on JAX, 8 cores


# The sample at 48 px: notebook 02's and 05's small CNN reads any size (the full profile's EfficientNet runs in
# Kaggle's lane), and a sixteenth of the JPEG decoding leaves the runs to the training and the hand-off they test.
SIZE = 48


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    return flower_sample.make_sample(tmp_path_factory.mktemp("flowers"), 104, image_sizes=(SIZE,))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample) -> Path:
    """An uninterrupted run of notebook 05; returns its OUTPUT_DIR."""
    tmp = tmp_path_factory.mktemp("trained")
    execute(tmp, "05_train_on_tpu.ipynb", DATA_ROOT=str(sample), OUTPUT_DIR=str(tmp / "train"), **TRAIN)
    return tmp / "train"


def state(output_dir: Path) -> dict:
    return json.loads((output_dir / "checkpoints" / resume._STATE_FILE).read_text())


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
    assert f"loaded small_cnn from {trained / 'model-package'}, checked its outputs against the manifest" in out
    submitted = metrics.read_csv(tmp_path / "submit" / "submission.csv")
    assert [i for i, _ in submitted[1]] == split_keys(sample, "test", SIZE)
    assert submitted == metrics.read_csv(trained / "submission.csv")  # the same predictions as in 05
    # right about as often as on validation: the sample's test classes are known
    assert sample_test_accuracy(submitted[1]) >= max(3 / 104, manifest["metrics"]["accuracy"] / 3)
    assert (tmp_path / "submit" / "test_predictions.png").stat().st_size > 0


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


def test_06_stops_at_once_on_an_output_folder_it_cannot_write(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, "06_infer_on_gpu.ipynb", OUTPUT_DIR=str(tmp_path / "a-file" / "out"))
    assert error.value.ename == "ParameterError" and "cannot be written (Not a directory)" in error.value.evalue
    assert "params.check_parameters(" in error.value.source  # the first cell: nothing loaded yet


def test_05_refuses_to_resume_with_other_settings(trained, sample, tmp_path):
    error = rerun_refused(trained, sample, tmp_path, PER_REPLICA_BATCH=8)
    assert error.value.ename == "DataError"
    assert "global_batch: checkpoint 128, now 64" in error.value.evalue and "RESUME='restart'" in error.value.evalue


def good_then_damaged(trained: Path, tmp_path: Path) -> str:
    """A good package, then one whose model.keras is damaged (issue 35 #12: found after predicting with the first)."""
    damaged = shutil.copytree(trained / "model-package", tmp_path / "damaged")
    (damaged / "model.keras").write_bytes((damaged / "model.keras").read_bytes()[:2000])
    manifest = json.loads((damaged / "manifest.json").read_text())
    (damaged / "manifest.json").write_text(json.dumps({**manifest, "created": "another run"}))  # not a copy
    return f"{trained / 'model-package'},{damaged}"


def trained_without_flips(trained: Path, tmp_path: Path) -> str:
    """05's package, its manifest saying AUGMENT='none' (a mirrored picture shows something else there)."""
    unmirrored = shutil.copytree(trained / "model-package", tmp_path / "unmirrored")
    manifest = json.loads((unmirrored / "manifest.json").read_text())
    manifest["training"]["augment"] = "none"
    (unmirrored / "manifest.json").write_text(json.dumps(manifest))
    return str(unmirrored)


@pytest.mark.parametrize(
    "params, error_name, message",
    [
        (lambda trained, tmp: {"PACKAGES": good_then_damaged(trained, tmp)}, "DataError", "Could not load"),
        (  # issue 45 #6: TTA's mirrored view for a model trained without flips
            lambda trained, tmp: {"PACKAGES": trained_without_flips(trained, tmp), "TTA": 2},
            "ParameterError",
            "TTA=2: .*unmirrored trained with AUGMENT='none'.*Use TTA=1",
        ),
    ],
    ids=["damaged-last", "tta-mirrors-a-model-trained-without-flips"],
)
def test_06_stops_on_a_package_that_cannot_be_used(trained, sample, tmp_path, params, error_name, message):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            DATA_ROOT=str(sample),
            OUTPUT_DIR=str(tmp_path / "submit"),
            **params(trained, tmp_path),
        )
    assert error.value.ename == error_name and re.search(message, error.value.evalue)
    assert not (tmp_path / "submit" / "submission.csv").exists()
    assert "predicted" not in text_outputs(tmp_path / "out.ipynb")  # stopped before any model predicted


def test_06_reads_and_checks_every_package_and_the_data_before_any_model_predicts():
    """The package errors test_package pins (a missing package, one without model.keras, another image
    size, members that disagree) come from these calls, which 06 makes in this order: before loading any
    model, and every model loaded before the first predicts (the damaged-last case above, run whole)."""
    source = (REPO / "notebooks" / "06_infer_on_gpu.py").read_text()
    calls = ["ensemble.find_packages(", "package.read_manifest(", "ensemble.check_same(", "ensemble.check_compatible("]
    calls += ["flowers.load_data(", "ensemble.load_package(", "predict_tta(model, test)", "metrics.write_submission("]
    positions = [source.find(call) for call in calls]
    assert -1 not in positions and positions == sorted(positions), dict(zip(calls, positions))


# ---- a pod slice in miniature: 2 processes x 4 devices, joined by JAX's runtime (python -m nbkit launch) ----


def launch(tmp_path: Path, notebook: str, name: str, processes: int = 2, **params: object) -> subprocess.Popen:
    """`python -m nbkit launch` of a notebook as `processes` processes sharing 8 devices (working folder
    as in `execute`), its output in tmp_path/<name>.log."""
    arguments = [item for key, value in params.items() for item in ("-p", key, str(value))]
    arguments += ["--processes", str(processes), "--devices-per-process", str(8 // processes)]
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 (closed with the process, by the caller's wait)
    return subprocess.Popen(
        [sys.executable, "-m", "nbkit", "launch", str(REPO / "notebooks" / notebook), *arguments]
        + ["--out", str(tmp_path / name), "--timeout", "600"],
        cwd=REPO,
        env={**os.environ, "NBKIT_WORKING_DIR": str(tmp_path / "work")},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def epoch_losses(executed: Path) -> list[float]:
    """The training loss of each epoch, as `fit(verbose=2)` printed it."""
    return [
        float(line.split(" - loss: ")[1].split()[0])
        for line in text_outputs(executed).splitlines()
        if " - loss: " in line
    ]


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory, sample) -> Path:
    """Notebook 02 with 05's settings launched as 2 processes x 4 devices, and as 1 process x 8 devices
    through the same runtime (tmp/launched/, tmp/one-launched/); returns their tmp folder."""
    tmp = tmp_path_factory.mktemp("two-hosts")
    for processes, name in ((2, "launched"), (1, "one-launched")):
        params = {**TRAIN, "DATA_ROOT": sample, "OUTPUT_DIR": tmp / f"{name}-classifier"}
        params.pop("SIMULATE_DEVICES")  # the launcher's
        process = launch(tmp, "02_flowers_classifier.ipynb", name, processes, **params)
        assert process.wait(timeout=900) == 0, (tmp / f"{name}.log").read_text()[-3000:]
    return tmp


def test_02_on_two_hosts_trains_as_on_one_and_process_0_writes_what_both_predicted(two_hosts, trained, sample):
    import keras

    executed = [two_hosts / "launched" / f"02_flowers_classifier.p{i}.ipynb" for i in (0, 1)]
    said = [text_outputs(path) for path in executed]
    assert "process 1 of 2, 4 local devices, 8 global devices" in " ".join(said[1].split())
    # Process 0 published everything once; process 1 wrote nothing anywhere in the folder.
    output_dir, one_host = two_hosts / "launched-classifier", two_hosts / "one-launched-classifier"
    assert {"submission.csv", "metrics.json", "model.keras", "training_curves.png"} <= {
        p.name for p in output_dir.iterdir()
    }
    assert not (output_dir / ".incomplete-run").exists()
    header, rows = metrics.read_csv(output_dir / "submission.csv")
    ids = [i for i, _ in rows]
    assert ids == split_keys(sample, "test", SIZE) and len(set(ids)) == len(ids)  # every test id exactly once, in order

    # 1 x 8 through the same runtime (Gloo's all-reduce over 8 ranks, however they are split into processes):
    # the same training, bit for bit, and the same submission, byte for byte.
    losses = [epoch_losses(path) for path in executed]
    assert losses[0] == losses[1] == epoch_losses(two_hosts / "one-launched" / "02_flowers_classifier.p0.ipynb")
    assert len(losses[0]) == EPOCHS
    models = [keras.saving.load_model(folder / "model.keras") for folder in (output_dir, one_host)]
    assert all(np.array_equal(a, b) for a, b in zip(*(m.get_weights() for m in models), strict=True))
    assert (output_dir / "submission.csv").read_bytes() == (one_host / "submission.csv").read_bytes()
    assert json.loads((output_dir / "metrics.json").read_text()) == json.loads((one_host / "metrics.json").read_text())

    # Against 1 x 8 in one process without the runtime (05's run, XLA's in-process all-reduce) only the order in
    # which the gradients' partial sums are added differs; Adam amplifies it epoch by epoch (measured: equal to 4
    # decimals for 3 epochs, then 3.9882 vs 3.9868).
    alone = state(trained)["history"]["loss"]
    assert np.allclose(losses[0][:3], alone[:3], rtol=1e-4, atol=0) and np.allclose(losses[0], alone, rtol=1e-2)

    # The submission is what the saved model predicts for each row on one device (here): no row of the other
    # process lost, repeated or moved. The images are read back independently of the notebook's pipeline
    # (nbkit.tfrecord's records in file order, decoded by TensorFlow's JPEG decoder as the notebook's is).
    import tensorflow as tf

    jpegs = [jpeg for jpeg, _ in check_data(sample, SIZE, 104, names=("test",), keep_items=True)["test"].items]
    pixels = np.stack([tf.io.decode_jpeg(jpeg, channels=3).numpy() for jpeg in jpegs])
    logits = np.asarray(models[0].predict(pixels, verbose=0), np.float64)
    top_two = np.sort(logits, axis=1)[:, -2:]
    labels = [int(label) for _, label in rows]
    assert all(a == b or gap < 1e-4 for a, b, gap in zip(labels, logits.argmax(1), np.diff(top_two).ravel()))
    assert len(set(labels)) > 1  # a trained model, not one class everywhere


def published(folder: Path) -> dict[str, bytes]:
    """The published files of an output folder (not the lock nor a run's staging folder), with their bytes."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}


def kernel_of(launcher: int, process_id: str) -> int | None:
    """The pid of the Jupyter kernel the launcher started for one process, once it runs."""
    import psutil

    for child in psutil.Process(launcher).children(recursive=True):
        try:
            if "ipykernel_launcher" in " ".join(child.cmdline()) and child.environ().get(PROCESS_ID) == process_id:
                return child.pid
        except psutil.Error:  # ended meanwhile
            continue
    return None


PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"


def test_05_on_two_hosts_killed_stops_whole_and_resumes_as_if_never_stopped(two_hosts, sample, tmp_path):
    """The training killed mid-way (here one host of two, the whole run stopping) resumes and ends like an
    uninterrupted run, loading the killed run's compiled programs."""
    output_dir = tmp_path / "train"
    earlier = shutil.copytree(
        two_hosts / "launched-classifier", output_dir, ignore=shutil.ignore_patterns("compile-cache")
    )
    before = published(earlier)  # a previous run's outputs
    params = {**TRAIN, "DATA_ROOT": sample, "OUTPUT_DIR": output_dir}  # the compile cache in OUTPUT_DIR
    params.pop("SIMULATE_DEVICES")
    state_file = output_dir / "checkpoints" / resume._STATE_FILE
    process = launch(tmp_path, "05_train_on_tpu.ipynb", "killed", **params)
    deadline = time.monotonic() + 600
    # Killed after its first epoch: at 48 px the epochs are short, and three are left to come.
    while not (state_file.exists() and state(output_dir)["epochs_done"] >= 1):
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "killed.log").read_text()[-3000:]
        time.sleep(0.1)
    kernel = kernel_of(process.pid, "1")
    assert kernel is not None, "no kernel of process 1 found"
    os.kill(kernel, signal.SIGKILL)  # host 1 dies mid-training
    killed_at = time.monotonic()
    assert process.wait(timeout=120) != 0
    stopped_within = time.monotonic() - killed_at
    log = (tmp_path / "killed.log").read_text()
    assert "RunError" in log and "process 1" in log and "kernel died" in log, log[-3000:]
    assert stopped_within < 60, stopped_within  # process 0 stopped too, not left waiting in a collective
    wait_gone(kernel)
    done = state(output_dir)["epochs_done"]
    assert 1 <= done < EPOCHS, f"the kill came too late ({done} epochs done)"
    assert published(output_dir) == before and (output_dir / ".incomplete-run").is_dir()  # the killed run's, aside

    process = launch(tmp_path, "05_train_on_tpu.ipynb", "resumed", **params)
    assert process.wait(timeout=900) == 0, (tmp_path / "resumed.log").read_text()[-3000:]
    said = text_outputs(tmp_path / "resumed" / "05_train_on_tpu.p0.ipynb")
    assert f"An earlier run did not finish: its partial outputs are in {output_dir / '.failed-run'}" in said
    assert (output_dir / ".failed-run").is_dir()  # the killed run's (05 stages its files after training)
    assert f"resuming after epoch {done} of {EPOCHS}" in said
    assert "compiled program(s) loaded" in said  # the killed run's compile cache, in OUTPUT_DIR/compile-cache
    epochs_run = [line.split()[1] for line in said.splitlines() if line.startswith("Epoch ")]
    assert epochs_run == [f"{e}/{EPOCHS}" for e in range(done + 1, EPOCHS + 1)]
    resumed = state(output_dir)["history"]["loss"]
    unbroken = epoch_losses(two_hosts / "launched" / "02_flowers_classifier.p0.ipynb")  # 02 trains as 05 does
    assert np.allclose(resumed, unbroken, rtol=1e-4), (resumed, unbroken)
    assert (output_dir / "model-package" / "model.keras").exists() and not (output_dir / ".incomplete-run").exists()
