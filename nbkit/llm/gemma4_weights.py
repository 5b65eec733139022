"""A Gemma 4 that notebook 11 trained with Tunix, written as Hugging Face's Gemma4ForCausalLM: the inverse of Tunix
0.1.7's gemma4 `params_safetensors` mapping (keys with no prefix, which both it and transformers read), and the
config.json transformers needs to compute the same model (layer types, proportional RoPE, K=V, KV sharing, the
double-wide MLP, per-layer inputs). Any LoRA is merged before (`export._merge_lora`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nbkit.errors import RunError

_NORMS = {
    "pre_attention_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "pre_ffw_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "attn._query_norm": "self_attn.q_norm",
}
_PER_LAYER_NORMS = {"post_per_layer_input_norm": "post_per_layer_input_norm"}
_MOE_NORMS = {
    "moe_pre_ffw_norm": "pre_feedforward_layernorm_2",
    "moe_post_ffw_norm": "post_feedforward_layernorm_2",
    "dense_post_ffw_norm": "post_feedforward_layernorm_1",
}


# Tunix 0.1.7's gemma4 ModelConfig defaults, for sizes that leave them out (the notebook's tiny model)
_DEFAULTS = {
    "final_logit_softcap": 30.0,
    "per_layer_input_dim": 0,
    "global_key_size": 512,
    "frac_shared_layers": 0.0,
    "k_eq_v_global": False,
    "local_base_frequency": 10_000,
    "local_rope_proportion": 1.0,
    "local_scale_factor": 1.0,
    "global_base_frequency": 1_000_000,
    "global_rope_proportion": 0.25,
    "global_scale_factor": 1.0,
}


def _unshared(sizes: dict[str, Any]) -> int:
    """The layers that compute their own keys and values, as Tunix counts them."""
    return int(sizes["num_layers"] - sizes.get("frac_shared_layers", 0.0) * sizes["num_layers"])


def hf_weights(params: dict[str, Any], sizes: dict[str, Any]) -> dict[str, np.ndarray]:
    """Tunix Gemma 4 parameters ("layers.0.attn.q_einsum.w" -> array, LoRA merged) as Gemma4ForCausalLM's names and
    layouts. The KV-shared layers' own key/value weights, which neither uses, are written as Google's checkpoints
    have them (Tunix's loader needs them; transformers skips them). Per-layer inputs come 3-D (Tunix 0.1.7) or
    flattened (its head): both are read."""
    sizes, width = {**_DEFAULTS, **sizes}, sizes["embed_dim"]
    p = {name: np.asarray(w) for name, w in params.items()}

    def heads_out(w: np.ndarray) -> np.ndarray:  # (N, D, H) -> (N*H, D)
        return np.ascontiguousarray(w.transpose(0, 2, 1).reshape(-1, width))

    out = {"embed_tokens.weight": p["embedder.input_embedding"], "norm.weight": p["final_norm.scale"]}
    if sizes.get("per_layer_input_dim"):
        out["embed_tokens_per_layer.weight"] = p["embedder.per_layer_input_embedding"].reshape(sizes["num_embed"], -1)
        projection = p["embedder.per_layer_model_projection.w"].reshape(width, -1)
        out["per_layer_model_projection.weight"] = np.ascontiguousarray(projection.T)
        out["per_layer_projection_norm.weight"] = p["embedder.per_layer_projection_norm.scale"]
    for i in range(sizes["num_layers"]):
        at, to = f"layers.{i}.", f"layers.{i}."
        out[f"{to}self_attn.q_proj.weight"] = heads_out(p[f"{at}attn.q_einsum.w"])
        out[f"{to}self_attn.o_proj.weight"] = np.ascontiguousarray(
            p[f"{at}attn.attn_vec_einsum.w"].reshape(-1, width).T
        )
        out[f"{to}self_attn.k_norm.weight"] = p[f"{at}attn._key_norm.scale"]
        if f"{at}attn.k_einsum.w" in p:  # K=V: no value projection
            out[f"{to}self_attn.k_proj.weight"] = heads_out(p[f"{at}attn.k_einsum.w"])
        else:
            k, v = p[f"{at}attn.kv_einsum.w"]
            out.update({f"{to}self_attn.k_proj.weight": heads_out(k), f"{to}self_attn.v_proj.weight": heads_out(v)})
        for name in ("gate_proj", "up_proj", "down_proj"):
            out[f"{to}mlp.{name}.weight"] = np.ascontiguousarray(p[f"{at}mlp.{name}.kernel"].T)
        norms = {**_NORMS, **(_PER_LAYER_NORMS if sizes.get("per_layer_input_dim") else {})}
        norms.update(_MOE_NORMS if sizes.get("enable_moe") else {})
        out.update({f"{to}{hf}.weight": p[f"{at}{ours}.scale"] for ours, hf in norms.items()})
        out[f"{to}layer_scalar"] = p[f"{at}skip_scale"].reshape(1)
        if sizes.get("per_layer_input_dim"):
            out[f"{to}per_layer_input_gate.weight"] = np.ascontiguousarray(p[f"{at}per_layer_input_gate.w"].T)
            out[f"{to}per_layer_projection.weight"] = np.ascontiguousarray(p[f"{at}per_layer_projection.w"].T)
        if sizes.get("enable_moe"):
            out.update(_moe_weights(p, at, to))
    return out


def _moe_weights(p: dict[str, np.ndarray], at: str, to: str) -> dict[str, np.ndarray]:
    gating = p[f"{at}moe.gating_einsum"]  # (experts, 2, F, D): gate then up
    return {
        f"{to}router.proj.weight": np.ascontiguousarray(p[f"{at}moe.router_logits"].T),
        f"{to}router.scale": p[f"{at}moe.router_scale"],
        f"{to}router.per_expert_scale": p[f"{at}moe.per_expert_scale"],
        f"{to}experts.gate_up_proj": gating.reshape(gating.shape[0], -1, gating.shape[-1]),
        f"{to}experts.down_proj": np.ascontiguousarray(p[f"{at}moe.linear"].transpose(0, 2, 1)),
    }


def _rope(sizes: dict[str, Any], short: str) -> dict[str, Any]:
    """One attention type's RoPE as transformers' Gemma 4 reads it: proportional (a share of the head turned,
    positions / factor) where Tunix turns a share or scales, else the default."""
    share, factor = sizes[f"{short}_rope_proportion"], sizes[f"{short}_scale_factor"]
    rope = {"rope_type": "default", "rope_theta": sizes[f"{short}_base_frequency"]}
    if short == "global" or share != 1.0 or factor != 1.0:
        rope.update(
            rope_type="proportional", partial_rotary_factor=share, **({"factor": factor} if factor != 1.0 else {})
        )
    return rope


def hf_config(sizes: dict[str, Any]) -> dict[str, Any]:
    """config.json's Gemma 4 keys (gemma4_text, Gemma4ForCausalLM) for the model `sizes` describe, every one written
    (transformers' defaults are another model's: per-layer inputs 256, global head dim 512, ...)."""
    sizes = {**_DEFAULTS, **sizes}
    types = ["full_attention" if t == "GLOBAL" else "sliding_attention" for t in sizes["attention_pattern"]]
    global_kv = sizes.get("num_global_kv_heads") or sizes["num_kv_heads"]
    if not sizes.get("k_eq_v_global") and global_kv != sizes["num_kv_heads"]:
        raise RunError(
            f"global K/V heads {global_kv} != {sizes['num_kv_heads']} without K=V: transformers' Gemma 4 gives the "
            f"global layers their own K/V heads only where keys are values. Not written."
        )
    shared = sizes["num_layers"] - _unshared(sizes)
    config = {
        "architectures": ["Gemma4ForCausalLM"],
        "model_type": "gemma4_text",
        "layer_types": types,
        "final_logit_softcapping": sizes.get("final_logit_softcap"),
        "hidden_size_per_layer_input": sizes.get("per_layer_input_dim", 0),
        "vocab_size_per_layer_input": sizes["num_embed"],
        "global_head_dim": sizes["global_key_size"],
        "num_global_key_value_heads": global_kv,
        "attention_k_eq_v": bool(sizes.get("k_eq_v_global")),
        "num_kv_shared_layers": shared,
        "use_double_wide_mlp": bool(shared and sizes.get("override_kv_shared_ffw_hidden")),
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "rope_parameters": {
            kind: _rope(sizes, short) for kind, short in (("sliding_attention", "local"), ("full_attention", "global"))
        },
        "enable_moe_block": bool(sizes.get("enable_moe")),
    }
    wide = sizes.get("override_kv_shared_ffw_hidden")
    if shared and wide and wide != 2 * sizes["hidden_dim"]:
        raise RunError(
            f"the shared layers' MLP is {wide} wide: transformers' doubles {sizes['hidden_dim']}. Not written."
        )
    if sizes.get("enable_moe"):
        config.update(
            num_experts=sizes["num_experts"],
            top_k_experts=sizes["num_experts_per_tok"],
            moe_intermediate_size=sizes["expert_dim"],
        )
    return config
