"""Rebuild each notebook's .ipynb from its .py source and execute it, so nbval has fresh outputs.

    python tools/sync_notebooks.py notebooks/01_tpu_setup.py [...]

The .py (jupytext percent format) is the source of truth; the .ipynb beside it is its
executed copy with the default (smoke on CPU) parameters.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jupytext
import nbclient

REPO = Path(__file__).resolve().parents[1]
os.environ["NBKIT_KAGGLEHUB"] = "off"  # the stored outputs show what `make test` sees, never a download


def sync(source: Path) -> Path:
    """Write `source`'s .ipynb twin, executed from the repository root."""
    notebook = jupytext.read(source)
    start = time.perf_counter()
    nbclient.NotebookClient(
        notebook, timeout=1200, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    ).execute()
    target = source.with_suffix(".ipynb")
    jupytext.write(notebook, target)
    print(f"{target}: executed in {time.perf_counter() - start:.0f} s")
    return target


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        sync(Path(path))
