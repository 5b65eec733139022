"""A Gemma / Gemma 3 sharded over a mesh of chips by KerasHub (notebook 10): the layout map that shards the hidden
axis over the mesh's "model" axis, and the check, once the model is built, that every large kernel is sharded as
planned (a rule that matched nothing, or a large kernel no rule placed, is an error: Keras itself leaves such a
kernel replicated without a word, which then runs out of memory). The mesh and the memory plan are `planning`'s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nbkit.errors import DataError

# The layers holding the hidden axis, in Gemma and Gemma 3 alike -> (the kernel's layout, the LoRA kernel that
# holds the hidden axis and its layout). The hidden axis (640 ... 5376 in Gemma 3) divides by 8 in every size;
# the heads axis, which Gemma's own map shards, does not (1 key/value head in Gemma 3 1B: keras-hub#1613).
_HIDDEN_AXIS = {
    "query": ((None, "model", None), "lora_kernel_a", (None, "model", None)),  # (heads, hidden, head_dim)
    "key": ((None, "model", None), "lora_kernel_a", (None, "model", None)),
    "value": ((None, "model", None), "lora_kernel_a", (None, "model", None)),
    "attention_output": ((None, None, "model"), "lora_kernel_b", (None, "model")),  # (heads, head_dim, hidden)
    "ffw_gating": (("model", None), "lora_kernel_a", ("model", None)),  # (hidden, intermediate)
    "ffw_gating_2": (("model", None), "lora_kernel_a", ("model", None)),
    "ffw_linear": ((None, "model"), "lora_kernel_b", (None, "model")),  # (intermediate, hidden)
}


def layout_rules(lora_targets: Sequence[str] = ()) -> dict[str, tuple[str | None, ...]]:
    """Regular expressions matching whole Gemma / Gemma 3 variable paths (Keras' LayoutMap uses `re.fullmatch`)
    -> their layout on a ("batch", "model") mesh: the
    hidden axis on "model", in the token embedding, every attention and feed-forward kernel, and the LoRA
    kernel of each of `lora_targets` that holds the hidden axis (a map written for the base kernels leaves
    the LoRA kernels replicated)."""
    rules: dict[str, tuple[str | None, ...]] = {"token_embedding/embeddings": (None, "model")}
    for name, (kernel, lora_kernel, lora_layout) in _HIDDEN_AXIS.items():
        rules[f".*/{name}/kernel"] = kernel
        if name in lora_targets:
            rules[f".*/{name}/{lora_kernel}"] = lora_layout
    return rules


def layout_map(mesh: Any, rules: dict[str, tuple[str | None, ...]]) -> Any:
    import keras

    found = keras.distribution.LayoutMap(mesh)
    for pattern, layout in rules.items():
        found[pattern] = layout
    return found


def check_sharding(
    variables: Sequence[Any], rules: dict[str, tuple[str | None, ...]], hidden_dim: int, mesh: dict[str, int]
) -> list[str]:
    """Every large variable (two axes or more, one of them `hidden_dim` long) placed by exactly one rule and
    sharded as that rule says on `mesh` (axis name -> devices; an axis of one device shards nothing); every
    rule used. One line a rule: what it placed. Else a DataError."""

    def sharded(spec: Sequence[str | None], rank: int) -> tuple[str | None, ...]:
        spec = tuple(axis if mesh.get(axis, 1) > 1 else None for axis in spec)
        return spec + (None,) * (rank - len(spec))  # JAX drops trailing Nones

    matched: dict[str, list[str]] = {pattern: [] for pattern in rules}
    wrong = []
    for variable in variables:
        path, shape = variable.path, tuple(variable.shape)
        patterns = [p for p in rules if re.fullmatch(p, path)]  # as Keras matches them (3.15)
        spec = sharded(getattr(variable.value.sharding, "spec", ()), len(shape))
        if len(patterns) == 1:
            matched[patterns[0]].append(path)
            if spec != sharded(rules[patterns[0]], len(shape)):
                wrong.append(f"{path} {shape} is sharded {spec}, not {rules[patterns[0]]} as planned")
        elif patterns:
            wrong.append(f"{path} matches {len(patterns)} rules ({', '.join(patterns)})")
        elif len(shape) >= 2 and hidden_dim in shape:
            wrong.append(f"{path} {shape} is placed by no rule: it is replicated on every chip")
    unused = [pattern for pattern, paths in matched.items() if not paths]
    if unused:
        wrong.append(f"the rule(s) {', '.join(map(repr, unused))} matched no variable (a typo, or another model?)")
    if wrong:
        many = f" ({len(wrong)} in all)" if len(wrong) > 4 else ""
        raise DataError(
            f"The model's sharding is not the plan's{many}: {'; '.join(wrong[:4])}. Correct the layout rules."
        )
    return [f"{pattern:<36} {rules[pattern]}: {len(paths)} variables" for pattern, paths in matched.items()]
