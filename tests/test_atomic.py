"""Writes a crash or a kill cannot leave half done: partial files, staged folders, and a run's outputs
published all at once (nbkit.atomic)."""

from __future__ import annotations

import pytest

from nbkit import atomic
from nbkit.errors import ParameterError


def test_replacing_keeps_the_old_file_when_the_write_fails(tmp_path):
    target = atomic.write_text(tmp_path / "a" / "metrics.json", "old")
    with pytest.raises(RuntimeError), atomic.replacing(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(p.name for p in target.parent.iterdir()) == ["metrics.json"]
    assert atomic.partial_path(target).name == ".partial-metrics.json"  # hidden, suffix kept


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def first_run(folder):
    outputs = atomic.RunOutputs(folder)
    (outputs / "submission.csv").write_text("id,label\na,1\n")
    (outputs / "model-package").mkdir()
    (outputs / "model-package" / "model.keras").write_bytes(b"first")
    (folder / "checkpoints").mkdir()  # written in place, never staged
    (folder / "checkpoints" / "state.json").write_text("{}")
    assert outputs.publish() == ["model-package", "submission.csv"]
    return snapshot(folder)


def test_a_failed_run_leaves_the_previous_outputs_exactly_as_they_were(tmp_path):
    folder = tmp_path / "flowers"
    before = first_run(folder)
    failed = atomic.RunOutputs(folder)
    (failed / "submission.csv").write_text("id,label\nb,2\n")
    (failed / "confusion_matrix.png").write_bytes(b"png")  # ... then the run dies before publish()
    assert snapshot(folder) == {
        **before,
        ".incomplete-run/confusion_matrix.png": b"png",
        ".incomplete-run/submission.csv": b"id,label\nb,2\n",
    }
    again = atomic.RunOutputs(folder)  # the next run says where the failed run's files are
    assert "did not finish: its partial outputs are in" in again.describe() and (folder / ".failed-run").is_dir()
    assert (folder / ".failed-run" / "submission.csv").read_text() == "id,label\nb,2\n"
    (again / "submission.csv").write_text("id,label\nc,3\n")
    (again / "model-package").mkdir()
    (again / "model-package" / "model.keras").write_bytes(b"third")
    again.publish()
    assert (folder / "submission.csv").read_text() == "id,label\nc,3\n"
    assert (folder / "model-package" / "model.keras").read_bytes() == b"third"
    assert (folder / "checkpoints" / "state.json").exists() and not (folder / ".incomplete-run").exists()


def test_an_output_folder_that_is_a_file_is_a_parameter_error(tmp_path):
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(ParameterError, match="OUTPUT_DIR=.*out' is a file, not a folder"):
        atomic.RunOutputs(tmp_path / "out")
