"""A Gemma / Gemma 3 / Gemma 4 sharded over a mesh of chips by KerasHub (notebook 10): the layout map that shards the
hidden axis (or another wide axis) over the mesh's "model" axis, and the check, once the model is built, that every
large weight is sharded as planned (a rule that matched nothing, or a large weight no rule placed, is an error: Keras
itself leaves such a weight replicated without a word, which then runs out of memory). The mesh and the memory plan
are `planning`'s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nbkit.errors import DataError

# The layers holding the hidden axis, in Gemma, Gemma 3 and Gemma 4 alike -> (the kernel's layout, the LoRA kernel
# that holds the hidden axis and its layout). The hidden axis (640 ... 5376 in Gemma 3, 1536 ... 5376 in Gemma 4)
# divides by 8 in every size; the heads axis, which Gemma's own map shards, does not (1 key/value head in Gemma 3 1B:
# keras-hub#1613).
_HIDDEN_AXIS = {
    "query": ((None, "model", None), "lora_kernel_a", (None, "model", None)),  # (heads, hidden, head_dim)
    "key": ((None, "model", None), "lora_kernel_a", (None, "model", None)),
    "value": ((None, "model", None), "lora_kernel_a", (None, "model", None)),
    "attention_output": ((None, None, "model"), "lora_kernel_b", (None, "model")),  # (heads, head_dim, hidden)
    "ffw_gating": (("model", None), "lora_kernel_a", ("model", None)),  # (hidden, intermediate)
    "ffw_gating_2": (("model", None), "lora_kernel_a", ("model", None)),
    "ffw_linear": ((None, "model"), "lora_kernel_b", (None, "model")),  # (intermediate, hidden)
}
# Gemma 4's per-layer embeddings (E2B, E4B): the table (vocabulary, layers x 256) on its wide axis, 2.35B of E2B's
# 4.63B text parameters (its vocabulary need not divide the model axis: a tiny one does not); the projection from the
# hidden axis into it, and each layer's gate (hidden, 256) and up projection (256, hidden) on the hidden axis.
_PER_LAYER = {
    "per_layer_token_embedding/embeddings": (None, "model"),
    "per_layer_model_projection/kernel": ("model", None),
    ".*/per_layer_input_gate/kernel": ("model", None),
    ".*/per_layer_up_proj/kernel": (None, "model"),
}
# Gemma 4's mixture of experts (26B-A4B): the router (hidden, experts) and the expert bank (experts, hidden, inner) /
# (experts, inner, hidden) on the hidden axis (128 experts would divide 8 too; a tiny model's 4 do not).
_EXPERTS = {
    ".*/moe_router/proj/kernel": ("model", None),
    ".*/moe_expert_bank/gate_proj": (None, "model", None),
    ".*/moe_expert_bank/up_proj": (None, "model", None),
    ".*/moe_expert_bank/down_proj": (None, None, "model"),
}


def layout_rules(lora_targets: Sequence[str] = (), config: dict[str, Any] | None = None) -> dict[str, tuple]:
    """Regular expressions matching whole Gemma / Gemma 3 / Gemma 4 variable paths (Keras' LayoutMap uses
    `re.fullmatch`) -> their layout on a ("batch", "model") mesh: the hidden axis on "model", in the token embedding,
    every attention and feed-forward kernel, and the LoRA kernel of each of `lora_targets` that holds the hidden axis
    (a map written for the base kernels leaves the LoRA kernels replicated; the other, rank-sized, is whole: `()`);
    where the backbone `config` (KerasHub's) has them, Gemma 4's per-layer embeddings and its experts."""
    config = config or {}
    rules: dict[str, tuple[str | None, ...]] = {"token_embedding/embeddings": (None, "model")}
    for name, (kernel, lora_kernel, lora_layout) in _HIDDEN_AXIS.items():
        rules[f".*/{name}/kernel"] = kernel
        if name in lora_targets:
            rules[f".*/{name}/{lora_kernel}"] = lora_layout
            other = "lora_kernel_b" if lora_kernel == "lora_kernel_a" else "lora_kernel_a"
            rules[f".*/{name}/{other}"] = ()  # (rank, head_dim or intermediate): whole on every chip, as planned
    if config.get("hidden_size_per_layer_input"):
        rules.update(_PER_LAYER)
    if config.get("enable_moe_block"):
        rules.update(_EXPERTS)
    return rules


def layout_map(mesh: Any, rules: dict[str, tuple[str | None, ...]]) -> Any:
    import keras

    found = keras.distribution.LayoutMap(mesh)
    for pattern, layout in rules.items():
        found[pattern] = layout
    return found


def check_sharding(
    variables: Sequence[Any],
    rules: dict[str, tuple[str | None, ...]],
    hidden_dim: int,
    mesh: dict[str, int],
    whole: Sequence[Any] = (),
) -> list[str]:
    """Every large variable (two axes or more and more elements than the width `hidden_dim`: every kernel and table,
    with a hidden axis or not; or, whatever its axes, 1% of the variables' elements: no norm's scale or scalar is)
    placed by exactly one rule and sharded as that rule says on `mesh` (axis name -> devices; an axis of one device
    shards nothing); every rule used. `whole`: variables meant to be whole on every
    chip (a frozen vision or audio encoder's, as the memory plan counts them), said, not checked. One line a rule:
    what it placed. Else a DataError naming each variable left replicated or placed otherwise."""

    def sharded(spec: Sequence[str | None], rank: int) -> tuple[str | None, ...]:
        spec = tuple(axis if mesh.get(axis, 1) > 1 else None for axis in spec)
        return spec + (None,) * (rank - len(spec))  # JAX drops trailing Nones

    matched: dict[str, list[str]] = {pattern: [] for pattern in rules}
    wrong = []
    kept_whole = {id(variable) for variable in whole}
    share = sum(_count(variable.shape) for variable in variables) / 100
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
        elif (len(shape) > 1 and _count(shape) > hidden_dim or _count(shape) > share) and id(
            variable
        ) not in kept_whole:
            wrong.append(f"{path} {shape} is placed by no rule: it is replicated on every chip")
    unused = [pattern for pattern, paths in matched.items() if not paths]
    if unused:
        wrong.append(f"the rule(s) {', '.join(map(repr, unused))} matched no variable (a typo, or another model?)")
    if wrong:
        many = f" ({len(wrong)} in all)" if len(wrong) > 4 else ""
        raise DataError(
            f"The model's sharding is not the plan's{many}: {'; '.join(wrong[:4])}. Correct the layout rules."
        )
    said = [f"{pattern:<40} {rules[pattern]}: {len(paths)} variables" for pattern, paths in matched.items()]
    if whole:
        said.append(f"{'whole on every chip, as planned':<40} {sum(_count(v.shape) for v in whole):,} parameters")
    return said


def _count(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count
