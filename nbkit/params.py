"""Checks for notebook parameters (and command-line options), so a wrong value stops at once."""

from __future__ import annotations

import ast
import difflib
import json
import re
import shlex
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nbkit.errors import ParameterError

_PROFILES = ("auto", "smoke", "full")
BACKENDS = ("auto", "tensorflow", "jax")
_HANDLE_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]*"  # one part of owner/slug[/...] as in a Kaggle URL


def check_choice(name: str, value: object, allowed: Iterable[object]) -> object:
    """`value` if it is one of `allowed`, else a ParameterError naming them."""
    allowed = tuple(allowed)
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ParameterError(
            f"Parameter {name}={value!r} is not allowed: use one of {options} "
            f"(for example `papermill -p {name} {allowed[0]} ...`)."
        )
    return value


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """`value` if it is an int >= `minimum`, else a ParameterError."""
    # bool is an int subclass; a papermill `-p EPOCHS True` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(
            f"Parameter {name}={value!r} must be a whole number >= {minimum} "
            f"(papermill: `-p {name} {max(minimum, 1)}`)."
        )
    if value < minimum:
        raise ParameterError(f"Parameter {name}={value} must be >= {minimum}.")
    return value


def is_handle(value: object, form: str) -> bool:
    """Whether `value` is a Kaggle handle written as `form` ("owner/slug", "owner/slug[/versions/N]",
    "owner/model/framework/variation[/version]"): each piece as in its kaggle.com URL, "versions" word for
    word, "N" and "version" a number."""
    required, _, optional = form.partition("[")
    words = {"N": r"\d+", "version": r"\d+", "versions": "versions"}
    pattern = "/".join(words.get(w, _HANDLE_PART) for w in required.split("/"))
    if optional:
        pattern += "(?:/" + "/".join(words.get(w, _HANDLE_PART) for w in optional.strip("/]").split("/")) + ")?"
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def check_handle(
    name: str,
    value: object,
    form: str = "owner/slug",
    example: str = "alice/flowers-model",
    slug: re.Pattern[str] | None = None,
) -> str:
    """`value` if it is a Kaggle handle written as `form` (`is_handle`), its second piece matching `slug`;
    else a ParameterError with an example."""
    if not is_handle(value, form) or (slug is not None and not slug.match(str(value).split("/")[1])):
        rule = f" (its slug: {slug.pattern})" if slug is not None else ""
        raise ParameterError(
            f"{name}={value!r} must be written {form}{rule} as on kaggle.com, for example {example!r}."
        )
    return value  # type: ignore[return-value]


# ---- the parameters cell: names and declared types ----------------------------------------------

_TYPES = {"str": str, "int": int, "float": float, "bool": bool}
_INJECTED = "# Parameters"  # the first line of the cell papermill injects (papermill.translators.PythonTranslator)
_HOW = {  # declared type -> (what to pass, papermill option, an example value)
    "str": ("text (-p reads 3, 1.5, True and None as numbers, booleans and None; -r keeps text)", "-r", "text"),
    "int": ("a whole number", "-p", 3),
    "float": ("a number", "-p", 0.5),
    "bool": ("True or False", "-p", True),
}


@dataclass
class _Declared:
    """What the executed cells declare."""

    names: set[str] = field(default_factory=set)  # every name they assign
    parameters: list[str] = field(default_factory=list)  # the cell papermill injects after, else the annotated names
    types: dict[str, tuple[str, object]] = field(default_factory=dict)  # name -> (type name, default or None)
    injected: set[str] = field(default_factory=set)


def _is_injected(source: str, tree: ast.Module) -> bool:
    """papermill's injected cell: `# Parameters`, then `NAME = value` lines only."""
    plain = all(
        isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) for s in tree.body
    )
    return source.lstrip().split("\n", 1)[0].strip() == _INJECTED and plain


def _assigned(tree: ast.Module) -> list[str]:
    """The names a cell binds (assignments, imports, defs), in order."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    return list(dict.fromkeys(found))


def _annotated(tree: ast.Module) -> dict[str, tuple[str, object]]:
    """A cell's `NAME: type = value` lines of the types _TYPES knows: name -> (type name, default or None)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = node.annotation  # int, or "int" (a string annotation)
            kind = annotation.id if isinstance(annotation, ast.Name) else getattr(annotation, "value", None)
            if isinstance(kind, str) and kind in _TYPES:
                try:
                    default = ast.literal_eval(node.value) if node.value else None
                except (ValueError, TypeError, SyntaxError):  # not a literal: no example from it
                    default = None
                found[node.target.id] = (kind, default)
    return found


def _declared_in(cells: Iterable[str]) -> _Declared:
    """What the executed `cells` (IPython's input history `In`, in order) declare."""
    declared, previous = _Declared(), []
    for source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a cell that failed to run
            continue
        if _is_injected(source, tree):
            declared.injected.update(_assigned(tree))
            declared.parameters = declared.parameters or previous  # papermill injects after the parameters cell
            continue
        previous = _assigned(tree)
        declared.names.update(_assigned(tree))
        declared.types.update(_annotated(tree))
    declared.parameters = sorted(declared.parameters or declared.types)
    return declared


def _from_annotations(annotations: Mapping[str, object]) -> _Declared:
    """What a plain script's `__annotations__` declare (no papermill, so nothing injected)."""
    types = {}
    for name, kind in annotations.items():
        kind = getattr(kind, "__name__", kind)  # int, or "int" under `from __future__ import annotations`
        if kind in _TYPES:
            types[name] = (kind, None)
    return _Declared(set(annotations), sorted(types), types)


# What several notebooks' parameters of these names allow (check_parameters checks them where declared).
_SHARED = {"BACKEND": BACKENDS, "PROFILE": _PROFILES}


def check_parameters(namespace: Mapping[str, object], **allowed: int | Iterable[object]) -> None:
    """Stop on a parameter the notebook does not have (`-p EPOCH 3`, naming the closest), of another type
    than declared (`NAME: int = 3`), of a value not `allowed` (NAME=n: a whole number >= n; NAME=(a, b) or a
    range: one of those; other ints >= 0), or a gs:// URL (nbkit reads local folders). Call it in the first
    cell with `globals()`: the cells are read from IPython's history `In` (a name only papermill's
    `# Parameters` cell assigns is unknown); a plain script's `__annotations__` give the types only."""
    history = namespace.get("In")
    if isinstance(history, list) and len(history) > 1:  # IPython: In[0] is "", the cells follow
        declared = _declared_in(cell for cell in history[1:] if isinstance(cell, str))
    elif isinstance(namespace.get("__annotations__"), Mapping):
        declared = _from_annotations(namespace["__annotations__"])  # type: ignore[arg-type]
    else:
        warnings.warn(
            "params.check_parameters: no IPython input history (In) and no __annotations__ in the namespace it "
            "was given, so the parameters' names and types are not checked: call it with globals() in a notebook.",
            stacklevel=2,
        )
        return
    unknown = sorted(name for name in declared.injected - declared.names if not name.startswith("PAPERMILL_"))
    if unknown:
        hints = [
            f"{name} (did you mean {close[0]}?)"
            if (close := difflib.get_close_matches(name, declared.parameters, 1))
            else name
            for name in unknown
        ]
        raise ParameterError(
            f"Unknown parameter {', '.join(hints)}: this notebook's parameters are "
            f"{', '.join(declared.parameters) or 'none'} (`papermill --help-notebook` lists them)."
        )
    checked = [n for n in declared.types if n in namespace and (n.isupper() or n in declared.injected)]
    for name in checked:  # not the notebook's own variables
        _check_type(name, namespace[name], *declared.types[name])
    for name in checked:
        if str(namespace[name]).startswith("gs://"):
            raise ParameterError(
                f"{name}={namespace[name]!r}: nbkit reads and writes local folders, not Google Cloud Storage (Kaggle's "
                "and Colab's TPU VMs read local files). On Kaggle, attach the data with 'Add Input'; elsewhere copy it "
                "into a local folder (`gsutil -m cp -r gs://bucket/data .`) and give that folder."
            )
        rule = allowed.get(name, _SHARED.get(name, 0 if declared.types[name][0] == "int" else None))
        if isinstance(rule, int) and not isinstance(rule, bool):
            check_int(name, namespace[name], minimum=rule)
        elif rule is not None:
            check_choice(name, namespace[name], rule)


def override(namespace: dict[str, object], why: str, **values: object) -> str:
    """Set the parameters `values` in a notebook's `namespace` (its globals) and return one line naming each
    value that changes, old and new, and `why` (a profile's choices never replace a value in silence)."""
    changed = [f"{name}={namespace[name]!r} -> {value!r}" for name, value in values.items() if namespace[name] != value]
    namespace.update(values)
    return f"{why}: {', '.join(changed)}" if changed else f"{why}: {', '.join(values)} as given"


def _check_type(name: str, value: object, kind: str, default: object = None) -> object:
    """`value` if it is of the declared `kind` (an int is a float, a bool not an int), else a
    ParameterError that says how to pass one with papermill (`default`, when known, as the example)."""
    wanted = _TYPES[kind]
    ok = isinstance(value, wanted) and not (isinstance(value, bool) and wanted is not bool)
    if ok or (wanted is float and isinstance(value, int) and not isinstance(value, bool)):
        return value
    what, option, example = _HOW[kind]
    example = example if default is None else default
    text = shlex.quote(str(example)) if kind == "str" else str(example)
    in_yaml = json.dumps(example) if kind in ("str", "bool") else str(example)
    given = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    found = "None" if value is None else _a(type(value).__name__)
    raise ParameterError(
        f"Parameter {name}={given} is {found}, not {_a(kind)} as declared (`{name}: {kind}`): pass {what}. "
        f"With papermill: `{option} {name} {text}`, or `{name}: {in_yaml}` in a -f parameters file."
    )


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"
