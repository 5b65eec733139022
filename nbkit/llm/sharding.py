"""A Gemma / Gemma 3 language model over a mesh of chips (notebook 10): MESH parsed, a memory plan from the
preset's config (no weights read), the layout map that shards the hidden axis over the mesh's "model" axis,
and the check, once the model is built, that every large kernel is sharded as planned (a rule that matched
nothing, or a large kernel no rule placed, is an error: Keras itself leaves such a kernel replicated without
a word, which then runs out of memory)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nbkit.accel.accelerator import CHIP_GIB  # noqa: F401 (notebook 10 reads it here)
from nbkit.errors import DataError, ParameterError

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
# KerasHub's Gemma 3 presets' text models (config.json's "config"), for plans made without the files:
# (layers, query heads, key/value heads, hidden, intermediate); vocabulary 262,144 and head_dim 256 in all.
GEMMA3_CONFIGS = {
    f"Gemma 3 {name}": dict(
        zip(("num_layers", "num_query_heads", "num_key_value_heads", "hidden_dim", "intermediate_dim"), sizes),
        vocabulary_size=262144,
        head_dim=256,
        use_query_key_norm=True,
    )
    for name, sizes in {
        "1B": (26, 4, 1, 1152, 6912),
        "4B": (34, 8, 4, 2560, 10240),
        "12B": (48, 16, 8, 3840, 15360),
    }.items()
}


# ---- the memory plan ----


def parse_mesh(mesh: str, devices: int) -> tuple[int, int] | None:
    """MESH as (batch, model) devices: "data" -> (devices, 1), "2x4" -> (2, 4); "auto" -> None (the plan picks)."""
    if mesh == "auto":
        return None
    if mesh == "data":
        return devices, 1
    found = re.fullmatch(r"(\d+)x(\d+)", mesh)
    if not found or int(found[1]) * int(found[2]) != devices:
        raise ParameterError(
            f"MESH={mesh!r}: 'auto', 'data', or batch x model devices multiplying to the {devices} devices here "
            f"(such as '1x{devices}' or '2x{devices // 2}')."
        )
    return int(found[1]), int(found[2])


@dataclass
class _MemoryPlan:
    """Bytes per chip of a Gemma fine-tuned with LoRA under a (batch, model) mesh."""

    parameters: int
    lora_parameters: int
    mesh: tuple[int, int]
    weights: float  # bytes per chip
    lora_state: float  # LoRA weights, gradients and AdamW's two moments, float32
    activations: float  # an estimate: see `memory_plan`
    chip: float | None  # bytes a chip has (None: unknown, as on a CPU)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return self.weights + self.lora_state + self.activations

    @property
    def fits(self) -> bool:
        return self.chip is None or self.total <= 0.9 * self.chip  # XLA needs room of its own

    def describe(self) -> str:
        chip = f"of {_size(self.chip)}" if self.chip else "(the chip's memory is unknown here: not checked)"
        return "\n".join(
            [
                f"memory plan, mesh {self.mesh[0]} (batch) x {self.mesh[1]} (model): {self.parameters / 1e6:,.1f}M "
                f"parameters, {self.lora_parameters / 1e6:,.3f}M of them LoRA's",
                f"per chip: weights {_size(self.weights)} + LoRA state {_size(self.lora_state)} + activations "
                f"~{_size(self.activations)} = {_size(self.total)} {chip}",
                *self.notes,
            ]
        )


def _size(count: float) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**29 else f"{count / 2**20:.1f} MiB"


def _gemma_sizes(config: dict[str, Any], lora_rank: int, lora_targets: Sequence[str], model_axis: int) -> tuple:
    """(the text model's parameters, the vision encoder's, LoRA's, LoRA's on a chip) of a GemmaBackbone /
    Gemma3Backbone config. LoRA's A and B of a kernel: the one that holds the hidden axis is split over the model
    axis, as `layout_rules` places it. A ParameterError when the rank is not below the smallest dimension of a
    target kernel (an update of that rank adds parameters and no capacity)."""
    hidden, layers, heads = config["hidden_dim"], config["num_layers"], config["num_query_heads"]
    kv_heads, head = config["num_key_value_heads"], config["head_dim"]
    # Gemma (1 and 2) halves intermediate_dim in its gates; Gemma 3 does not.
    inner = config["intermediate_dim"] // (1 if "use_query_key_norm" in config else 2)
    shapes = {  # each kernel as the matrix LoRA adapts: (A's rows, B's columns)
        "query": (heads * hidden, head),
        "key": (kv_heads * hidden, head),
        "value": (kv_heads * hidden, head),
        "attention_output": (heads * head, hidden),
        "ffw_gating": (hidden, inner),
        "ffw_gating_2": (hidden, inner),
        "ffw_linear": (inner, hidden),
    }
    for name in lora_targets:
        if lora_rank >= min(shapes[name]):
            raise ParameterError(
                f"LORA_RANK={lora_rank} is at or above {min(shapes[name])}, the smallest dimension of the {name} "
                f"kernels ({' x '.join(map(str, shapes[name]))}): a rank that high adds parameters, not capacity. "
                f"Give a LORA_RANK below {min(shapes[name])}, such as {max(1, min(shapes[name]) // 4)}."
            )
    per_layer = sum(a * b for a, b in shapes.values()) + 6 * hidden  # + the norms' scales
    targets = [(shapes[name], _HIDDEN_AXIS[name][1] == "lora_kernel_a") for name in lora_targets]
    lora = layers * lora_rank * sum(a + b for (a, b), _ in targets)
    on_chip = layers * lora_rank * sum(a / model_axis + b if in_a else a + b / model_axis for (a, b), in_a in targets)
    vision = (config.get("vision_encoder") or {}).get("config")  # Gemma 3's SigLIP encoder, frozen: weights only
    if vision:  # its layers (attention 4 w^2, MLP 2 w x intermediate), patch and position embeddings, projection
        width, patch = vision["hidden_dim"], vision["patch_size"]
        vision = width * (vision["num_layers"] * (4 * width + 2 * vision["intermediate_dim"]) + 3 * patch**2)
        vision += width * ((config["vision_encoder"]["config"]["image_size"] // patch) ** 2 + hidden)
    return config["vocabulary_size"] * hidden + layers * per_layer + hidden, vision or 0, lora, on_chip


def memory_plan(
    config: dict[str, Any],
    devices: int,
    mesh: tuple[int, int] | None,
    sequence_length: int,
    per_replica_batch: int,
    lora_rank: int,
    lora_targets: Sequence[str] = ("query", "value"),
    weight_bytes: int = 2,
    chip_gib: float | None = None,
) -> _MemoryPlan:
    """The plan of a backbone `config` (config.json's "config": no weights read). Weights: `weight_bytes` each
    (bfloat16: 2), the text model's split over the model axis, a vision encoder's whole on every chip. LoRA's
    weights, gradients and AdamW's two moments in float32, laid out as `layout_rules` does. Activations, what the
    backward pass keeps for each token of one batch shard (not split over the model axis: a bound), in the compute
    dtype (`weight_bytes`): per layer 6 hidden-wide values (the block's input, norms, residuals), 4 intermediate-
    wide (the two gates, the gelu, their product), 3 x (query + key/value heads) x head_dim (the projections, after
    norm and RoPE, attention's result) and 3 x query heads x sequence_length (the attention weights in float32 and
    the compute dtype); then the logits over the vocabulary in the compute dtype, the loss' float32 copy and its
    float32 gradient. mesh None ("auto"): all devices on the batch axis when that fits a chip, else as many on
    the model axis as divide the hidden size."""
    chip, hidden = (chip_gib * 2**30 if chip_gib else None), config["hidden_dim"]
    split = max(d for d in range(1, devices + 1) if devices % d == 0 and hidden % d == 0)  # the widest model axis
    if mesh is None:
        data = memory_plan(
            config,
            devices,
            (devices, 1),
            sequence_length,
            per_replica_batch,
            lora_rank,
            lora_targets,
            weight_bytes,
            chip_gib,
        )
        if data.fits:
            data.notes.append("MESH='auto': data parallel (the model fits one chip)")
            return data
        mesh = (devices // split, split)
    batch_axis, model_axis = mesh
    if hidden % model_axis:
        raise ParameterError(
            f"MESH={batch_axis}x{model_axis}: the layout splits the model's hidden axis ({hidden}) over the model "
            f"axis, and {model_axis} devices do not divide {hidden}. Give a model axis that divides it, such as "
            f"MESH='{devices // split}x{split}'."
        )
    text, vision, lora, lora_on_chip = _gemma_sizes(config, lora_rank, lora_targets, model_axis)
    inner = config["intermediate_dim"] // (1 if "use_query_key_norm" in config else 2)
    heads, kv_heads, head = config["num_query_heads"], config["num_key_value_heads"], config["head_dim"]
    layer = 6 * hidden + 4 * inner + 3 * (heads + kv_heads) * head + 3 * heads * sequence_length
    tokens = per_replica_batch * sequence_length  # a batch shard's, each chip's
    activations = tokens * (
        config["num_layers"] * layer * weight_bytes + config["vocabulary_size"] * (weight_bytes + 8)
    )
    weights = (text / model_axis + vision) * weight_bytes
    plan = _MemoryPlan(text + vision, lora, mesh, weights, lora_on_chip * 4 * 4, activations, chip)
    if not plan.fits:
        _note_the_largest_part(plan, devices, lora_rank, sequence_length, per_replica_batch)
    return plan


def _note_the_largest_part(
    plan: _MemoryPlan, devices: int, lora_rank: int, sequence_length: int, per_replica_batch: int
) -> None:
    """A note on `plan`, which does not fit a chip: its largest part, and how to make that smaller."""
    fixes = {
        "the weights": (plan.weights, f"a smaller preset, or more devices on the model axis (MESH='1x{devices}')"),
        "LoRA's state": (plan.lora_state, f"a smaller LORA_RANK (now {lora_rank}), or fewer LoRA targets"),
        "the activations": (
            plan.activations,
            f"a shorter SEQUENCE_LENGTH (now {sequence_length}) or a smaller "
            f"PER_REPLICA_BATCH (now {per_replica_batch})",
        ),
    }
    largest, (size, fix) = max(fixes.items(), key=lambda item: item[1][0])
    plan.notes.append(
        f"does not fit: {_size(plan.total)} a chip is over 90% of its {_size(plan.chip)}, {largest} the most "
        f"({_size(size)}). Give {fix}."
    )


# ---- sharding ----


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
