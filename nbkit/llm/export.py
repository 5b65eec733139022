"""A Gemma that notebook 11 trained with Tunix, written back as Hugging Face safetensors: Tunix's parameters
renamed and laid out as Gemma3ForCausalLM's / Gemma2ForCausalLM's, any qwix LoRA merged in, with config.json and
tokenizer.model, so that Tunix's `params_safetensors` loaders (and notebook 11 as MODEL) read it again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import RunError

# Each family's norms, every one written (a missing one is a KeyError, never a model without it): Gemma 2's
# post-attention norm is post_attn_norm, Gemma 3's post_attention_norm, and Gemma 3 has query/key norms.
_SHARED_NORMS = {
    "pre_attention_norm": "input_layernorm",
    "pre_ffw_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_NORMS = {
    "gemma3": {
        **_SHARED_NORMS,
        "post_attention_norm": "post_attention_layernorm",
        "attn._query_norm": "self_attn.q_norm",
        "attn._key_norm": "self_attn.k_norm",
    },
    "gemma2": {**_SHARED_NORMS, "post_attn_norm": "post_attention_layernorm"},
}


def _merge_lora(params: dict[str, Any], scale: float) -> dict[str, Any]:
    """`params` with each qwix LoRA pair ("<weight>_lora_a", "<weight>_lora_b") added into its weight, times
    `scale` (alpha / rank), and dropped. a holds the weight's contracted axes then the rank, b the rank then the
    others (qwix's layout): Tunix's Gemma query and key/value einsums contract their second-last axis (the width)."""
    merged = {n: w for n, w in params.items() if not n.endswith(("_lora_a", "_lora_b"))}
    for name in [n[: -len("_lora_a")] for n in params if n.endswith("_lora_a")]:
        weight = merged[name]
        delta = np.tensordot(params[f"{name}_lora_a"], params[f"{name}_lora_b"], 1) * scale
        delta = delta if delta.shape == weight.shape else np.moveaxis(delta, 0, -2)
        if delta.shape != weight.shape:
            raise RunError(
                f"LoRA of {name}: a x b is {delta.shape}, the weight {weight.shape}: not merged, not written."
            )
        merged[name] = (weight + delta).astype(weight.dtype)
    return merged


def _hf_weights(family: str, params: dict[str, Any], sizes: dict[str, Any]) -> dict[str, np.ndarray]:
    """Tunix Gemma 3 or Gemma 2 parameters ("layers.0.attn.q_einsum.w" -> array) as Hugging Face's
    Gemma3ForCausalLM / Gemma2ForCausalLM names and layouts: the inverse of Tunix's `params_safetensors` mappings."""
    embed, head = sizes["embed_dim"], sizes["head_dim"]

    def heads_out(w: np.ndarray) -> np.ndarray:  # (N, D, H) -> (N*H, D)
        return np.ascontiguousarray(w.transpose(0, 2, 1).reshape(-1, embed))

    out = {
        "model.embed_tokens.weight": params["embedder.input_embedding"],
        "model.norm.weight": params["final_norm.scale"],
    }
    for i in range(sizes["num_layers"]):
        at, to = f"layers.{i}.", f"model.layers.{i}."
        if f"{at}attn.qkv_einsum.w" in params:
            q, k, v = params[f"{at}attn.qkv_einsum.w"]
        else:
            q, (k, v) = params[f"{at}attn.q_einsum.w"], params[f"{at}attn.kv_einsum.w"]
        out.update({f"{to}self_attn.{n}_proj.weight": heads_out(w) for n, w in (("q", q), ("k", k), ("v", v))})
        out[f"{to}self_attn.o_proj.weight"] = np.ascontiguousarray(
            params[f"{at}attn.attn_vec_einsum.w"].reshape(-1, embed).T
        )
        for name in ("gate_proj", "up_proj", "down_proj"):
            out[f"{to}mlp.{name}.weight"] = np.ascontiguousarray(params[f"{at}mlp.{name}.kernel"].T)
        out.update({f"{to}{hf}.weight": params[f"{at}{ours}.scale"] for ours, hf in _NORMS[family].items()})
    assert all(w.ndim == 2 for n, w in out.items() if "proj" in n) and head  # layouts as Hugging Face's
    return out


def save_gemma(
    family: str,
    params: dict[str, Any],
    sizes: dict[str, Any],
    tokenizer_proto: bytes,
    folder: str | Path,
    lora_scale: float = 1.0,
) -> Path:
    """`folder` (replaced whole) with model.safetensors (any LoRA merged in, times `lora_scale`), config.json
    (gemma3_text or gemma2) and tokenizer.model: what Tunix's gemma3 / gemma `params_safetensors.
    create_model_from_safe_tensors` and Hugging Face's Gemma 3 / Gemma 2 read."""
    import sentencepiece
    from safetensors.numpy import save_file

    weights = {n: np.asarray(w) for n, w in _hf_weights(family, _merge_lora(params, lora_scale), sizes).items()}
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=tokenizer_proto)
    config = {
        "vocab_size": sizes["num_embed"],
        "hidden_size": sizes["embed_dim"],
        "intermediate_size": sizes["hidden_dim"],
        "num_hidden_layers": sizes["num_layers"],
        "num_attention_heads": sizes["num_heads"],
        "num_key_value_heads": sizes["num_kv_heads"],
        "head_dim": sizes["head_dim"],
        "sliding_window": sizes.get("sliding_window_size"),
        "query_pre_attn_scalar": sizes["head_dim"],
        "torch_dtype": str(next(iter(weights.values())).dtype),
        "pad_token_id": tokenizer.pad_id(),
        "bos_token_id": tokenizer.bos_id(),
        "eos_token_id": tokenizer.eos_id(),
    }
    if family == "gemma2":
        config.update(
            {
                "architectures": ["Gemma2ForCausalLM"],
                "model_type": "gemma2",
                "rope_theta": 10_000,
                "hidden_activation": "gelu_pytorch_tanh",
                "attn_logit_softcapping": sizes["attn_logits_soft_cap"],
                "final_logit_softcapping": sizes["final_logit_softcap"],
                "layer_types": [
                    "sliding_attention" if t == "LOCAL_SLIDING" else "full_attention" for t in sizes["attention_types"]
                ],
            }
        )
    else:
        config.update(
            {
                "architectures": ["Gemma3ForCausalLM"],
                "model_type": "gemma3_text",
                "rope_local_base_freq": sizes.get("local_base_frequency", 10_000),
                "rope_theta": sizes.get("global_base_frequency", 10_000),
                "rope_scaling": {"rope_type": "linear", "factor": sizes.get("global_scale_factor", 1.0)},
            }
        )
    with atomic.staged_dir(folder) as staging:
        save_file(weights, str(staging / "model.safetensors"))
        (staging / "config.json").write_text(json.dumps(config, indent=1))
        (staging / "tokenizer.model").write_bytes(tokenizer_proto)
    return Path(folder)
