"""Writes a crash or a kill cannot leave half done: partial files, staged folders, and a run's outputs
published all at once (nbkit.atomic)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nbkit import atomic, staging
from nbkit.errors import ParameterError


def test_replacing_keeps_the_old_file_when_the_write_fails(tmp_path):
    target = atomic.write_text(tmp_path / "a" / "metrics.json", "old")
    with pytest.raises(RuntimeError, match="killed"), atomic.replacing(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(p.name for p in target.parent.iterdir()) == ["metrics.json"]
    assert partial.name == ".partial-metrics.json"  # hidden, suffix kept


def snapshot(folder):
    """Every file under `folder` but the lock file of a run in progress (not an output)."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != staging._LOCK]
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def first_run(folder):
    outputs = staging.start(folder)
    (outputs.staging / "submission.csv").write_text("id,label\na,1\n")
    (outputs.staging / "model-package").mkdir()
    (outputs.staging / "model-package" / "model.keras").write_bytes(b"first")
    (folder / "checkpoints").mkdir()  # written in place, never staged
    (folder / "checkpoints" / "state.json").write_text("{}")
    assert outputs.publish() == ["model-package", "submission.csv"]
    return snapshot(folder)


def test_a_failed_run_leaves_the_previous_outputs_exactly_as_they_were(tmp_path):
    folder = tmp_path / "flowers"
    before = first_run(folder)
    failed = staging.start(folder)
    (failed.staging / "submission.csv").write_text("id,label\nb,2\n")
    (failed.staging / "confusion_matrix.png").write_bytes(b"png")  # ... then the run dies before publish()
    assert snapshot(folder) == {
        **before,
        ".incomplete-run/confusion_matrix.png": b"png",
        ".incomplete-run/submission.csv": b"id,label\nb,2\n",
    }
    again = staging.start(folder)  # the next run says where the failed run's files are
    assert "did not finish: its partial outputs are in" in again.describe() and (folder / ".failed-run").is_dir()
    assert (folder / ".failed-run" / "submission.csv").read_text() == "id,label\nb,2\n"
    (again.staging / "submission.csv").write_text("id,label\nc,3\n")
    (again.staging / "model-package").mkdir()
    (again.staging / "model-package" / "model.keras").write_bytes(b"third")
    again.publish()
    assert (folder / "submission.csv").read_text() == "id,label\nc,3\n"
    assert (folder / "model-package" / "model.keras").read_bytes() == b"third"
    assert (folder / "checkpoints" / "state.json").exists() and not (folder / ".incomplete-run").exists()


def test_a_run_publishes_its_own_outputs_and_nothing_of_the_previous_run_stays_beside_them(tmp_path):
    folder = tmp_path / "flowers"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")  # not a run's output (06 publishes into the working folder)
    first_run(folder)  # a run with a test split: submission.csv, model-package; checkpoints kept in place
    again = staging.start(folder)  # no test split this time: no submission
    assert "The previous run's outputs there (model-package, submission.csv) then move to" in again.describe()
    (again.staging / "metrics.json").write_text("{}")
    assert again.publish() == ["metrics.json"]
    visible = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert visible == ["checkpoints", "metrics.json", "notes.txt"]  # no stale submission beside the new metrics
    assert (folder / ".previous-run" / "submission.csv").read_text() == "id,label\na,1\n"  # kept aside
    assert (folder / ".previous-run" / "model-package" / "model.keras").read_bytes() == b"first"
    assert (folder / "checkpoints" / "state.json").exists()  # resume's state is not an output: it stays
    third = staging.start(folder)
    (third.staging / "metrics.json").write_text('{"run": 3}')
    third.publish()
    assert sorted(p.name for p in (folder / ".previous-run").iterdir()) == ["metrics.json"]  # only the run before
    assert (folder / "metrics.json").read_text() == '{"run": 3}' and (folder / "notes.txt").exists()


def test_an_output_folder_that_is_a_file_is_a_parameter_error(tmp_path):
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(ParameterError, match="OUTPUT_DIR=.*out' is a file, not a folder"):
        staging.start(tmp_path / "out")


@pytest.mark.parametrize("output", ["data", "data/run", "data/../data/run/deeper", "~/data/run"])
def test_an_output_folder_inside_the_data_root_is_refused_before_anything_is_written(tmp_path, monkeypatch, output):
    """Issue 35 #9: outputs inside DATA_ROOT are deleted by the next conversion into DATA_ROOT."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    with pytest.raises(ParameterError, match="OUTPUT_DIR=.* is or lies inside DATA_ROOT='data'"):
        staging.start(output, data_root="data")
    assert [p.name for p in (tmp_path / "data").iterdir()] == []  # nothing made, nothing locked
    for data_root in ("auto", "sample", str(tmp_path / "data" / "run" / "x"), "dat"):
        staging.start("data/run", data_root=data_root).publish()  # no overlap: taken as before


HOLDER = """
import sys, time
from nbkit import staging
outputs = staging.start(sys.argv[1])
(outputs.staging / "plot.png").write_bytes(b"first run")
print("holding", flush=True)
time.sleep(600)
"""


def test_a_folder_in_use_by_another_run_is_refused_until_that_run_dies(tmp_path):
    folder = tmp_path / "flowers"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(ParameterError) as refused:
            staging.start(folder)
        message = str(refused.value)
        assert message.startswith(f"OUTPUT_DIR={str(folder)!r} is in use by another run (pid {holder.pid} on host ")
        assert message.endswith("wait until it finishes (or stop it), or give this run another OUTPUT_DIR.")
        assert (folder / ".incomplete-run" / "plot.png").read_bytes() == b"first run"  # the running run's files stay
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    after = staging.start(folder)  # the killed run's lock died with it
    assert "An earlier run did not finish" in after.describe()
    assert (folder / ".failed-run" / "plot.png").read_bytes() == b"first run"
    assert (folder / ".run.lock").read_text().startswith(f"pid {os.getpid()} on host ")  # this run holds it now
    after.publish()
    assert not (folder / ".run.lock").exists()


def test_a_run_started_again_in_the_same_process_takes_over_its_own_lock(tmp_path):
    first = staging.start(tmp_path / "out")
    (first.staging / "a.txt").write_text("first")  # ... the cell fails, the user runs it again
    again = staging.start(tmp_path / "out")
    assert "An earlier run did not finish" in again.describe()
    (again.staging / "b.txt").write_text("again")
    assert again.publish() == ["b.txt"]
    assert staging.start(tmp_path / "out").publish() == []  # released: the folder is free again


def test_an_output_folder_that_cannot_be_written_is_a_parameter_error(tmp_path, monkeypatch):
    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(ParameterError) as error:
        staging.start(str(tmp_path / "out"))
    assert str(error.value) == (
        f"OUTPUT_DIR={str(tmp_path / 'out')!r} cannot be written (Read-only file system): give a writable folder "
        "(on Kaggle: under /kaggle/working)."
    )


def test_a_folder_under_home_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    outputs = staging.start("~/out")
    assert outputs.folder == tmp_path / "out" and (tmp_path / "out" / ".incomplete-run").is_dir()
    outputs.publish()
