"""`python -m nbkit launch` (nbkit.publish.launch) with a small stand-in notebook: each process gets
its place in the run and its devices; one that fails, dies or hangs stops the whole run, naming it,
and nothing of the run is left running."""

import nbformat
import psutil
import pytest
from conftest import REPO

from nbkit.errors import ParameterError, RunError
from nbkit.publish import cli, launch

CODE = """
import json, os, signal, time
from ipykernel.connect import get_connection_info
index = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
print("kernel on", json.loads(get_connection_info())["transport"])
print("place", os.environ["KERAS_DISTRIBUTION_JOB_ADDRESSES"], os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"], index)
print("parameters", BACKEND, SIMULATE_DEVICES, "token", os.environ.get("NBKIT_TEST_TOKEN"), flush=True)
if MODE == "fail" or (MODE == "fail_on_1" and index == 1):
    raise ValueError("boom")
if MODE == "die_on_1" and index == 1:
    os.kill(os.getpid(), signal.SIGKILL)
if MODE != "ok":
    time.sleep(600)
"""


def stand_in(tmp_path, mode):
    """A notebook that prints its place in the run, then does what `mode` says."""
    parameters = nbformat.v4.new_code_cell('BACKEND = "auto"\nSIMULATE_DEVICES = 0\nMODE = "ok"')
    parameters.metadata["tags"] = ["parameters"]
    notebook = nbformat.v4.new_notebook(cells=[parameters, nbformat.v4.new_code_cell(CODE)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "stand_in.ipynb"
    nbformat.write(notebook, path)
    return path


def run(tmp_path, mode, capsys=None, **options):
    options = {"out": tmp_path / "out", "parameters": [("MODE", mode)], **options}
    return launch.launch(stand_in(tmp_path, mode), 2, 3, **options)


def assert_nothing_left(monkeypatch):
    """Record every process `launch._stop` found, and return a check that none is alive."""
    found = []
    original = launch._stop

    def recording(started):
        for process in started:
            try:
                parent = psutil.Process(process.popen.pid)
                found.extend([parent.pid, *(c.pid for c in parent.children(recursive=True))])
            except psutil.NoSuchProcess:
                pass
        original(started)

    monkeypatch.setattr(launch, "_stop", recording)
    return lambda: (
        found and not [pid for pid in found if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    )


def test_each_process_gets_its_place_and_its_devices(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NBKIT_TEST_TOKEN", "s3cr3t-value-0123456789")
    started = run(tmp_path, "ok")
    streamed = capsys.readouterr().out
    assert "token [REDACTED]" in streamed and "s3cr3t-value" not in streamed  # secrets stay out of the log
    places = [line.split("place ", 1)[1] for line in streamed.splitlines() if "place " in line]
    address = places[0].split()[0]
    assert sorted(places) == [f"{address} 2 0", f"{address} 2 1"] and address.startswith("127.0.0.1:")
    assert 20000 <= int(address.split(":")[1]) < 32768  # below Linux's ephemeral ports: nothing takes it meanwhile
    assert streamed.count("kernel on ipc") == 2  # socket files: no TCP ports for the two kernels to race for
    assert streamed.count("parameters jax 3 token") == 2  # BACKEND and SIMULATE_DEVICES given by the launcher
    assert {line[:5] for line in streamed.splitlines() if "place" in line} == {"[p0] ", "[p1] "}
    assert [p.notebook.name for p in started] == ["stand_in.p0.ipynb", "stand_in.p1.ipynb"]
    assert all(p.notebook.exists() and p.popen.returncode == 0 for p in started)
    assert "process 1: " in launch.describe(started)


@pytest.mark.parametrize("mode, words", [("fail_on_1", "boom"), ("die_on_1", "its kernel died")])
def test_one_process_failing_stops_the_whole_run_and_is_named(tmp_path, monkeypatch, mode, words):
    nothing_left = assert_nothing_left(monkeypatch)
    monkeypatch.setattr(launch, "_SETTLE_S", 1)  # process 0 sleeps: it would never end on its own
    with pytest.raises(RunError) as error:
        run(tmp_path, mode)  # process 0 would sleep for 10 minutes
    assert "process 1 failed" in str(error.value) and words in str(error.value)
    assert "stand_in.p1.ipynb" in str(error.value) and "Every other process of the run was stopped" in str(error.value)
    assert nothing_left()


def test_a_hang_past_the_timeout_stops_the_whole_run(tmp_path, monkeypatch):
    nothing_left = assert_nothing_left(monkeypatch)
    with pytest.raises(RunError, match="timeout of 4 s with process\\(es\\) 0, 1 still running"):
        run(tmp_path, "hang", timeout_s=4)
    assert nothing_left()


@pytest.mark.parametrize(
    "arguments, words",
    [
        (["nope.py"], "No notebook nope.ipynb"),
        (["{nb}", "--processes", "0"], "--processes 0 --devices-per-process 4: both must be at least 1"),
        (["{nb}", "-p", "BACKEND", "tensorflow"], "-p BACKEND tensorflow: launch sets it to jax (JAX's runtime"),
        (["{nb}", "-p", "SIMULATE_DEVICES", "8"], "-p SIMULATE_DEVICES 8: launch sets it to 4"),
        # Issue 35 #16 and #20: raw tracebacks before, and 06/07 failing on the parameters launch adds
        (["{nb}", "--timeout", "-1"], "--timeout -1: give the seconds the run may take, more than 0"),
        (["{nb}", "--out", "{nb}"], "no folder for the executed notebooks there (File exists)"),
        (
            ["{repo}/notebooks/06_infer_on_gpu.py"],
            "06_infer_on_gpu.ipynb cannot run as several processes: it has no SIMULATE_DEVICES parameter",
        ),
        (["{repo}/notebooks/07_make_tfrecords.py"], "has no BACKEND or SIMULATE_DEVICES parameter"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, monkeypatch, capsys, arguments, words):
    monkeypatch.chdir(tmp_path)
    notebook = str(stand_in(tmp_path, "ok"))
    assert cli.main(["launch", *(a.format(nb=notebook, repo=REPO) for a in arguments)]) == 1
    assert words in capsys.readouterr().err and not (tmp_path / "out").exists()
    with pytest.raises(ParameterError, match="No notebook .*nope.ipynb: give notebooks/NN_name.py"):
        launch.launch(tmp_path / "nope.ipynb", 2, 4)


def test_a_sigterm_to_the_launcher_stops_every_process(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from conftest import REPO

    launcher = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "launch", str(stand_in(tmp_path, "hang")), "-p", "MODE", "hang"]
        + ["--devices-per-process", "1", "--out", str(tmp_path / "out")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while (
        len([c for c in psutil.Process(launcher.pid).children(recursive=True) if "ipykernel" in " ".join(c.cmdline())])
        < 2
    ):
        assert time.monotonic() < deadline and launcher.poll() is None, "the kernels did not start"
        time.sleep(0.2)
    tree = psutil.Process(launcher.pid).children(recursive=True)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs(tree, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_make_demo_runs_papermill_through_the_engine_the_tests_and_launch_use():
    """Issue 35 #26: `make demo` ran plain papermill (jupyter's "running over TCP without encryption" warning)."""
    recipe = (REPO / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    runs = [
        line.split() for line in recipe.splitlines() if "02_flowers_classifier.ipynb" in line and "echo" not in line
    ]
    assert len(runs) == 1 and runs[0][:3] == ["$(BIN)/python", "-m", "nbkit.publish.engine"], recipe
