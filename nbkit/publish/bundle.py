"""Kaggle kernel bundles, `build/kernels/<slug>/`: the notebook and its kernel-metadata.json. Kernels often
run offline, so the nbkit modules the notebook imports (followed through nbkit's own imports) travel in
one hidden cell after the parameters, which writes them to a temporary folder first on `sys.path`.

kernel-metadata.json is checked before anything is written. No `docker_image` unless asked: a pinned
image (e.g. from `kaggle kernels pull -m`) once made TPU pushes silently run on the CPU image."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nbkit.errors import ParameterError
from nbkit.inputs.account import PLACEHOLDER_OWNER, kaggle_username
from nbkit.params import check_handle

_PACKAGE = Path(__file__).resolve().parents[1]  # the nbkit folder
_BUNDLE_TAG = "nbkit-bundle"
_HIDDEN = {"_kg_hide-input": True, "jupyter": {"source_hidden": True}}  # Kaggle's editor; JupyterLab
_NEVER_BUNDLED = "publish"  # the command line's own modules
# Reached only through nbkit's own imports, these stay out of a bundle: on Kaggle the data is
# attached, so the generators of the stand-in samples never run there (the TFRecord writer they use
# travels only with the converter). A notebook that imports one of them itself still gets it.
_LEFT_OUT = ("images/sample", "imagegen/sample", "text/sample", "convert/example")


def module_file(name: str) -> Path:
    return _PACKAGE / f"{name}.py"


def _modules_of(dotted: str) -> set[str]:
    """The nbkit module files importing `dotted` runs: each package's __init__ on the way, then the module."""
    parts, found = dotted.split("."), {"__init__"}
    for depth in range(2, len(parts) + 1):
        path = _module_path(".".join(parts[:depth]))
        if path is None:
            break
        found.add(path.relative_to(_PACKAGE).with_suffix("").as_posix())
        if path.name != "__init__.py":
            break
    return found


def _imported_modules(code: str) -> set[str]:
    """The nbkit module files `code` imports, anywhere in it (inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "nbkit" or name.startswith("nbkit."):
                found |= _modules_of(name)
    return found


def _modules_needed(cells: Iterable[str]) -> list[str]:
    """Every nbkit module file the code cells need, sorted (_LEFT_OUT only where a cell imports it)."""
    needed: set[str] = set()
    todo = set().union(*(_imported_modules(cell) for cell in cells))
    while todo:
        module = todo.pop()
        needed.add(module)
        imports = _imported_modules(module_file(module).read_text(encoding="utf-8"))
        todo |= imports - needed - (set() if module in _LEFT_OUT else set(_LEFT_OUT))
    if any(m.split("/")[0] == _NEVER_BUNDLED for m in needed):
        raise ParameterError("The notebook imports nbkit.publish, the command line's code; notebooks must not.")
    return sorted(needed)


def _module_path(dotted: str) -> Path | None:
    """nbkit.a.b -> nbkit/a/b.py or nbkit/a/b/__init__.py, or None when nbkit has no such module."""
    name = "/".join(dotted.split(".")[1:]) or "__init__"
    for path in (module_file(name), _PACKAGE / name / "__init__.py"):
        if path.is_file():
            return path
    return None


def _top_level_names(path: Path) -> set[str] | None:
    """The names a module binds outside its functions and classes; None when it can give any name
    (a module `__getattr__`, or `import *`)."""
    names, todo = set(), list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return None if "__getattr__" in names else names | {"__name__", "__file__", "__doc__", "__path__"}


def _missing(node: ast.Import | ast.ImportFrom) -> str | None:
    """What an import of nbkit names that nbkit does not have, or None."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names if alias.name.split(".")[0] == "nbkit"]
        return next((f"no module {name}" for name in wanted if _module_path(name) is None), None)
    module = node.module or ""
    if node.level or module.split(".")[0] != "nbkit":
        return None
    if (path := _module_path(module)) is None:
        return f"no module {module}"
    names, package = _top_level_names(path), path.name == "__init__.py"
    for alias in node.names:
        submodule = package and _module_path(f"{module}.{alias.name}") is not None
        if names is not None and alias.name != "*" and alias.name not in names and not submodule:
            return f"no {'module or name' if package else 'name'} {alias.name} in {module}"
    return None


def _check_imports(code: str, where: str) -> None:
    """A ParameterError naming the line of `code` that imports from nbkit a module or name it lacks (read
    statically): on Kaggle that would be an ImportError."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and (missing := _missing(node)):
            raise ParameterError(
                f"{where}, line {node.lineno}: `{ast.unparse(node)}`: there is {missing}. Fix the import (this "
                "nbkit's modules are in nbkit/): the bundled notebook would stop there with an ImportError on Kaggle."
            )


def _python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _bundle_cell(modules: list[str]) -> Any:
    """One code cell that recreates `modules` of nbkit in a temporary folder and imports it from there."""
    import nbformat

    sources = {f"nbkit/{m}.py": module_file(m).read_text(encoding="utf-8") for m in modules}
    if any("'''" in text for text in sources.values()):
        raise ParameterError("An nbkit module contains ''' and cannot be embedded as a raw string.")
    digest = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()[:12]
    files = "".join(f"    {name!r}: r'''{text}''',\n" for name, text in sources.items())
    code = (
        f"# nbkit, bundled by `python -m nbkit bundle` ({len(modules)} modules): Kaggle kernels often run with the\n"
        "# internet off, so the nbkit code this notebook imports travels inside it. This cell writes it to a\n"
        "# temporary folder and puts that folder first on sys.path.\n"
        "import os, sys, tempfile\n\n"
        f'NBKIT_BUNDLE = os.path.join(tempfile.gettempdir(), "nbkit-bundle-{digest}")\n'
        f"NBKIT_FILES = {{\n{files}}}\n"
        "for name, text in NBKIT_FILES.items():\n"
        "    os.makedirs(os.path.dirname(os.path.join(NBKIT_BUNDLE, name)), exist_ok=True)\n"
        '    with open(os.path.join(NBKIT_BUNDLE, name), "w", encoding="utf-8") as f:\n'
        "        f.write(text)\n"
        "sys.path.insert(0, NBKIT_BUNDLE)\n"
        "import nbkit\n\n"
        "# An nbkit imported before this cell (another copy) would shadow the bundle: restart the kernel then.\n"
        'assert nbkit.__file__.startswith(NBKIT_BUNDLE), f"nbkit was already imported from {nbkit.__file__}"\n'
        'print(f"nbkit {nbkit.__version__} from this notebook\'s bundle: {os.path.dirname(nbkit.__file__)}")'
    )
    return nbformat.v4.new_code_cell(code, metadata={"tags": [_BUNDLE_TAG], **_HIDDEN})


def bundled_notebook(source: str | Path) -> tuple[Any, list[str]]:
    """(the notebook `source` without outputs and with its nbkit modules inside, the modules)."""
    import jupytext

    notebook = jupytext.read(source)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    if not code:
        raise ParameterError(f"{source} has no code cells.")
    try:
        sources = [_python(c.source) for c in code]
        for cell, text in zip(code, sources):
            _check_imports(text, f"{source}: cell {notebook.cells.index(cell) + 1}")
        modules = _modules_needed(sources)
    except SyntaxError as error:
        raise ParameterError(f"{source}: a code cell does not parse ({error.msg}, line {error.lineno}).") from error
    for cell in code:
        cell.outputs, cell.execution_count = [], None
    parameters = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    position = notebook.cells.index(parameters[0]) + 1 if parameters else notebook.cells.index(code[0])
    if modules:
        notebook.cells.insert(position, _bundle_cell(modules))
    notebook.metadata.pop("jupytext", None)  # the bundle is an .ipynb only
    return notebook, modules


def write(
    source: str | Path,
    out_dir: str | Path = "build/kernels",
    *,
    owner: str | None = None,
    title: str | None = None,
    **options: Any,
) -> Path:
    """Write `out_dir/<slug>/` for `source`, all checked first (metadata, leaks, imports), all or nothing.
    Without an owner the id is INSERT_USERNAME_HERE/<slug>: only `push` needs the real one. `options` go
    to `_kernel_metadata`."""
    import nbformat

    from nbkit import atomic
    from nbkit.publish import scan

    source = Path(source)
    if not source.is_file():
        raise ParameterError(f"{source} does not exist: give a notebook, e.g. notebooks/02_flowers_classifier.py.")
    scan.check([source])
    title = title or source.stem.replace("_", " ")
    owner = owner or kaggle_username()  # None: a placeholder owner, enough to import; push needs the real one
    metadata = _kernel_metadata(owner, title, **options)
    notebook, _ = bundled_notebook(source)
    target = Path(out_dir) / metadata["id"].split("/")[1]
    with atomic.staged_dir(target) as staging:
        nbformat.write(notebook, staging / metadata["code_file"])
        (staging / "kernel-metadata.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        scan.check([staging])
    return target


# ---- kernel-metadata.json ------------------------------------------------------------------------

# Accelerator name -> (enable_gpu, enable_tpu, machine_shape): today's first. Raw machine shapes work too.
ACCELERATORS: dict[str, tuple[bool, bool, str | None]] = {
    "tpu-v5e-8": (False, True, "TpuV5E8"),
    "tpu-v6e-8": (False, True, "TpuV6E8"),
    "gpu-t4x2": (True, False, "NvidiaTeslaT4"),
    "cpu": (False, False, None),
    "tpu-v3-8": (False, True, "TpuV38"),
    "tpu-vm-v3-8": (False, True, "Tpu1VmV38"),
    "gpu-p100": (True, False, "NvidiaTeslaP100"),
}
# Machine shapes Kaggle retired (kaggle CLI 2.2.5's table): a push still goes through, and the
# session runs on the replacement instead. Accepted, with a warning that says so.
RETIRED = {"TpuV38": "tpu-v5e-8", "Tpu1VmV38": "tpu-v5e-8", "NvidiaTeslaP100": "gpu-t4x2"}
CURRENT = [name for name, (_, _, shape) in ACCELERATORS.items() if shape not in RETIRED]
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _accelerator(name: str | None) -> tuple[bool, bool, str | None] | None:
    """(enable_gpu, enable_tpu, machine_shape) of an accelerator name or machine shape (any case), else None."""
    shapes = {shape.lower(): found for found in ACCELERATORS.values() if (shape := found[2])}
    return ACCELERATORS.get(name or "") or shapes.get((name or "").lower())


def retired(name_or_shape: str | None) -> str | None:
    """The warning for an accelerator (name or machine shape) Kaggle retired, else None."""
    shape = (_accelerator(name_or_shape) or (None, None, None))[2]
    if shape not in RETIRED:
        return None
    instead = RETIRED[shape]
    asked = f"{name_or_shape} (machine shape {shape})" if name_or_shape != shape else shape
    return (
        f"{asked} is retired on Kaggle: sessions that ask for it run on {instead} ({ACCELERATORS[instead][2]}) "
        f"instead. Ask for --accelerator {instead}."
    )


def _check_sources(option: str, sources: Sequence[str], form: str, example: str) -> list[str]:
    return [check_handle(option, source, form, example) for source in sources]


def _kernel_metadata(
    owner: str | None,
    title: str,
    accelerator_name: str = "tpu-v5e-8",
    *,
    private: bool = True,
    internet: bool = True,
    datasets: Sequence[str] = (),
    competitions: Sequence[str] = (),
    kernels: Sequence[str] = (),
    models: Sequence[str] = (),
    docker_image: str | None = None,
) -> dict[str, Any]:
    """A checked kernel-metadata.json dict; without an owner the id is INSERT_USERNAME_HERE/<slug>."""
    if not 5 <= len(title.strip()) <= 50:
        raise ParameterError(f"Title {title!r} has {len(title.strip())} characters; Kaggle needs 5 to 50 (--title).")
    owner = owner or PLACEHOLDER_OWNER  # enough for File -> Import Notebook; `push` asks for the real one
    check_handle("--owner", owner, "a user name", example="alice")
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")  # Kaggle's id from the title
    if not slug:
        raise ParameterError(f"Title {title!r} has no letters or digits for the kernel's id; change --title.")
    if not (accelerator := _accelerator(accelerator_name)):
        raise ParameterError(
            f"Unknown accelerator {accelerator_name!r}: use one of {', '.join(CURRENT)} (or a machine shape such as "
            "TpuV5E8)."
        )
    enable_gpu, enable_tpu, machine_shape = accelerator
    if any(not SLUG.match(c) for c in competitions):
        raise ParameterError(
            f"--competition {list(competitions)} must be slugs as in the URL, e.g. flower-classification-with-tpus."
        )
    metadata = {
        "id": f"{owner}/{slug}",
        "title": title.strip(),
        "code_file": f"{slug}.ipynb",
        "language": "python",
        "kernel_type": "notebook",
        "is_private": private,
        "enable_gpu": enable_gpu,
        "enable_tpu": enable_tpu,
        "enable_internet": internet,
        "machine_shape": machine_shape,
        "dataset_sources": _check_sources("--dataset", datasets, "owner/slug", "alice/my-tfrecords"),
        "competition_sources": list(competitions),
        "kernel_sources": _check_sources("--kernel", kernels, "owner/slug", "alice/my-notebook"),
        "model_sources": _check_sources(
            "--model",
            models,
            "owner/model/framework/variation[/version]",
            "keras/efficientnet/keras/efficientnet_b0_ra_imagenet/1",
        ),
    }
    if docker_image:
        metadata["docker_image"] = docker_image
    return metadata
