"""Shared test helpers: running Python in a fresh process (each Keras backend and device split
can be chosen only once per process)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import jupytext
import nbformat
import nbval.kernel
import nbval.plugin
import papermill
import pytest
from jupyter_client import KernelManager

from nbkit.publish.engine import _ENGINE_NAME as ENGINE

REPO = Path(__file__).resolve().parents[1]
# No kagglehub in tests (the kagglehub tests turn it back on against a stub): a machine with Kaggle
# credentials would otherwise download the competition while nbval runs the notebooks.
os.environ["NBKIT_KAGGLEHUB"] = "off"
# `import tensorflow` sets TF_CPP_MIN_LOG_LEVEL=1 in its process when it is unset, and every kernel the tests
# start inherits this process's environment: a test importing TensorFlow here would change what nbval's
# notebooks print (accel.setup lists the variable). nbkit's own default, as a user's kernel has it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every kernel of the tests listens on socket files, not TCP ports: two test lanes run at once and JAX's
# Gloo opens sockets, and a kernel's port could be taken before it binds it (nbkit/publish/engine.py).
# papermill's runs take nbkit's engine (PAPERMILL: papermill's command line with it); nbval's kernels
# come from nbval.kernel's KernelManager.
PAPERMILL = [sys.executable, "-m", "nbkit.publish.engine"]
NBVAL_KERNEL_SOCKETS = tempfile.TemporaryDirectory(prefix="nbkit-nbval-kernels-")
nbval.kernel.KernelManager = functools.partial(KernelManager, transport="ipc", ip=f"{NBVAL_KERNEL_SOCKETS.name}/kernel")
# C++ libraries' log lines (`E0000 12:00:00.000 123 util.cc:131] oneDNN supports DT_INT64 only ...`; SentencePiece's
# `normalizer.cc(51) LOG(INFO) ...`) reach a cell's stderr from whatever thread logs them, in one run and not the
# next: nbval compares what Python printed.
NATIVE_LOG_LINE = re.compile(
    r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\]|[\w.]+\.cc\(\d+\) LOG\(\w+\)).*\n?", re.M
)
_compare_outputs = nbval.plugin.IPyNbCell.compare_outputs


def _without_native_logs(outputs: list) -> list:
    kept = []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            output = nbformat.from_dict({**output, "text": NATIVE_LOG_LINE.sub("", output["text"])})
            if not output["text"].strip():
                continue
        kept.append(output)
    return kept


nbval.plugin.IPyNbCell.compare_outputs = lambda self, test, ref, skip_compare=None: _compare_outputs(
    self, _without_native_logs(test), _without_native_logs(ref), skip_compare
)


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without the variables nbkit reads to choose devices and backends."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KERAS_BACKEND", "XLA_FLAGS", "ISTPUVM", "TPU_NAME", "COLAB_TPU_ADDR")
    }
    env.update(extra)
    return env


@pytest.fixture
def run_python():
    """Run a Python snippet in a new interpreter; return the CompletedProcess (stdout+stderr text)."""

    def run(code: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            cwd=REPO,
            env=clean_env(**env),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"snippet failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    return run


# Data mistakes every flowers notebook must stop on before training: (parameters, DataError text).
BAD_DATA_CASES = [
    ({"DATA_ROOT": "/nonexistent/flowers"}, "DATA_ROOT='/nonexistent/flowers' does not exist"),
    ({"IMAGE_SIZE": 224, "DATA_ROOT": "sample"}, "No tfrecords-jpeg-224x224 folder in"),
]


# The notebooks that keep JAX's compiled programs in COMPILE_CACHE ("auto": OUTPUT_DIR/compile-cache). Their runs
# here share the one cache tools/matrix.py gives every process instead (each fold, rerun and edit of 02 and 05 on
# the same shapes loads what the first compiled), unless a test names COMPILE_CACHE: those testing the cache do.
KEEPS_A_COMPILE_CACHE = ("02_flowers_classifier.ipynb", "05_train_on_tpu.ipynb", "08_text_classifier.ipynb")
SHARED_CACHE = "JAX_COMPILATION_CACHE_DIR"


def execute(tmp_path: Path, notebook: str | Path, output: str = "out.ipynb", **params: object) -> Path:
    """Run a notebook (a name in notebooks/, or a path) with papermill into tmp_path/output, with tmp_path/work as
    its working folder (NBKIT_WORKING_DIR: the generated sample, default outputs), from the repository root.
    PYTHONFAULTHANDLER makes a kernel that crashes print a native stack (there is no retry: a kernel
    that dies fails the test)."""
    output_path = tmp_path / output
    kernel_env = {"PYTHONFAULTHANDLER": "1", "NBKIT_WORKING_DIR": str(tmp_path / "work")}
    if notebook in KEEPS_A_COMPILE_CACHE and "COMPILE_CACHE" not in params and os.environ.get(SHARED_CACHE):
        params["COMPILE_CACHE"] = os.environ[SHARED_CACHE]  # "a folder several runs share" (its comment)
    with mock.patch.dict(os.environ, kernel_env):  # the kernel inherits this process's environment
        papermill.execute_notebook(
            str(REPO / "notebooks" / notebook),
            str(output_path),
            parameters=params,
            kernel_name="python3",
            engine_name=ENGINE,
            cwd=str(REPO),
            progress_bar=False,
        )
    return output_path


def kill_notebook_when(
    tmp_path: Path,
    notebook: str,
    ready: Callable[[], bool],
    within_s: float,
    what: str,
    after_s: float = 0,
    **params: object,
) -> None:
    """Run a notebook with the papermill CLI (a process session of its own, working folder as in
    `execute`) and SIGKILL it and its kernel, a real unannounced end, `after_s` seconds after
    `ready()` is true; return once both are gone. Fails the test if the run ends first, or `what` has
    not happened within `within_s` seconds. The kernel is killed first and on its own: jupyter_client
    starts it in a session of its own, and ipykernel notices its parent's death only up to a second
    later, time enough to write another checkpoint after the test has looked."""
    arguments = [item for name, value in params.items() for item in ("-p", name, str(value))]
    process = subprocess.Popen(
        [*PAPERMILL, str(REPO / "notebooks" / notebook), str(tmp_path / "killed.ipynb"), *arguments]
        + ["--cwd", str(REPO), "-k", "python3"],
        env={**os.environ, "NBKIT_WORKING_DIR": str(tmp_path / "work")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + within_s
    try:
        while not ready():
            assert process.poll() is None, f"{notebook} ended before it could be killed"
            assert time.monotonic() < deadline, f"{what} within {within_s:.0f} s"
            time.sleep(0.1)
        time.sleep(after_s)
    finally:
        kernels = children(process.pid)
        for pid in kernels:
            with contextlib.suppress(ProcessLookupError):  # it may have ended by itself
                os.killpg(os.getpgid(pid), signal.SIGKILL)  # the kernel leads a session of its own
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for pid in kernels:
            wait_gone(pid)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux: read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # a process that ended while listed
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def wait_gone(pid: int, within_s: float = 30) -> None:
    """Wait until process `pid` has ended (gone, or a zombie whose parent has not reaped it yet)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs {within_s:.0f} s after SIGKILL")


def text_outputs(path: Path) -> str:
    notebook = jupytext.read(path)
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)


def record_items(files: list, labeled: bool) -> list:
    """(JPEG bytes, class or id) of every record of `files`, each checked as the notebooks check it."""
    from nbkit import tfrecord
    from nbkit.images import checks

    return [
        checks._record_item(raw, labeled, f"{name}: record {index}")[:2]
        for name in map(str, files)
        for index, raw in enumerate(tfrecord.read_records(name))
    ]


def check_data(root, image_size: int, num_classes: int, names=("train", "val", "test"), keep_items: bool = False):
    """`checks.check_splits` of the splits `names` under `root`, as the notebooks call it."""
    from nbkit.images import checks, layout

    return checks.check_splits(layout.split_files(root, image_size, names=names), image_size, num_classes, keep_items)


def split_keys(root: Path, split: str, image_size: int = 192, num_classes: int = 104) -> list:
    """The labels (or, for test, the ids) of a split's records, in file order."""
    found = check_data(root, image_size, num_classes, names=[split], keep_items=True)[split]
    return [key for _, key in found.items]


def sample_test_accuracy(rows: list, num_classes: int = 104) -> float:
    """The share of a submission's (id, label) rows that name the class the generated sample drew for that
    test picture: nbkit.images.sample draws test picture i's class (id `0002<i in 5 hex digits>`, seed 0)
    as numpy's default_rng(1).integers(0, num_classes, 104)[i]. A known answer, not the notebook's."""
    import numpy as np

    drawn = np.random.default_rng(1).integers(0, num_classes, 104)
    assert all(i.startswith("0002") for i, _ in rows), rows[:3]
    return float(np.mean([int(label) == drawn[int(i[-5:], 16)] for i, label in rows]))


def check_submission(sample_dir: Path, output_dir: Path, files: tuple[str, ...], image_size: int = 192) -> dict:
    """A run's outputs: metrics.json (accuracy above 3x chance on the learnable sample), submission.csv
    (`id,label`) with one row per test record in file order, whose labels are right about as often as
    validation's (the sample's test classes are known), and the non-empty `files`."""
    import csv
    import json

    metrics = json.loads((output_dir / "metrics.json").read_text())
    assert metrics["accuracy"] >= 3 / 104, metrics
    with open(output_dir / "submission.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    assert header == ["id", "label"]
    assert [i for i, _ in rows] == split_keys(sample_dir, "test", image_size)
    assert sample_test_accuracy(rows) >= max(3 / 104, metrics["accuracy"] / 3), metrics
    for name in files:
        assert (output_dir / name).stat().st_size > 0, name
    return metrics


def check_04_learned_and_submitted(sample_dir: Path, out: str, output_dir: Path, image_size: int = 192) -> dict:
    """Notebook 04's run on the sample in `sample_dir`: it learnt, its saved weights predict as it did, and its
    outputs (`check_submission`); metrics.json."""
    assert "learned (validation accuracy above 3x chance): True" in out
    assert "the saved weights predict the same on the CPU: True" in out
    files = (
        "model.pt",
        "batch.png",
        "training_curves.png",
        "learning_rate.png",
        "confusion_matrix.png",
        "predictions.png",
    )
    return check_submission(sample_dir, output_dir, files, image_size)
