"""The run folder's rule for every notebook (issue 50, item 11 and "also"): a file nbkit did not write is never
replaced in silence. Every notebook takes its OUTPUT_DIR through `staging.start`, so one test of it holds for all."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from nbkit import staging


def run(folder, files: dict[str, bytes]) -> tuple[str, list[str]]:
    """One run writing `files` into `folder`: its first cell's line and what it published."""
    outputs = staging.start(folder)
    for name, data in files.items():
        (outputs.staging / name).write_bytes(data)
    return outputs.describe(), outputs.publish()


def test_files_not_nbkits_are_named_first_and_kept_never_replaced(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "images.zip").write_bytes(b"my own zip")
    (folder / "metrics.json").write_bytes(b"my own metrics")
    (folder / "notes.txt").write_bytes(b"my notes")
    said, published = run(folder, {"images.zip": b"run 1 zip", "metrics.json": b"run 1 metrics"})
    assert (
        f"It holds images.zip, metrics.json, notes.txt, which nbkit did not write: any of them this run's outputs "
        f"would replace is moved to {folder / '.kept'} first (never deleted)." in said
    )
    assert published == [
        "images.zip (the images.zip there before, not nbkit's, is in .kept/)",
        "metrics.json (the metrics.json there before, not nbkit's, is in .kept/)",
    ]
    assert (folder / ".kept" / "images.zip").read_bytes() == b"my own zip"
    assert (folder / ".kept" / "metrics.json").read_bytes() == b"my own metrics"
    assert (folder / "images.zip").read_bytes() == b"run 1 zip" and (folder / "notes.txt").read_bytes() == b"my notes"

    # The next run: the kit's own outputs go to .previous-run/ as before; the user's stay kept, notes.txt still named.
    said, published = run(folder, {"images.zip": b"run 2 zip"})
    assert "It holds notes.txt, which nbkit did not write" in said and published == ["images.zip"]
    assert (folder / ".previous-run" / "images.zip").read_bytes() == b"run 1 zip"
    assert (folder / ".kept" / "images.zip").read_bytes() == b"my own zip"

    # A file of the user's put there after nbkit took the folder is kept too (said when published), never lost.
    (folder / "metrics.json").write_bytes(b"my second metrics")  # run 2 published no metrics.json
    _, published = run(folder, {"metrics.json": b"run 3 metrics"})
    assert published == ["metrics.json (the metrics.json there before, not nbkit's, is in .kept/)"]
    assert (folder / ".kept" / "1-metrics.json").read_bytes() == b"my second metrics"
    assert (folder / ".kept" / "metrics.json").read_bytes() == b"my own metrics"


def test_a_new_or_kit_only_folder_says_nothing_more(tmp_path):
    said, _ = run(tmp_path / "new", {"a.txt": b"1"})
    assert "nbkit did not write" not in said
    checkpoints = tmp_path / "new" / "checkpoints"  # written in place by a run (resume.TrainingRun), then killed
    checkpoints.mkdir()
    said, published = run(tmp_path / "new", {"a.txt": b"2"})
    assert "nbkit did not write" not in said and published == ["a.txt"]
    assert json.loads((tmp_path / "new" / ".published-run.json").read_text()) == {"published": ["a.txt"], "theirs": []}


@pytest.mark.parametrize("notebook", sorted(p.name for p in (REPO / "notebooks").glob("[01][0-9]_*.py")))
def test_every_notebook_takes_its_output_dir_through_staging_and_says_what_it_published(notebook):
    """02, 04, 05, 06, 08, 09, 10 publish through staging.start (03 writes nothing; 07's converter refuses an OUTPUT
    holding anything but its own dataset); each prints what publish() says, and each but 06 (whose OUTPUT_DIR is
    the shared working folder) names in its first cell what the folder holds that nbkit did not write."""
    source = (REPO / "notebooks" / notebook).read_text()
    if notebook.startswith(("01", "03")):
        assert "OUTPUT_DIR" not in source
        return
    if notebook.startswith("07"):
        assert "convert(" in source and "staging.start(" not in source
        return
    start = re.search(r"\noutputs = staging\.start\(.*\n", source)
    assert start and re.search(r"print\(.*outputs\.publish\(\)", source), notebook
    if not notebook.startswith("06"):
        assert source[start.end() :].startswith("print(outputs.describe())\n"), notebook
