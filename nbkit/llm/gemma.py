"""The Gemma 3 or Gemma 2 that notebook 11 trains with Tunix: MODEL found (a folder, or a Kaggle Models handle attached
or fetched), its Hugging Face config.json read and checked against the weights' headers, the mesh checked against how
Tunix shards a Gemma, and the memory plan of a GRPO run (the trained model is written back by `export`). No Tunix or
JAX import: the notebook builds, trains and saves."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit.accel.accelerator import CHIP_GIB  # noqa: F401 (notebook 11 reads it here)
from nbkit.errors import ParameterError

# ---- the model's sizes, the mesh and the memory plan ----


def gemma_config(folder: str | Path) -> dict[str, Any]:
    """The sizes Tunix's Gemma code needs, from a Hugging Face folder's config.json (no weights read), with
    "family": "gemma3" (tunix.models.gemma3's ModelConfig) or "gemma2" (tunix.models.gemma's; "attention_types"
    as its AttentionType names). The folder is checked: config.json, tokenizer.model and *.safetensors there,
    and each layer's post-attention and post-feed-forward norms, which Tunix's Gemma 3 and Gemma 2 have."""
    folder = Path(folder)
    missing = [n for n in ("config.json", "tokenizer.model") if not (folder / n).is_file()]
    files = sorted(folder.glob("*.safetensors"))
    if missing or not files:
        raise ParameterError(
            f"MODEL={str(folder)!r} lacks {', '.join(missing or ['*.safetensors'])}: give a folder of Hugging Face "
            f"safetensors with config.json and tokenizer.model (notebook 10 writes one with EXPORT_TRANSFORMERS=True)."
        )
    config = _read_config(folder)
    kind = config["model_type"]
    sizes = {
        "num_layers": config["num_hidden_layers"],
        "num_embed": config["vocab_size"],
        "embed_dim": config["hidden_size"],
        "hidden_dim": config["intermediate_size"],
        "num_heads": config["num_attention_heads"],
        "head_dim": config["head_dim"],
        "num_kv_heads": config["num_key_value_heads"],
        "sliding_window_size": config.get("sliding_window"),
    }
    if kind == "gemma2":
        sizes = {"family": "gemma2", **sizes, **_gemma2_sizes(config, folder)}
    else:
        rope = config.get("rope_parameters") or {}
        sizes.update(
            {
                "family": "gemma3",
                "local_base_frequency": int(
                    config.get("rope_local_base_freq") or rope.get("sliding_attention", {}).get("rope_theta", 10_000)
                ),
                "global_base_frequency": int(
                    rope.get("full_attention", {}).get("rope_theta") or config.get("rope_theta", 10_000)
                ),
                "global_scale_factor": float(
                    (config.get("rope_scaling") or rope.get("full_attention") or {}).get("factor", 1.0)
                ),
            }
        )
    _check_weights(files, sizes)
    return sizes


def _read_config(folder: Path) -> dict[str, Any]:
    """config.json's text model (Gemma 3's text_config where it has one), refused unless it is Gemma 3 or 2 and
    gives every size as a whole number."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ParameterError(
            f"{folder}/config.json is not JSON ({error}): it is damaged or cut short. Copy the model folder again."
        ) from None
    config = config.get("text_config", config) if config.get("model_type") == "gemma3" else config
    kind = config.get("model_type")
    if kind not in ("gemma3_text", "gemma3", "gemma2"):
        raise ParameterError(
            f"{folder}/config.json: model_type {kind!r}: notebook 11 trains Gemma 3 (model_type gemma3_text or gemma3, "
            f"Tunix's tunix.models.gemma3) or Gemma 2 (gemma2, tunix.models.gemma). Give such a folder."
        )
    lacking = [key for key in _SIZE_KEYS if not isinstance(config.get(key), int)]
    if lacking:
        raise ParameterError(
            f"{folder}/config.json has no whole number for {', '.join(lacking)}: Tunix needs every size of the model. "
            f"Use the config.json that came with the weights (Hugging Face's Gemma configs give them all)."
        )
    return config


_SIZE_KEYS = (
    "num_hidden_layers",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "head_dim",
    "num_key_value_heads",
)


def _gemma2_sizes(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """What tunix.models.gemma's ModelConfig adds for Gemma 2; what it cannot express is refused: it scales
    queries by head_dim ** -0.5 (Gemma 2 2B's and 9B's query_pre_attn_scalar, not 27B's), RoPE base 10,000."""
    head, rope = (
        config["head_dim"],
        (config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta", 10_000)),
    )
    wrong = [
        f"{name} {value!r} (Tunix's Gemma 2 has {want})"
        for name, value, want in (
            ("query_pre_attn_scalar", config.get("query_pre_attn_scalar", head), head),
            ("rope_theta", rope, 10_000),
            (
                "hidden_activation",
                config.get("hidden_activation") or config.get("hidden_act", "gelu_pytorch_tanh"),
                "gelu_pytorch_tanh",
            ),
        )
        if value != want
    ]
    if wrong:
        raise ParameterError(
            f"{folder}/config.json: {'; '.join(wrong)}: Tunix's Gemma 2 code would compute another model. "
            f"Give Gemma 2 2B or 9B."
        )
    types = config.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(config["num_hidden_layers"])
    ]
    return {
        "final_logit_softcap": config.get("final_logit_softcapping"),
        "attn_logits_soft_cap": config.get("attn_logit_softcapping"),
        "use_post_attn_norm": True,
        "use_post_ffw_norm": True,
        "attention_types": ["LOCAL_SLIDING" if t == "sliding_attention" else "GLOBAL" for t in types],
    }


def _check_weights(files: Sequence[Path], sizes: dict[str, Any]) -> None:
    """The safetensors' headers (no weight read): readable, with each layer's post-attention and post-feed-forward
    norms (Tunix's Gemma 3 and 2 have them), and the shapes config.json promises (the embedding, layer 0's
    projections, the number of layers): a config of another model stops here, not in Tunix's build."""
    from safetensors import safe_open

    shapes = {}
    for path in files:
        try:
            with safe_open(str(path), "np") as f:
                shapes.update({key: tuple(f.get_slice(key).get_shape()) for key in f.keys()})
        except Exception as error:  # safetensors' own SafetensorError, or an OSError
            raise ParameterError(
                f"{path} cannot be read as safetensors ({type(error).__name__}: {error}): it is damaged or cut short. "
                f"Copy the model folder again."
            ) from None
    lacking = [n for n in ("post_attention_layernorm", "post_feedforward_layernorm") if not any(n in k for k in shapes)]
    if lacking:
        raise ParameterError(
            f"{files[0].parent}: this Gemma has no {' and no '.join(lacking)} weights, which Tunix's Gemma 3 and 2 "
            f"need (a KerasHub Gemma3Backbone built without use_post_attention_norm / use_post_ffw_norm). Re-export it "
            f"with notebook 10 of this kit (its tiny Gemma 3 has them), or give a Gemma 3 checkpoint."
        )
    width, heads = sizes["embed_dim"], sizes["head_dim"]
    expected = {
        "embed_tokens.weight": (sizes["num_embed"], width),
        "layers.0.self_attn.q_proj.weight": (sizes["num_heads"] * heads, width),
        "layers.0.self_attn.k_proj.weight": (sizes["num_kv_heads"] * heads, width),
        "layers.0.mlp.gate_proj.weight": (sizes["hidden_dim"], width),
    }
    layers = {int(m[1]) for k in shapes if "vision" not in k and (m := re.search(r"layers\.(\d+)\.", k))}
    wrong = [f"{len(layers)} layers (config.json: {sizes['num_layers']})"] if len(layers) != sizes["num_layers"] else []
    for suffix, shape in expected.items():
        found = [v for k, v in shapes.items() if k.endswith(suffix) and "vision" not in k]
        if found and found[0] != shape:
            wrong.append(f"{suffix} {found[0]} (config.json: {shape})")
    if wrong:
        raise ParameterError(
            f"{files[0].parent}: the weights do not match config.json: {'; '.join(wrong)}. The config belongs to "
            f"another model: use the config.json that came with these weights."
        )


def _mesh_problems(sizes: dict[str, Any], fsdp: int, tp: int, rows: int) -> list[str]:
    """What does not divide as Tunix shards a Gemma: the vocabulary, heads, feed-forward width and (above
    one) key/value heads over tp; the width over fsdp and tp; the rows of a step (batch x generations) over
    fsdp. Empty: the mesh fits."""
    needs = [
        ("vocabulary", sizes["num_embed"], tp),
        ("query heads", sizes["num_heads"], tp),
        ("feed-forward width", sizes["hidden_dim"], tp),
        ("width", sizes["embed_dim"], fsdp * tp),
        ("rows a step (BATCH_SIZE x NUM_GENERATIONS)", rows, fsdp),
    ]
    if sizes["num_kv_heads"] > 1:
        needs.append(("key/value heads", sizes["num_kv_heads"], tp))
    return [f"the {what} ({size}) does not divide by {by}" for what, size, by in needs if size % by]


def pick_mesh(sizes: dict[str, Any], devices: int, rows: int, mesh: str | tuple[int, int]) -> tuple[int, int]:
    """(fsdp, tp) of MESH: "data" (every device on fsdp), "FxT" (checked: F x T devices), or "auto": the first
    of tp = 4, 2, 1, 8 whose mesh fits."""
    if isinstance(mesh, str) and mesh != "auto":
        found = re.fullmatch(r"(\d+)x(\d+)", mesh) if mesh != "data" else re.match("", "")
        if not found or (mesh != "data" and int(found[1]) * int(found[2]) != devices):
            raise ParameterError(
                f"MESH={mesh!r}: 'auto', 'data', or fsdp x tp devices multiplying to the {devices} here "
                f"(such as '2x{devices // 2}')."
            )
        mesh = (devices, 1) if mesh == "data" else (int(found[1]), int(found[2]))
    candidates = [mesh] if mesh != "auto" else [(devices // tp, tp) for tp in (4, 2, 1, 8) if devices % tp == 0]
    for fsdp, tp in candidates:
        if not _mesh_problems(sizes, fsdp, tp, rows):
            return fsdp, tp
    fsdp, tp = candidates[0]
    if sizes["embed_dim"] % devices:  # Tunix splits the width over every device: no mesh of this many can
        raise ParameterError(
            f"the model's width ({sizes['embed_dim']}) does not divide by the {devices} devices, and Tunix shards it "
            f"over all of them: no MESH or BATCH_SIZE can fix that. On a CPU, set SIMULATE_DEVICES to a divisor "
            f"of {sizes['embed_dim']} (8, as a TPU v5e-8 has chips)."
        )
    raise ParameterError(
        f"MESH {fsdp}x{tp} (fsdp x tp) cannot shard this model: {'; '.join(_mesh_problems(sizes, fsdp, tp, rows))}. "
        f"Give another MESH (fsdp x tp devices, or 'data': every device on fsdp), or another BATCH_SIZE."
    )


@dataclass
class _Plan:
    """Bytes per chip of a GRPO run on an (fsdp, tp) mesh; each array is split over all the mesh's devices."""

    parameters: int
    trained: int
    parts: dict[str, float]
    chip: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.chip is None or sum(self.parts.values()) <= 0.9 * self.chip

    def describe(self) -> str:
        chip = f"of {_gib(self.chip)}" if self.chip else "(the chip's memory is unknown here: not checked)"
        parts = " + ".join(f"{name} {_gib(size)}" for name, size in self.parts.items())
        return "\n".join(
            [
                f"memory plan: {self.parameters / 1e6:,.1f}M parameters, {self.trained / 1e6:,.2f}M of them trained",
                f"per chip: {parts} = {_gib(sum(self.parts.values()))} {chip}",
                *self.notes,
            ]
        )


def _gib(count: float) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**29 else f"{count / 2**20:.1f} MiB"


def memory_plan(
    sizes: dict[str, Any],
    devices: int,
    lora_rank: int,
    rows: int,
    tokens: int,
    weight_bytes: int = 2,
    chip_gib: float | None = None,
) -> _Plan:
    """The plan (no weights read): the actor's weights; what trains (LoRA on attention and MLP, or every
    weight) with its gradient and AdamW's two moments in float32; the reference model (shared with the actor
    under LoRA, a copy otherwise); the rollout's KV cache, `rows` (batch x generations) x `tokens` (prompt +
    new) x layers x 2 x kv heads x head dim; the step's activations (an estimate: 16 widths and the logits a
    token and layer, as notebook 10's). A plan over 90% of `chip_gib` names what to lower."""
    embed, hidden, layers = sizes["embed_dim"], sizes["hidden_dim"], sizes["num_layers"]
    attention = embed * sizes["head_dim"] * (2 * sizes["num_heads"] + 2 * sizes["num_kv_heads"])
    per_layer = attention + 3 * embed * hidden + 4 * embed
    parameters = sizes["num_embed"] * embed + layers * per_layer + embed
    lora = (
        layers
        * lora_rank
        * (2 * embed + sizes["head_dim"] * (2 * sizes["num_heads"] + 2 * sizes["num_kv_heads"]) + 3 * (embed + hidden))
    )
    trained = lora if lora_rank else parameters
    weights = parameters * weight_bytes
    parts = {
        "actor": weights / devices,
        "trained state": trained * 4 * 4 / devices,
        "reference": 0.0 if lora_rank else weights / devices,
        "KV cache": rows * tokens * layers * 2 * sizes["num_kv_heads"] * sizes["head_dim"] * weight_bytes / devices,
        "activations": rows * tokens * (layers * 16 * embed * weight_bytes + sizes["num_embed"] * 4) / devices,
    }
    plan = _Plan(parameters, trained, parts, chip_gib * 2**30 if chip_gib else None)
    if not plan.fits:
        plan.notes.append(
            f"does not fit: over 90% of {_gib(plan.chip)}. Lower BATCH_SIZE, NUM_GENERATIONS, MAX_PROMPT_LENGTH or "
            f"MAX_NEW_TOKENS, or train LoRA (LORA_RANK above 0)."
        )
    return plan


# ---- the model, the tokenizer, the prompts ----


def find_model(model: str, environment: Any = None) -> tuple[str, str]:
    """(folder, why) of MODEL: a folder as given; a Kaggle Models handle (owner/model/framework/variation[/n])
    attached to the notebook, else fetched by kagglehub (internet on)."""
    if Path(model).is_dir() or model.startswith(("/", ".")) or model.count("/") < 3:
        if not Path(model).is_dir():
            raise ParameterError(
                f"MODEL={model!r} is not a folder, nor a Kaggle Models handle owner/model/framework/variation."
            )
        return model, "MODEL is a folder"
    from nbkit.inputs import datasets

    environment = environment or nbenv.detect()
    owner, name, framework, variation = model.split("/")[:4]
    versions = sorted(
        (environment.input_dir / name / framework / variation).glob("*"), key=lambda p: (len(p.name), p.name)
    )
    if versions:
        return str(versions[-1]), f"{model} is attached as a Kaggle Model"
    found, why_not = datasets.through_kagglehub(model, environment.platform, "model")
    if not found:
        raise ParameterError(
            f"MODEL={model!r}: not attached and {why_not}. Attach it ('Add Input' -> Models, after accepting its "
            f"license) or turn the internet on."
        )
    return found, f"kagglehub fetched {model}"
