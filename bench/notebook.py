"""Notebook 02's own machine learning for the benchmarks: its imports, constants and functions
(`decode`, `augment`, `get_dataset`, `build_model`, `lrfn`, `tta_view`, ...) read from
notebooks/02_flowers_classifier.py with jupytext and executed, so a benchmark measures the notebook
as it is edited. Its other statements (the run itself) are skipped; the globals those functions read
(`image_size`, `GLOBAL_BATCH`, `steps_per_epoch`, `dataset`, ...) are given by the caller.
Call after `accel.setup()`: the notebook imports Keras."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "02_flowers_classifier.py"


def _kept(node: ast.stmt) -> bool:
    """Imports, function and class definitions, and assignments to UPPER_CASE names (constants)."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef):
        return True
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return bool(names) and all(n.id.isupper() for n in names)


def split(files: list[str]) -> Any:
    """The training split of `files`, as the notebook's `get_dataset` takes it (what `Data.train` is)."""
    from nbkit.images import checks, layout

    return checks.Split("train", list(files), sum(map(layout.count_in_name, files)), [])


def load(num_classes: int = 104, notebook: Path = NOTEBOOK, **config: Any) -> dict[str, Any]:
    """The notebook's namespace (02's unless `notebook` names another): its parameters' defaults and constants,
    then `config` on top (e.g. image_size=192, AUGMENT="flips", GLOBAL_BATCH=128, steps_per_epoch=6, EPOCHS=4)."""
    import jupytext

    namespace: dict[str, Any] = {
        "dataset": SimpleNamespace(num_classes=num_classes),
        "environment": SimpleNamespace(input_dir=Path(".")),
    }
    for cell in jupytext.read(notebook).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            if not _kept(node):
                continue
            try:
                exec(compile(ast.Module([node], []), str(notebook), "exec"), namespace)
            except NameError:  # a constant derived from the run (GLOBAL_BATCH = ... * acc.num_replicas)
                pass
    namespace.update(config)
    return namespace
