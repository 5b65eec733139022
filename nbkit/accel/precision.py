"""Keras' dtype policy for the hardware, or the one asked for: a policy the hardware cannot do well is
refused with what to ask for instead, never switched silently."""

from __future__ import annotations

from nbkit.errors import ParameterError
from nbkit.params import check_choice

_PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")
EXPLAINED = {
    "float32": "everything in float32",
    "mixed_bfloat16": "layers compute in bfloat16, variables, logits and loss stay float32",
    "mixed_float16": "layers compute in float16 (the loss is scaled), variables, logits and loss stay float32",
}


def recommended(kind: str, compute_capability: tuple[int, int] | None = None) -> str:
    """bfloat16 on TPUs, float16 on GPUs with compute capability >= 7.0, float32 otherwise."""
    if kind == "tpu":
        return "mixed_bfloat16"
    if kind == "gpu" and compute_capability is not None and compute_capability >= (7, 0):
        return "mixed_float16"
    return "float32"


def choose(requested: str, kind: str, compute_capability: tuple[int, int] | None = None) -> tuple[str, str]:
    """(policy, why) for PRECISION=`requested` on this hardware; a ParameterError for one it cannot do."""
    check_choice("PRECISION", requested, _PRECISIONS)
    if requested == "auto":
        return recommended(kind, compute_capability), f"PRECISION='auto': the {kind.upper()}'s policy"
    capability = "unknown" if compute_capability is None else ".".join(map(str, compute_capability))
    if requested == "mixed_float16" and kind != "gpu":
        why = "TPUs compute in bfloat16" if kind == "tpu" else "a CPU emulates float16 (about 13x slower measured)"
        raise ParameterError(
            f"PRECISION='mixed_float16' on a {kind.upper()}: {why}. Use 'mixed_bfloat16' or 'float32'."
        )
    if requested == "mixed_float16" and (compute_capability is None or compute_capability < (7, 0)):
        raise ParameterError(
            f"PRECISION='mixed_float16' needs a GPU with tensor cores (compute capability 7.0 or more; "
            f"this one: {capability}). Use 'float32'."
        )
    if requested == "mixed_bfloat16" and kind == "gpu" and (compute_capability is None or compute_capability < (8, 0)):
        raise ParameterError(
            f"PRECISION='mixed_bfloat16' needs a GPU of compute capability 8.0 or more (this one: "
            f"{capability}, e.g. a T4 is 7.5). Use 'mixed_float16' or 'float32'."
        )
    return requested, f"PRECISION={requested!r} was asked for"
