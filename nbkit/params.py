"""Checks for notebook parameters (and command-line options), so a wrong value stops at once."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from nbkit.errors import ParameterError

PROFILES = ("auto", "smoke", "full")
BACKENDS = ("auto", "tensorflow", "jax")
HANDLE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # one part of owner/slug[/...] as in a Kaggle URL


def check_choice(name: str, value: object, allowed: Iterable[object]) -> object:
    """Return `value` if it is one of `allowed`, else raise a ParameterError naming them."""
    allowed = tuple(allowed)
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ParameterError(
            f"Parameter {name}={value!r} is not allowed: use one of {options} "
            f"(for example `papermill -p {name} {allowed[0]} ...`)."
        )
    return value


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """Return `value` if it is an int >= `minimum`, else raise a ParameterError."""
    # bool is an int subclass; a papermill `-p EPOCHS True` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(
            f"Parameter {name}={value!r} must be a whole number >= {minimum} (papermill: `-p {name} {max(minimum, 1)}`)."
        )
    if value < minimum:
        raise ParameterError(f"Parameter {name}={value} must be >= {minimum}.")
    return value


def check_handle(
    name: str,
    value: object,
    form: str = "owner/slug",
    example: str = "alice/flowers-model",
    slug: re.Pattern[str] | None = None,
) -> str:
    """Return `value` if it is a Kaggle handle written as `form` (e.g. "owner/slug", "user",
    "owner/model/framework/variation[/version]"), each piece as in its kaggle.com URL, and its
    second piece matches `slug` when given; else a ParameterError that shows the form and an example."""
    pieces = value.split("/") if isinstance(value, str) else []
    low, high = form.split("[")[0].count("/") + 1, form.count("/") + 1
    valid = low <= len(pieces) <= high and all(HANDLE_PART.match(p) for p in pieces)
    if not valid or (slug is not None and not slug.match(pieces[1])):
        rule = f" (its slug: {slug.pattern})" if slug is not None else ""
        raise ParameterError(
            f"{name}={value!r} must be written {form}{rule} as on kaggle.com, for example {example!r}."
        )
    return value  # type: ignore[return-value]


def resolve_profile(profile: str, accelerator_kind: str) -> str:
    """Turn PROFILE into "smoke" or "full": "auto" is smoke on CPU, full on a TPU or GPU."""
    check_choice("PROFILE", profile, PROFILES)
    if profile != "auto":
        return profile
    return "smoke" if accelerator_kind == "cpu" else "full"


def or_default(value: int, default: int) -> int:
    """A numeric parameter where 0 keeps the profile's default."""
    return value if value else default


def check_run(
    BACKEND: str, PROFILE: str, SIMULATE_DEVICES: int, EPOCHS: int, PER_REPLICA_BATCH: int, STEPS_PER_EXECUTION: int
) -> None:
    """Check the parameters every training notebook shares (names as in the notebooks)."""
    check_choice("BACKEND", BACKEND, BACKENDS)
    check_choice("PROFILE", PROFILE, PROFILES)
    check_int("SIMULATE_DEVICES", SIMULATE_DEVICES, minimum=0)
    check_int("EPOCHS", EPOCHS, minimum=0)  # 0: the profile's default
    check_int("PER_REPLICA_BATCH", PER_REPLICA_BATCH, minimum=0)
    check_int("STEPS_PER_EXECUTION", STEPS_PER_EXECUTION, minimum=1)


def check_names(namespace: Mapping[str, object]) -> None:
    """Stop on a parameter the notebook does not have (`papermill -p EPOCH 3`), naming the closest one.

    The parameters cell declares `NAME: type = value`, so its names are in the namespace's
    `__annotations__`; papermill injects plain `NAME = value` lines. Call it in the first cell, with
    `globals()`. Only upper-case names count (the notebooks' own variables are lower case).
    """
    if "__annotations__" not in namespace:  # a Python that keeps annotations elsewhere: nothing to compare with
        return
    declared = set(namespace["__annotations__"])
    unknown = sorted(
        name
        for name in namespace
        if name.isupper() and name not in declared and not name.startswith(("_", "NBKIT_"))  # NBKIT_: the bundle's
    )
    if unknown:
        hints = [
            f"{name} (did you mean {close[0]}?)" if (close := difflib.get_close_matches(name, declared, 1)) else name
            for name in unknown
        ]
        raise ParameterError(
            f"Unknown parameter {', '.join(hints)}: this notebook's parameters are "
            f"{', '.join(sorted(declared))} (`papermill --help-notebook` lists them)."
        )
