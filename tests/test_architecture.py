"""The package tree says what runs where, and these rules keep it so (imports inside functions
count too: a kernel bundle carries every module a notebook could reach). Plus the size limits:
no module over 350 lines, no function over 60. And no public name that only its own module uses."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re

import jupytext
import pytest
from conftest import REPO

from nbkit.publish import bundle

PACKAGE = REPO / "nbkit"
MODULES = sorted(str(p.relative_to(PACKAGE).with_suffix("")) for p in PACKAGE.rglob("*.py"))
CORE = {"errors", "params", "env", "atomic", "logs", "tfrecord", "staging", "hosts"}
# One room per task: image classification, image generation, text classification, language models.
TASKS = ("images", "imagegen", "text", "llm")
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))
# The modules whose public names must each have a user outside the module (tests are no users).
MODULES_CHECKED = [m for m in MODULES if not m.endswith("__init__")]


def external_imports(module: str) -> set[str]:
    """The top-level names of the non-nbkit packages `module` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(bundle.module_file(module).read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - {"nbkit"}


def reachable(module: str, left_out: tuple[str, ...] = ()) -> set[str]:
    """`module` and every nbkit module it imports, directly or through others, lazily or not
    (not into `left_out` from outside it)."""
    seen, todo = set(), {module}
    while todo:
        current = todo.pop()
        seen.add(current)
        skip = set() if current in left_out else set(left_out)
        todo |= bundle._imported_modules(bundle.module_file(current).read_text()) - seen - skip
    return seen


def own_imports(module: str) -> set[str]:
    """The nbkit modules `module` imports, anywhere in it, less the __init__ of the packages it sits in
    (Python runs those before `module` whatever it imports: a package, not an import of its code)."""
    parts = module.split("/")
    packages = {"/".join(parts[:depth] + ["__init__"]) for depth in range(len(parts))}
    return bundle._imported_modules(bundle.module_file(module).read_text()) - packages - {module}


def import_cycles() -> list[list[str]]:
    """Each import cycle among nbkit's modules, as the path from its first module back to it."""
    graph = {m: own_imports(m) for m in MODULES}
    cycles = []
    for start in MODULES:
        paths, seen = [[start]], {start}
        while paths:  # breadth first: the shortest way back to `start`
            path = paths.pop(0)
            if start in graph[path[-1]]:
                cycles.append(path + [start])
                break
            for step in sorted(graph[path[-1]] - seen):
                seen.add(step)
                paths.append(path + [step])
    return cycles


def public_names(module: str) -> set[str]:
    """The functions, classes and constants `module` defines at its top level without a leading underscore."""
    names = set()
    for node in ast.parse(bundle.module_file(module).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return {name for name in names if not name.startswith("_")}


def names_used(tree: ast.AST, dotted: str) -> set[str]:
    """The names of module `dotted` (nbkit.a.b) that `tree` uses: `from nbkit.a.b import name`, or
    `b.name` / `alias.name` after `from nbkit.a import b [as alias]` or `import nbkit.a.b [as alias]`."""
    parent, short = dotted.rsplit(".", 1)
    imports, attributes = imports_and_attributes(tree)
    found, aliases = set(), {dotted}
    for node in imports:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == dotted:
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == parent:
            aliases |= {alias.asname or alias.name for alias in node.names if alias.name == short}
        elif isinstance(node, ast.Import):
            aliases |= {alias.asname for alias in node.names if alias.name == dotted and alias.asname}
    return found | {attribute for owner, attribute in attributes if owner in aliases}


@functools.cache
def imports_and_attributes(tree: ast.AST) -> tuple[list[ast.AST], list[tuple[str, str]]]:
    """`tree`'s import statements, and its attributes as (what they are read from, as source; name): walked once
    for all the modules asked about (13 s less)."""
    nodes = list(ast.walk(tree))
    imports = [node for node in nodes if isinstance(node, (ast.Import, ast.ImportFrom))]
    return imports, [(ast.unparse(node.value), node.attr) for node in nodes if isinstance(node, ast.Attribute)]


def used_only_inside(module: str, users: dict[str, ast.AST]) -> set[str]:
    """`module`'s public names that no other file of `users` (module or script -> its tree) uses."""
    dotted = "nbkit." + module.replace("/", ".")
    used = set()
    for user, tree in users.items():
        if user != module:
            used |= names_used(tree, dotted)
    return public_names(module) - used


def under(folder: str) -> list[str]:
    """The modules of a sub-package."""
    return [m for m in MODULES if m.startswith(folder + "/")]


def test_the_tree_has_the_documented_parts():
    folders = {m.split("/")[0] for m in MODULES if "/" in m}
    assert folders == {*TASKS, "accel", "convert", "handoff", "pytorch", "inputs", "publish"}
    assert CORE <= set(MODULES)


def test_no_module_is_part_of_an_import_cycle():
    # Lazy imports count: a module that imports another inside a function still depends on it.
    assert not import_cycles()


@pytest.mark.parametrize("module", sorted(CORE))
def test_core_imports_only_core(module):
    assert reachable(module) - {"__init__"} <= CORE, "core modules run before anything else and stay small"


@pytest.mark.parametrize("module", under("pytorch"))
def test_nothing_under_pytorch_reaches_keras_jax_or_tensorflow_code(module):
    modules = reachable(module)
    assert not [m for m in modules if m in ("models", "images/checks", "images/flowers") or m.startswith("accel/")]
    for other in modules:
        heavy = external_imports(other) & {"keras", "jax", "tensorflow"}
        assert not heavy, (other, heavy)


def test_publish_is_never_reached_from_outside_it_nor_from_a_notebook():
    for module in MODULES:
        if not module.startswith("publish/") and module != "__main__":
            assert not any(m.startswith("publish/") for m in reachable(module)), module
    for notebook in NOTEBOOKS:
        assert "nbkit.publish" not in notebook.read_text(), notebook.name


@pytest.mark.parametrize("module", under("convert"))
def test_the_converter_never_reaches_a_framework(module):
    # It runs in any notebook, before (or without) TensorFlow: Pillow, numpy and nbkit's own TFRecord writer.
    for other in reachable(module):
        heavy = external_imports(other) & {"keras", "jax", "tensorflow", "torch"}
        assert not heavy, (other, heavy)


@pytest.mark.parametrize("module", under("handoff"))
def test_handoff_does_not_reach_secrets(module):
    assert "inputs/secrets" not in reachable(module)


@pytest.mark.parametrize(
    "folder, never",
    [
        ("images", ("handoff/", "pytorch/", "publish/", "accel/")),
        ("inputs", (*(f"{task}/" for task in TASKS), "handoff/", "pytorch/", "publish/", "accel/", "models")),
        ("accel", (*(f"{task}/" for task in TASKS), "handoff/", "inputs/", "pytorch/", "publish/", "models")),
        ("convert", ("handoff/", "pytorch/", "publish/", "accel/", "models")),
    ],
)
def test_folders_do_not_reach_across_concerns(folder, never):
    for module in under(folder):
        crossing = [m for m in reachable(module) if m.startswith(never)]
        assert not crossing, f"{module} reaches {crossing}"


@pytest.mark.parametrize("task", TASKS)
def test_a_task_room_never_reaches_another_tasks_room(task):
    # The generated stand-ins (never bundled) may borrow another task's sample pictures.
    others = tuple(f"{other}/" for other in TASKS if other != task)
    for module in set(under(task)) - set(bundle._LEFT_OUT):
        crossing = [m for m in reachable(module, bundle._LEFT_OUT) if m.startswith(others)]
        assert not crossing, f"{module} reaches {crossing}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_each_bundle_carries_only_what_its_notebook_reaches(notebook):
    _, modules = bundle.bundled_notebook(notebook)
    code = [bundle._python(c.source) for c in jupytext.read(notebook).cells if c.cell_type == "code"]
    direct = set().union(*(bundle._imported_modules(c) for c in code))
    assert set(modules) == set().union(*(reachable(m, bundle._LEFT_OUT) for m in direct))
    if notebook.name.startswith("04"):  # PyTorch: nothing of Keras' side of the kit
        assert not [m for m in modules if m.startswith("accel") or m in ("models", "images/pipeline")]


def test_each_bundle_is_within_its_ceiling():
    # `make bundle-sizes` prints the table (tokens); its CEILINGS, on the tokens beyond a notebook's own, are held here.
    spec = importlib.util.spec_from_file_location("bundle_sizes", REPO / "tools" / "bundle_sizes.py")
    sizes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sizes)
    assert {"01", "02", "05", "09", "10", "11", "12"} <= set(sizes.CEILINGS)
    over = {notebook.stem: sizes.over_ceiling(notebook, sizes.sizes(notebook)[2]) for notebook in NOTEBOOKS}
    assert not {name: problem for name, problem in over.items() if problem}


@pytest.mark.parametrize("module", MODULES)
def test_no_module_over_350_lines_and_no_function_over_60(module):
    text = bundle.module_file(module).read_text()
    assert len(text.splitlines()) <= 350
    long = [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60
    ]
    assert not long


def test_public_names_have_a_user_outside_their_module():
    # A name only its own module (and the tests) use is private: a leading underscore, or gone if unused.
    scripts = [*NOTEBOOKS, *sorted(REPO.glob("tools/*.py")), *sorted(REPO.glob("bench/*.py"))]
    users = {m: ast.parse(bundle.module_file(m).read_text()) for m in MODULES}
    users |= {str(path.relative_to(REPO)): ast.parse(path.read_text()) for path in scripts}
    private = sorted(f"{m}.{name}" for m in MODULES_CHECKED for name in used_only_inside(m, users))
    assert not private, f"public names used only inside their own module (make them private or drop them): {private}"


def test_no_bundled_module_holds_triple_single_quotes():
    # A bundle embeds each module as r'''...''': one of these inside would end the string early.
    bundled = [m for m in MODULES if not m.startswith("publish/")]
    assert not [m for m in bundled if "'''" in bundle.module_file(m).read_text()]


def test_the_architecture_layout_names_every_module():
    layout = REPO.joinpath("docs/architecture.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    missing = [
        m
        for m in MODULES
        if not m.endswith("__init__")
        and m != "__main__"
        and not re.search(rf"\b{re.escape(m.split('/')[-1])}\b", layout)
    ]
    assert not missing, f"docs/architecture.md's layout section does not name {missing}"


def test_the_readme_is_short_and_links_every_doc():
    # The README is for users (at most 250 lines); everything else is in docs/, each file linked from it.
    readme = REPO.joinpath("README.md").read_text()
    assert len(readme.splitlines()) <= 250
    docs = sorted(p.relative_to(REPO).as_posix() for p in REPO.joinpath("docs").rglob("*") if p.is_file())
    assert docs
    unlinked = [d for d in docs if not re.search(rf"\]\({re.escape(d)}[)#]", readme)]
    assert not unlinked, f"the README does not link {unlinked}"
