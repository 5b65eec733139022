"""The mesh and the memory plan of a language model's run, from its sizes (`model_sizes`: no weight read). One plan
for notebook 10's fine-tuning through KerasHub and notebook 11's GRPO through Tunix: the weights, what trains and
AdamW's state of it, the reference model and the rollout's KV cache (GRPO), the activations; against 90% of a chip.
The mesh: notebook 10's MESH parsed (a model axis dividing the width), notebook 11's checked against how Tunix
shards a Gemma."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from nbkit.accel.accelerator import CHIP_GIB  # noqa: F401 (notebooks 10 and 11 read it here)
from nbkit.errors import ParameterError
from nbkit.llm.model_sizes import Sizes

# ---- the mesh ----


def parse_mesh(mesh: str, devices: int, axes: tuple[str, str] = ("batch", "model")) -> tuple[int, int] | None:
    """MESH as devices on `axes`: "data" -> (devices, 1), "2x4" -> (2, 4); "auto" -> None (the caller picks)."""
    if mesh == "auto":
        return None
    if mesh == "data":
        return devices, 1
    found = re.fullmatch(r"(\d+)x(\d+)", mesh)
    if not found or int(found[1]) * int(found[2]) != devices:
        examples = [f"'1x{devices}'"] + [f"'2x{devices // 2}'"] * (devices % 2 == 0)
        one = " (one device: on a CPU, SIMULATE_DEVICES=8 splits it into 8, as a TPU v5e-8 has chips)" * (devices == 1)
        raise ParameterError(
            f"MESH={mesh!r}: 'auto', 'data', or {axes[0]} x {axes[1]} devices multiplying to the {devices} devices "
            f"here{one} (such as {' or '.join(examples)})."
        )
    return int(found[1]), int(found[2])


def _mesh_problems(model: Sizes, fsdp: int, tp: int, rows: int) -> list[str]:
    """What does not divide as Tunix shards a Gemma: the vocabulary, heads, feed-forward width and (above
    one) key/value heads over tp; the width over fsdp and tp; the rows of a step (batch x generations) over
    fsdp. Gemma 4's too: its global layers' key/value heads over tp, its per-layer embeddings' width over each
    axis, its experts over fsdp and their width over tp. Empty: the mesh fits."""
    needs = [
        ("vocabulary", model.vocabulary, tp),
        ("query heads", model.heads, tp),
        ("feed-forward width", model.feed_forward, tp),
        ("width", model.width, fsdp * tp),
        ("rows a step (BATCH_SIZE x NUM_GENERATIONS)", rows, fsdp),
    ]
    if model.kv_heads > 1:
        needs.append(("key/value heads", model.kv_heads, tp))
    if model.global_layers and model.key_is_value:  # Tunix's k_einsum of K=V layers: even one head splits over tp
        needs.append(("global layers' key/value heads (K=V)", model.global_kv_heads, tp))
    if model.per_layer_width:
        needs += [("per-layer embedding width", model.per_layer_width, by) for by in (fsdp, tp)]
    if model.experts:
        needs += [("experts", model.experts, fsdp), ("experts' feed-forward width", model.expert_feed_forward, tp)]
    return [f"the {what} ({size}) does not divide by {by}" for what, size, by in needs if size % by]


def pick_mesh(model: Sizes, devices: int, rows: int, mesh: str | tuple[int, int]) -> tuple[int, int]:
    """(fsdp, tp) of MESH for Tunix: "data" (every device on fsdp), "FxT" (checked: F x T devices), or "auto": the
    first of tp = 4, 2, 1, 8 whose mesh fits."""
    if isinstance(mesh, str):
        mesh = parse_mesh(mesh, devices, ("fsdp", "tp")) or "auto"
    candidates = [mesh] if mesh != "auto" else [(devices // tp, tp) for tp in (4, 2, 1, 8) if devices % tp == 0]
    for fsdp, tp in candidates:
        if not _mesh_problems(model, fsdp, tp, rows):
            return fsdp, tp
    fsdp, tp = candidates[0]
    if model.width % devices:  # Tunix splits the width over every device: no mesh of this many can
        raise ParameterError(
            f"the model's width ({model.width}) does not divide by the {devices} devices, and Tunix shards it "
            f"over all of them: no MESH or BATCH_SIZE can fix that. On a CPU, set SIMULATE_DEVICES to a divisor "
            f"of {model.width} (8, as a TPU v5e-8 has chips)."
        )
    raise ParameterError(
        f"MESH {fsdp}x{tp} (fsdp x tp) cannot shard this model: {'; '.join(_mesh_problems(model, fsdp, tp, rows))}. "
        f"Give another MESH (fsdp x tp devices, or 'data': every device on fsdp), or another BATCH_SIZE."
    )


# ---- the memory plan ----


@dataclass
class _Plan:
    """Bytes per chip of a run on a mesh, by part."""

    parameters: int
    trained: int
    mesh: tuple[int, int]
    axes: tuple[str, str]
    parts: dict[str, float]  # bytes a chip
    chip: float | None  # bytes a chip has (None: unknown, as on a CPU)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.chip is None or self.total <= 0.9 * self.chip  # XLA needs room of its own

    def describe(self) -> str:
        chip = f"of {_size(self.chip)}" if self.chip else "(the chip's memory is unknown here: not checked)"
        whole = self.trained == self.parameters
        parts = [f"{name} {'~' * (name == 'activations')}{_size(size)}" for name, size in self.parts.items()]
        return "\n".join(
            [
                f"memory plan, mesh {self.mesh[0]} ({self.axes[0]}) x {self.mesh[1]} ({self.axes[1]}): "
                f"{self.parameters / 1e6:,.1f}M parameters, {self.trained / 1e6:,.3f}M of them trained"
                + ("" if whole else " (LoRA)"),
                f"per chip: {' + '.join(parts)} = {_size(self.total)} {chip}",
                *self.notes,
            ]
        )


def _size(count: float) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**29 else f"{count / 2**20:.1f} MiB"


def _lora_kernels(model: Sizes, grpo: bool, layer: int) -> dict[str, tuple[int, int, bool]]:
    """Each kernel of `layer` LoRA may adapt -> (A's rows, B's columns, whether A holds the width). KerasHub's
    EinsumDense (notebook 10): A holds every axis but the last. qwix beside Tunix's einsums (notebook 11): A holds the
    contracted axes, and the key and value kernels are one (with the query too where the heads are as many). Gemma 4's
    layers differ: a global layer's head size and K/V heads, no key or value of a KV-shared layer's own (no value
    where K=V), a double-wide feed-forward."""
    width, heads, inner = model.width, model.heads, model.layer_feed_forward(layer)
    head, kv_heads, projections = model.attention(layer)
    feed_forward = {
        "ffw_gating": (width, inner, True),
        "ffw_gating_2": (width, inner, True),
        "ffw_linear": (inner, width, False),
    }
    if not grpo:
        attention = {"query": (heads * width, head, True), "key": (kv_heads * width, head, True)}
        attention["value"] = attention["key"]
        attention = {name: attention[name] for name in ("query", "key", "value")[: 1 + projections]}
        return {**attention, "attention_output": (heads * head, width, False), **feed_forward}
    attention = {"query": (width, heads * head, True)}
    if projections:
        attention["key_value"] = (width, projections * kv_heads * head, True)
    if heads == kv_heads and projections == 2:
        attention = {"query_key_value": (width, 3 * heads * head, True)}
    return {**attention, "attention_output": (heads * head, width, False), **feed_forward}


def _lora(model: Sizes, rank: int, targets: Sequence[str], split: int, grpo: bool) -> tuple[int, float]:
    """(LoRA's parameters, those a chip holds: under GRPO every one split over the `split` devices; else the factor
    that holds the width split over the model axis, as `sharding.layout_rules` places it). A ParameterError when
    the rank is not below the smallest dimension of a target kernel (a rank that high adds no capacity)."""
    count, on_chip = 0, 0.0
    for layer in range(model.layers):
        kernels = _lora_kernels(model, grpo, layer)
        for name in kernels if grpo else [name for name in targets if name in kernels]:
            rows, columns, in_a = kernels[name]
            if rank >= min(rows, columns):
                raise ParameterError(
                    f"LORA_RANK={rank} is at or above {min(rows, columns)}, the smallest dimension of the {name} "
                    f"kernels ({rows} x {columns}): a rank that high adds parameters, not capacity. "
                    f"Give a LORA_RANK below {min(rows, columns)}, such as {max(1, min(rows, columns) // 4)}."
                )
            count += rank * (rows + columns)
            on_chip += rank * (rows / split + columns if in_a else rows + columns / split)
    return count, count / split if grpo else on_chip


def memory_plan(
    model: Sizes,
    devices: int,
    mesh: tuple[int, int] | None,
    sequences: float,
    tokens: int,
    lora_rank: int,
    lora_targets: Sequence[str] = ("query", "value"),
    weight_bytes: int = 2,
    chip_gib: float | None = None,
    grpo: bool = False,
) -> _Plan:
    """The plan of a run of `model` on `devices` chips, `mesh` (batch or fsdp, model or tp devices): a chip's
    activations hold `sequences` of `tokens` (a batch shard's under KerasHub's layout; under Tunix's, a step's rows
    over every device). Weights: `weight_bytes` each (bfloat16: 2), the text model's split over the model axis
    (KerasHub, `sharding.layout_rules`) or over every device (Tunix's FSDP), any vision or audio encoder's whole on
    every chip in float32 (KerasHub runs a vision encoder in float32 whatever the model's dtype: a bound for audio).
    What trains (LoRA of `lora_rank` on `lora_targets`, on every kernel under GRPO; rank 0: every weight) with its
    gradient and AdamW's two moments in float32. `grpo` (notebook 11): a reference model (the base itself under
    LoRA, else a copy) and the rollouts' KV cache, sequences x tokens x layers x 2 x kv heads x head_dim. The
    activations: `_activations`. mesh None ("auto"): all devices on the batch axis when that fits a chip, else as
    many on the model axis as divide the width."""
    arguments = (sequences, tokens, lora_rank, lora_targets, weight_bytes, chip_gib, grpo)
    widest = max(d for d in range(1, devices + 1) if devices % d == 0 and model.width % d == 0)
    if mesh is None:
        data = memory_plan(model, devices, (devices, 1), *arguments)
        if data.fits:
            data.notes.append("MESH='auto': data parallel (the model fits one chip)")
            return data
        mesh = (devices // widest, widest)
    if model.width % mesh[1]:
        raise ParameterError(
            f"MESH={mesh[0]}x{mesh[1]}: the layout splits the model's hidden axis ({model.width}) over the model "
            f"axis, and {mesh[1]} devices do not divide {model.width}. Give a model axis that divides it, such as "
            f"MESH='{devices // widest}x{widest}'."
        )
    split = mesh[0] * mesh[1] if grpo else mesh[1]  # Tunix's FSDP splits every array over every device
    lora, lora_on_chip = _lora(model, lora_rank, lora_targets, split, grpo)
    trained, trained_on_chip = (lora, lora_on_chip) if lora_rank else (model.parameters, model.parameters / split)
    weights = model.parameters / split * weight_bytes + model.vision * 4  # KerasHub keeps the vision towers float32
    parts = {"weights": weights, "trained state": trained_on_chip * 4 * 4}
    if grpo:
        parts["reference"] = 0.0 if lora_rank else weights
        parts["KV cache"] = sequences * tokens * _cached_values(model) * weight_bytes
    parts["activations"] = sequences * tokens * _activations(model, tokens, weight_bytes, all_experts=not grpo)
    axes = ("fsdp", "tp") if grpo else ("batch", "model")
    plan = _Plan(model.parameters + model.vision, trained, mesh, axes, parts, chip_gib * 2**30 if chip_gib else None)
    if not plan.fits:
        fixes = _fixes(grpo, devices, lora_rank, tokens, sequences)
        largest = max(parts, key=parts.get)
        plan.notes.append(
            f"does not fit: {_size(plan.total)} a chip is over 90% of its {_size(plan.chip)}, the {largest} the most "
            f"({_size(parts[largest])}). {fixes[largest]}."
        )
    return plan


def _cached_values(model: Sizes) -> int:
    """The values a token leaves in the KV cache: a key and a value of each K/V head in each layer that computes
    its own (Gemma 4's KV-shared layers read an earlier layer's; its global layers have their own head size)."""
    found = 0
    for layer in range(model.layers):
        size, kv_heads, projections = model.attention(layer)
        found += 2 * kv_heads * size if projections else 0
    return found


def _activations(model: Sizes, tokens: int, weight_bytes: int, all_experts: bool) -> int:
    """Bytes the backward pass keeps for each token of a sequence of `tokens` (not split over the model axis: a
    bound), in the compute dtype (`weight_bytes`): per layer 6 widths (the block's input, norms, residuals), 4
    feed-forward widths (the two gates, the gelu, their product), 3 x (query + key/value heads) x head_dim (the
    projections after norm and RoPE, attention's result) and 3 x query heads x tokens (the attention weights in
    float32 and the compute dtype); then the logits over the vocabulary in the compute dtype, the loss' float32
    copy and its float32 gradient. Gemma 4 adds per layer its per-layer input (3 of its width: the gate, the gelu,
    their product; and 2 widths, the projection up and its norm) and its experts' 4 feed-forward widths each: every
    expert's under KerasHub (`all_experts`: its MoE block computes each for every token), else the chosen ones'."""
    values = 0
    for layer in range(model.layers):
        size, kv_heads, _ = model.attention(layer)
        values += 6 * model.width + 4 * model.layer_feed_forward(layer) + 3 * (model.heads + kv_heads) * size
        values += 3 * model.heads * tokens
    if model.per_layer_width:
        values += model.layers * (3 * model.per_layer_width + 2 * model.width)
    if model.experts:
        experts = model.experts if all_experts else model.experts_per_token
        values += model.layers * (4 * experts * model.expert_feed_forward + model.experts + 3 * model.width)
    return values * weight_bytes + model.vocabulary * (weight_bytes + 8)


def _fixes(grpo: bool, devices: int, lora_rank: int, tokens: int, sequences: float) -> dict[str, str]:
    """Each part of a plan -> how to make it smaller, in the notebook's parameters."""
    if grpo:
        shorter = "Lower BATCH_SIZE, NUM_GENERATIONS, MAX_PROMPT_LENGTH or MAX_NEW_TOKENS"
        return {
            "weights": "Give a smaller MODEL",
            "trained state": f"Give a smaller LORA_RANK (now {lora_rank})" if lora_rank else "Train LoRA (LORA_RANK>0)",
            "reference": "Train LoRA (LORA_RANK above 0: the base model is then the reference)",
            "KV cache": shorter,
            "activations": shorter,
        }
    return {
        "weights": f"Give a smaller preset, or more devices on the model axis (MESH='1x{devices}')",
        "trained state": f"Give a smaller LORA_RANK (now {lora_rank}), or fewer LoRA targets",
        "activations": (
            f"Give a shorter SEQUENCE_LENGTH (now {tokens}) or a smaller PER_REPLICA_BATCH (now {sequences})"
        ),
    }
