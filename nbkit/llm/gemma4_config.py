"""A Hugging Face Gemma 4 config.json (gemma4_text, or a multimodal gemma4's text_config) read as the sizes
`tunix.models.gemma4.ModelConfig` takes, refusing what Tunix's Gemma 4 would compute otherwise than transformers'
modeling_gemma4.py (compared line by line, Tunix 0.1.7 and transformers 5.12.1), and its weights' headers checked.
No Tunix or JAX import, except `check_tunix`'s look at the installed Tunix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nbkit.errors import ParameterError

# Tunix's Gemma 4 MoE router reads the pre-FFW-normed input where transformers' reads the residual: another model
# (logits 4.7-6.3 apart on a toy) in Tunix 0.1.7; fixed at its git head, commit e31e280e (June 2026).
_MOE_FIX = (
    "Tunix's git head (e31e280e or later: pip install git+https://github.com/google/tunix; Kaggle's TPU image has it)"
)


def check_tunix(sizes: dict[str, Any]) -> None:
    """Stop before anything loads where the installed Tunix cannot run this Gemma 4 (Tunix ModelConfig sizes) as
    transformers computes it: no tunix.models.gemma4 (before 0.1.7), or a mixture of experts routed on the normed
    input (0.1.7: its MoE's call takes no `router_input`)."""
    import importlib.metadata
    import importlib.util
    import inspect

    version = importlib.metadata.version("google-tunix")
    if importlib.util.find_spec("tunix.models.gemma4") is None:
        raise ParameterError(
            f"the installed Tunix (google-tunix {version}) has no Gemma 4 (tunix.models.gemma4): install "
            f"google-tunix 0.1.7 or later, or {_MOE_FIX}; or give a Gemma 3 or Gemma 2."
        )
    from tunix.models.gemma4 import moe

    if sizes.get("enable_moe") and "router_input" not in inspect.signature(moe.MoERagged.__call__).parameters:
        raise ParameterError(
            f"a Gemma 4 mixture of experts (26B-A4B): the installed Tunix (google-tunix {version}) routes each token "
            f"on its normed input where Google's model (and transformers) routes on the residual: another model, "
            f"logits 4.7-6.3 apart on a toy. Install {_MOE_FIX}, or give a dense Gemma 4 (E2B, E4B, 31B)."
        )


def gemma4_sizes(config: dict[str, Any], where: str) -> dict[str, Any]:
    """Tunix gemma4 ModelConfig keyword arguments (attention_pattern as AttentionType names) of a gemma4_text config,
    read with transformers' defaults for what it leaves out; a ParameterError names what Tunix would compute
    otherwise."""
    layers = config["num_hidden_layers"]
    types = list(
        config.get("layer_types") or [("full" if (i + 1) % 6 == 0 else "sliding") + "_attention" for i in range(layers)]
    )
    types[-1] = "full_attention"  # as transformers forces it
    k_eq_v = bool(config.get("attention_k_eq_v", False))
    shared = int(config.get("num_kv_shared_layers", 0) or 0)
    per_layer = config.get("hidden_size_per_layer_input", 256) or 0
    local, full = _rope(config, "sliding_attention", where), _rope(config, "full_attention", where)
    sizes = {
        "sliding_window_size": config.get("sliding_window", 512),
        "final_logit_softcap": config.get("final_logit_softcapping"),
        "attention_pattern": ["GLOBAL" if t == "full_attention" else "LOCAL_SLIDING" for t in types],
        "per_layer_input_dim": per_layer,
        # transformers gives global layers their own K/V heads only where K=V; Tunix wherever the number is set
        "num_global_kv_heads": config.get("num_global_key_value_heads") if k_eq_v else None,
        "global_key_size": config.get("global_head_dim", 512) or config["head_dim"],
        "k_eq_v_global": k_eq_v,
        "frac_shared_layers": shared / layers,
        "override_kv_shared_ffw_hidden": 2 * config["intermediate_size"]
        if shared and config.get("use_double_wide_mlp")
        else None,
        "local_base_frequency": local[0],
        "local_rope_proportion": local[1],
        "local_scale_factor": local[2],
        "global_base_frequency": full[0],
        "global_rope_proportion": full[1],
        "global_scale_factor": full[2],
    }
    if sizes["num_global_kv_heads"] is None:
        sizes["num_global_kv_heads"] = config["num_key_value_heads"]
    if config.get("enable_moe_block"):
        sizes.update(
            enable_moe=True,
            num_experts=config["num_experts"],
            num_experts_per_tok=config["top_k_experts"],
            expert_dim=config["moe_intermediate_size"],
            moe_dense_hidden_dim=config["intermediate_size"],
        )
    _refuse_what_tunix_computes_otherwise(config, types, shared, where)
    check_tunix(sizes)
    return sizes


def _rope(config: dict[str, Any], kind: str, where: str) -> tuple[float, float, float]:
    """(base, rotated proportion, scaling factor) of one attention type's RoPE, as transformers' Gemma 4 reads it:
    "default" turns the whole head; "proportional" (Gemma 4's global layers) a share of it, positions / factor."""
    defaults = {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
    }
    rope = (config.get("rope_parameters") or defaults)[kind]
    base = rope.get("rope_theta", defaults[kind]["rope_theta"])
    base = int(base) if float(base).is_integer() else base
    if rope.get("rope_type", "default") == "default":
        if kind == "full_attention" and config.get("global_head_dim", 512) not in (0, None, config["head_dim"]):
            raise ParameterError(
                f"{where}: the global layers' RoPE is 'default' with global_head_dim "
                f"{config.get('global_head_dim', 512)} != head_dim {config['head_dim']}: transformers computes it for "
                f"head_dim, Tunix for the global heads. "
                f"Give rope_parameters.full_attention rope_type 'proportional' (Gemma 4's own)."
            )
        return base, 1.0, 1.0
    if rope["rope_type"] != "proportional":
        raise ParameterError(
            f"{where}: {kind} RoPE type {rope['rope_type']!r}: Tunix's Gemma 4 computes 'default' and 'proportional' "
            f"(Gemma 4's own) only. Use the config.json that came with the weights."
        )
    return base, float(rope.get("partial_rotary_factor", 1.0)), float(rope.get("factor", 1.0))


def _refuse_what_tunix_computes_otherwise(config: dict[str, Any], types: list[str], shared: int, where: str) -> None:
    layers, width = config["num_hidden_layers"], config["hidden_size"]
    unshared, bidirectional = layers - shared, config.get("use_bidirectional_attention") == "all"
    wrong = [
        f"{name} {value!r} (Tunix's Gemma 4 has {want!r})"
        for name, value, want in (
            ("rms_norm_eps", config.get("rms_norm_eps", 1e-6), 1e-6),
            ("hidden_activation", config.get("hidden_activation", "gelu_pytorch_tanh"), "gelu_pytorch_tanh"),
            ("attention_bias", config.get("attention_bias", False), False),
            ("tie_word_embeddings", config.get("tie_word_embeddings", True), True),
            ("use_bidirectional_attention", config.get("use_bidirectional_attention") if bidirectional else None, None),
            ("vocab_size_per_layer_input", config.get("vocab_size_per_layer_input", 262_144), config["vocab_size"]),
        )
        if value != want
        and not (name == "vocab_size_per_layer_input" and not config.get("hidden_size_per_layer_input", 256))
    ]
    if shared and (unshared < 2 or types[unshared - 2 : unshared] != ["sliding_attention", "full_attention"]):
        wrong.append(
            f"num_kv_shared_layers {shared} of {layers} layers: Tunix's shared layers read the last unshared layer "
            f"(global) and the one before (local), so the unshared layers must end sliding, full (here "
            f"{types[max(0, unshared - 2) : unshared]})"
        )
    if shared and int(layers - shared / layers * layers) != unshared:
        wrong.append(f"num_kv_shared_layers {shared} of {layers}: Tunix's fraction of them rounds to another count")
    heads, head_dims = (
        config["num_attention_heads"],
        {config["head_dim"], config.get("global_head_dim", 512) or config["head_dim"]},
    )
    kv_heads = {
        config["num_key_value_heads"],
        config.get("num_global_key_value_heads") or config["num_key_value_heads"],
    }
    if heads == width or width in head_dims or head_dims & kv_heads:
        wrong.append(
            f"sizes that Tunix's loader cannot tell apart (width {width}, heads {heads}, head dims "
            f"{sorted(head_dims)}, K/V heads {sorted(kv_heads)}): it finds a weight's axes by their sizes"
        )
    if wrong:
        raise ParameterError(
            f"{where}: {'; '.join(wrong)}: Tunix's Gemma 4 would compute another model than these weights were "
            f"trained as. Give another Gemma 4 (E2B, E4B, 31B)."
        )


def check_gemma4_weights(shapes: dict[str, tuple[int, ...]], sizes: dict[str, Any], folder: Path) -> list[str]:
    """The text weights' keys and shapes against `sizes` (headers only); returns the keys Tunix leaves out (a
    multimodal model's vision and audio towers) to be said. Tunix 0.1.7 reads keys with no prefix or
    `model.language_model.`, not `model.` (what Gemma4ForCausalLM.save_pretrained writes)."""
    text = {re.sub(r"^model\.language_model\.", "", k): v for k, v in shapes.items()}
    left_out = sorted(k for k in text if k.startswith("model."))
    if any(k.startswith("model.layers.") or k == "model.embed_tokens.weight" for k in left_out):
        raise ParameterError(
            f"{folder}: the weights are named model.layers.* (transformers' Gemma4ForCausalLM.save_pretrained), which "
            f"Tunix's Gemma 4 loader does not read: it reads names with no prefix or model.language_model.*. Save "
            f"them again without the 'model.' prefix (safetensors' load_file / save_file, renaming the keys)."
        )
    width, layers = sizes["embed_dim"], sizes["num_layers"]
    unshared = layers - round(sizes["frac_shared_layers"] * layers)
    expected = {"embed_tokens.weight": (sizes["num_embed"], width)}
    for i, kind in enumerate(sizes["attention_pattern"]):
        glob = kind == "GLOBAL"
        head = sizes["global_key_size"] if glob else sizes["head_dim"]
        kv = sizes["num_global_kv_heads"] if glob else sizes["num_kv_heads"]
        expected[f"layers.{i}.self_attn.q_proj.weight"] = (sizes["num_heads"] * head, width)
        if i < unshared:
            expected[f"layers.{i}.self_attn.k_proj.weight"] = (kv * head, width)
        wide = sizes["override_kv_shared_ffw_hidden"] if i >= unshared and sizes["override_kv_shared_ffw_hidden"] else 0
        expected[f"layers.{i}.mlp.gate_proj.weight"] = (wide or sizes["hidden_dim"], width)
    if sizes["per_layer_input_dim"]:
        expected["embed_tokens_per_layer.weight"] = (sizes["num_embed"], layers * sizes["per_layer_input_dim"])
    wrong = [f"{k} {text.get(k, 'missing')} (config.json: {v})" for k, v in expected.items() if text.get(k) != v]
    found = {int(m[1]) for k in text if (m := re.match(r"layers\.(\d+)\.", k))}
    if len(found) != layers:
        wrong.insert(0, f"{len(found)} layers (config.json: {layers})")
    if wrong:
        raise ParameterError(
            f"{folder}: the weights do not match config.json: {'; '.join(wrong[:4])}. The config belongs to another "
            f"model: use the config.json that came with these weights."
        )
    return left_out
