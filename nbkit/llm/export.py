"""Model folders in Hugging Face's form that load as they were trained, in transformers and in what reads the same
files (vLLM, Tunix's safetensors loaders, notebooks 11 and 12 as MODEL).

`save_gemma` writes a Gemma that notebook 11 trained with Tunix: Tunix's parameters renamed and laid out as
Gemma3ForCausalLM's / Gemma2ForCausalLM's, any qwix LoRA merged in. `write_for_transformers` completes any such
folder (notebook 10's KerasHub export too): the token ids from the tokenizer itself, the end of a turn as a stop
token, the chat template, the RoPE settings the model uses; `check_for_transformers` reads the folder back."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import RunError
from nbkit.llm import chat_templates, gemma4_weights, hf_folder, model_sizes
from nbkit.llm.model_sizes import HUGGING_FACE, NAMES, TUNIX

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
    (gemma4_text, gemma3_text or gemma2) and tokenizer.model: what Tunix's gemma4 / gemma3 / gemma `params_safetensors.
    create_model_from_safe_tensors` and Hugging Face's Gemma 3 / Gemma 2 read."""
    import sentencepiece
    from safetensors.numpy import save_file

    to_hf = gemma4_weights.hf_weights if family == "gemma4" else lambda p, s: _hf_weights(family, p, s)
    weights = {n: np.asarray(w) for n, w in to_hf(_merge_lora(params, lora_scale), sizes).items()}
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=tokenizer_proto)
    config = {
        **{names[HUGGING_FACE]: sizes[names[TUNIX]] for names in NAMES.values()},
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
    elif family == "gemma4":
        config.update(gemma4_weights.hf_config(sizes))
        del config["query_pre_attn_scalar"]
    else:
        rope = _gemma3_rope(
            sizes.get("local_base_frequency", 10_000),
            sizes.get("global_base_frequency", 10_000),
            sizes.get("global_scale_factor", 1.0),
        )
        config.update({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", **rope})
    with atomic.staged_dir(folder) as staging:
        save_file(weights, str(staging / "model.safetensors"))
        (staging / "config.json").write_text(json.dumps(config, indent=1))
        (staging / "tokenizer.model").write_bytes(tokenizer_proto)
        write_for_transformers(staging, tokenizer_proto)
    return Path(folder)


# ---- what transformers reads besides the weights ----

CHAT_TEMPLATE = chat_templates.GEMMA  # Gemma 3's (notebook 12 gives it to a folder without one)


def gemma_pieces(symbols: Sequence[str]) -> dict[str, Any]:
    """SentencePieceTrainer's options that shape a tokenizer learned for a tiny Gemma as Gemma's own is shaped where
    Hugging Face's GemmaTokenizer reads it: its special pieces and ids (pad 0, eos 1, bos 2, unk 3, <mask> 4, then
    `symbols`, each kept whole), the text as written (no space put before it, no normalisation). Without them
    GemmaTokenizer adds <bos>, <eos> and <mask> past the embedding and drops a leading piece."""
    return {
        "pad_id": 0,
        "eos_id": 1,
        "bos_id": 2,
        "unk_id": 3,
        "pad_piece": "<pad>",
        "eos_piece": "<eos>",
        "bos_piece": "<bos>",
        "unk_piece": "<unk>",
        "user_defined_symbols": ["<mask>", *symbols],
        "add_dummy_prefix": False,
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
    }


def _gemma3_rope(local_frequency: float, global_frequency: float, global_factor: float) -> dict[str, Any]:
    """Gemma 3's RoPE as transformers 5 reads it from config.json: the sliding layers' base frequency, the global
    layers' and their linear scaling factor (8.0 in Gemma 3 4B, 12B and 27B)."""
    return {
        "rope_theta": global_frequency,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": local_frequency},
            "full_attention": {"rope_type": "linear", "factor": global_factor, "rope_theta": global_frequency},
        },
    }


def keras_hub_rope(backbone: Any) -> dict[str, Any]:
    """`_gemma3_rope` of a KerasHub Gemma3Backbone: its layers' wavelengths and its global scaling factor."""
    layers = [backbone.get_layer(f"decoder_block_{i}") for i in range(backbone.num_layers)]
    local = [b.rope_wavelength for b in layers if b.use_sliding_window_attention] or [10_000.0]
    full = [b.rope_wavelength for b in layers if not b.use_sliding_window_attention] or [1_000_000.0]
    return _gemma3_rope(float(local[0]), float(full[0]), float(backbone.global_rope_scaling_factor))


def write_for_transformers(
    folder: str | Path, tokenizer_proto: bytes, rope: dict[str, Any] | None = None, made_by: str = ""
) -> list[str]:
    """Complete the Hugging Face model folder `folder` (config.json written) so that transformers and vLLM read
    the model as it was trained; returns what was corrected, to be said. Written: pad/bos/eos ids from the
    SentencePiece tokenizer itself (KerasHub writes Gemma's as bos 1 / eos 2 where they are eos 1 / bos 2),
    generation_config.json stopping at <eos> and at the family's end of a turn, tokenizer_config.json with the
    family's chat template (kept where the folder has one), special_tokens_map.json; Gemma 2's eager attention, the
    one that caps its logits; Gemma 4's config and weights as `hf_folder` completes them. `rope`: a Gemma 3's
    `_gemma3_rope` as trained, written where config.json says otherwise (KerasHub 0.31.1 leaves the global factor
    out)."""
    import sentencepiece

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    family = model_sizes.family(config)
    end_of_turn_piece, template = chat_templates.TURNS[family][1:]
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=tokenizer_proto)
    end_of_turn = tokenizer.piece_to_id(end_of_turn_piece)
    if end_of_turn == tokenizer.unk_id() or tokenizer.bos_id() < 0 or tokenizer.eos_id() < 0:
        raise RunError(
            f"{folder}: the tokenizer lacks {end_of_turn_piece}, a <bos> or an <eos> piece: a model trained with it "
            f"cannot end its turn where transformers would stop. Train the tokenizer with Gemma's special pieces."
        )
    ids = {"pad_token_id": tokenizer.pad_id(), "bos_token_id": tokenizer.bos_id(), "eos_token_id": tokenizer.eos_id()}
    corrected = [f"{name} {config.get(name)} -> {value}" for name, value in ids.items() if config.get(name) != value]
    config.update(ids)
    config.get("text_config", {}).update(ids)
    if rope is not None:
        written, wanted = model_sizes.rope_settings(config), model_sizes.rope_settings(rope)
        if written != wanted:
            corrected.append(f"RoPE (local base, global base, global factor) {written} -> {wanted}")
        config.update(rope)
    if config.get("attn_logit_softcapping") and config.get("attn_implementation") != "eager":
        # transformers 5.12 loads Gemma 2 with SDPA by default, which leaves the attention's soft cap out: another
        # model, silently (logits 0.026 apart on a 2-layer toy). Its eager attention caps as Gemma 2 was trained.
        corrected.append(f"attn_implementation {config.get('attn_implementation')} -> 'eager' (the attention's cap)")
        config["attn_implementation"] = "eager"
    if family == "gemma4":
        corrected += hf_folder.complete_gemma4(folder, config)
    if corrected:
        (folder / "config.json").write_text(json.dumps(config, indent=1))
    generation = {**ids, "eos_token_id": [tokenizer.eos_id(), end_of_turn]}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=1))
    corrected += chat_templates.write_tokenizer_files(folder, tokenizer, template)
    if corrected and made_by:
        corrected = [f"{made_by}'s export wrote {change}: corrected" for change in corrected]
    return corrected


def _import_quietly() -> None:
    """Import transformers without its warning that torch is missing (the check needs no torch), then give it back
    the level it would have had: its default, or the user's TRANSFORMERS_VERBOSITY."""
    if "transformers" in sys.modules:
        return
    kept = os.environ.get("TRANSFORMERS_VERBOSITY")
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    try:
        import transformers
    finally:
        os.environ.pop("TRANSFORMERS_VERBOSITY")
        if kept is not None:
            os.environ["TRANSFORMERS_VERBOSITY"] = kept
    levels = transformers.utils.logging.log_levels
    transformers.utils.logging.set_verbosity(levels.get(kept or "warning", levels["warning"]))


def _reread_tokenizer(folder: Path) -> Any:
    """transformers' tokenizer of `folder`, read without its notes on Gemma 3's per-layer RoPE settings (which it
    reads right)."""
    _import_quietly()
    from transformers import AutoTokenizer
    from transformers.utils import logging

    said = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    finally:
        logging.set_verbosity(said)


def check_for_transformers(
    folder: str | Path, texts: Sequence[str], chats: Sequence[tuple[list[dict[str, str]], str]] = ()
) -> str:
    """`folder` read back as transformers reads it, against what trained: the ids of `texts` by transformers'
    tokenizer equal to the folder's tokenizer.model's (SentencePiece, as in training), each of `chats` (messages,
    the training prompt's text) given by the chat template, the stop tokens and the config's ids. Where
    transformers is not installed, the JSON files alone are checked. Raises RunError naming each difference;
    returns what was checked."""
    import sentencepiece

    folder = Path(folder)
    trained = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    config = json.loads((folder / "config.json").read_text())
    generation = json.loads((folder / "generation_config.json").read_text())
    wrong = [
        f"config.json {name} {config.get(name)} where the tokenizer has {want}"
        for name, want in (("bos_token_id", trained.bos_id()), ("eos_token_id", trained.eos_id()))
        if config.get(name) != want
    ]
    family = model_sizes.family(config)
    end_of_turn = chat_templates.TURNS[family][1]
    if trained.piece_to_id(end_of_turn) not in generation.get("eos_token_id", []):
        wrong.append(f"generation_config.json does not stop at {end_of_turn}")
    checked = "config.json's ids, the stop tokens"
    if importlib.util.find_spec("transformers") is not None:
        reread = _reread_tokenizer(folder)
        for text in texts:
            if reread(text, add_special_tokens=False)["input_ids"] != trained.encode(text):
                wrong.append(f"transformers' tokenizer splits {text[:60]!r} otherwise than the trained one")
                break
        for messages, prompt in chats:
            try:
                given = reread.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            except Exception as error:  # a template of the folder's own that refuses these turns (Gemma 2's system)
                given = f"{type(error).__name__}: {error}"
            if given != prompt:
                wrong.append(f"the chat template gives {given[:80]!r} where training had {prompt[:80]!r}")
        specials = {"<bos>": trained.bos_id(), "<eos>": trained.eos_id(), "<pad>": trained.pad_id()}
        read = {"<bos>": reread.bos_token_id, "<eos>": reread.eos_token_id, "<pad>": reread.pad_token_id}
        if read != specials:  # a piece it lacks is added past the embedding's rows
            wrong.append(f"transformers' tokenizer has the ids {read} where the trained one has {specials}")
        if family == "gemma4":
            wrong += hf_folder.check_gemma4(folder)
            checked += ", Gemma 4's config and weight names"
        version = importlib.metadata.version("transformers")
        checked += f", {len(texts)} texts' ids and {len(chats)} chat prompts in transformers {version}"
    if wrong:
        raise RunError(
            f"{folder} would not load as trained: {'; '.join(wrong)}. Nothing was published. Where the model "
            f"folder's own tokenizer files or chat template say otherwise than its training, mend them; else this is "
            f"a bug in nbkit's export: report it with this message."
        )
    return checked
