"""Self-contained Kaggle kernel bundles: `build/kernels/<slug>/` with the notebook and its
kernel-metadata.json, ready for `kaggle kernels push -p`.

Competition kernels often run with internet off, so `pip install` of nbkit is not an option: the
nbkit modules the notebook imports (followed through nbkit's own imports) travel inside it, one
`%%writefile` cell per module into a temporary folder that is then put first on `sys.path`.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from nbkit import atomic, kaggle, kernel_metadata, leaks
from nbkit.errors import BundleError

PACKAGE = Path(__file__).resolve().parent
BUNDLE_TAG = "nbkit-bundle"


def imported_modules(code: str) -> set[str]:
    """The nbkit modules `code` imports ("__init__" for the package itself), anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "nbkit":
                continue
            found.add("__init__")
            if len(parts) > 1 and (PACKAGE / f"{parts[1]}.py").is_file():
                found.add(parts[1])  # `from nbkit import env` names a module; `from nbkit.env import x` too
    return found


def modules_needed(cells: Iterable[str]) -> list[str]:
    """Every nbkit module the code cells need, following nbkit's own imports, sorted."""
    needed: set[str] = set()
    todo = set().union(*(imported_modules(cell) for cell in cells))
    while todo:
        module = todo.pop()
        needed.add(module)
        todo |= imported_modules((PACKAGE / f"{module}.py").read_text(encoding="utf-8")) - needed
    return sorted(needed)


def _python(source: str) -> str:
    """A cell's source as plain Python (IPython magics and shell lines translated)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def bundle_cells(modules: list[str]) -> list[Any]:
    """The cells that recreate `modules` of nbkit inside the notebook and import it from there."""
    import nbformat

    sources = {m: (PACKAGE / f"{m}.py").read_text(encoding="utf-8") for m in modules}
    digest = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:12]
    new_code, new_markdown = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
    meta = {"tags": [BUNDLE_TAG]}
    cells = [
        new_markdown(
            f"## nbkit, bundled ({len(modules)} modules)\n"
            "Written by `python -m nbkit bundle`: Kaggle kernels often run with the internet off, so the nbkit "
            "code this notebook needs travels inside it. These cells write it to a temporary folder and put that "
            "folder first on `sys.path`; the notebook itself starts after them.",
            metadata=meta,
        ),
        new_code(
            "import os, sys, tempfile\n\n"
            f'NBKIT_BUNDLE = os.path.join(tempfile.gettempdir(), "nbkit-bundle-{digest}")\n'
            'os.makedirs(os.path.join(NBKIT_BUNDLE, "nbkit"), exist_ok=True)\n'
            "sys.path.insert(0, NBKIT_BUNDLE)",
            metadata=meta,
        ),
    ]
    cells += [new_code(f"%%writefile {{NBKIT_BUNDLE}}/nbkit/{m}.py\n{sources[m]}", metadata=meta) for m in modules]
    cells.append(
        new_code(
            "import nbkit\n\n"
            "# An nbkit imported before this cell (another copy) would shadow the bundle: restart the kernel then.\n"
            'assert nbkit.__file__.startswith(NBKIT_BUNDLE), f"nbkit was already imported from {nbkit.__file__}"\n'
            'print(f"nbkit {nbkit.__version__} from this notebook\'s bundle: {os.path.dirname(nbkit.__file__)}")',
            metadata=meta,
        )
    )
    return cells


def bundled_notebook(source: str | Path) -> Any:
    """The notebook `source` (.py or .ipynb) without outputs, with its nbkit modules inside it."""
    import jupytext

    notebook = jupytext.read(source)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    if not code:
        raise BundleError(f"{source} has no code cells.")
    try:
        modules = modules_needed(_python(c.source) for c in code)
    except SyntaxError as error:
        raise BundleError(f"{source}: a code cell does not parse ({error.msg}, line {error.lineno}).") from error
    for cell in code:
        cell.outputs, cell.execution_count = [], None
    first = notebook.cells.index(code[0])
    notebook.cells[first:first] = bundle_cells(modules) if modules else []
    notebook.metadata.pop("jupytext", None)  # the bundle is an .ipynb only
    return notebook


def write(
    source: str | Path,
    out_dir: str | Path = "build/kernels",
    *,
    owner: str | None = None,
    title: str | None = None,
    **options: Any,
) -> Path:
    """Write `out_dir/<slug>/` (notebook + kernel-metadata.json) for `source`, and return it.

    Everything is checked first (metadata, leaks in the source and in the result); the bundle is
    written to a temporary folder and renamed into place, so a failure leaves any old bundle as it was.
    `options` are those of `nbkit.kernel_metadata.build` (accelerator_name, competitions, ...).
    """
    import nbformat

    source = Path(source)
    if not source.is_file():
        raise BundleError(f"{source} does not exist: give a notebook, e.g. notebooks/02_flowers_classifier.py.")
    leaks.check([source])
    title = title or source.stem.replace("_", " ")
    owner = owner or kaggle.username() or ""
    slug = options.pop("slug", None) or kernel_metadata.slugify(title)
    metadata = kernel_metadata.build(owner, title, f"{slug}.ipynb", slug=slug, **options)
    notebook = bundled_notebook(source)
    target = Path(out_dir) / slug
    with atomic.staged_dir(target) as staging:
        nbformat.write(notebook, staging / metadata["code_file"])
        (staging / "kernel-metadata.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        leaks.check([staging])
    return target
