"""What a Gemma 4's Hugging Face folder must say beyond its weights for transformers and Tunix 0.1.7 (notebook 11)
to compute the model as trained, where KerasHub 0.32's export writes it otherwise (measured on tiny Gemma 4s):

- config.json: no `rope_type: "proportional"` for the global layers (transformers then rotates every dimension, not
  `partial_rotary_factor` of them) and no `attention_k_eq_v` (transformers then makes a value projection of its own,
  at random, where K=V); architectures `Gemma4TextModel` (no head) where transformers maps gemma4_text to
  `Gemma4ForCausalLM`;
- model.safetensors: a text-only model's weights named `model.*`, which Tunix 0.1.7's Gemma 4 loader does not read
  (it reads no prefix, or `model.language_model.`; transformers reads both); no key/value projections or key norm in
  the KV-shared layers, which Tunix 0.1.7 builds (unused) and without which its loader stops: written as zeros,
  which transformers leaves out as unexpected."""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from pathlib import Path
from typing import Any

from nbkit.errors import ParameterError

_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2}


def complete_gemma4(folder: Path, config: dict[str, Any]) -> list[str]:
    """Gemma 4's `config` (config.json's, changed in place) and `folder`/model.safetensors completed as the module
    says; returns what was changed, to be said."""
    text = config.get("text_config", config)
    header = _header(folder / "model.safetensors")[0]
    prefix = "model.language_model." if "text_config" in config else "model."
    if not any(key.startswith(prefix) for key in header):
        prefix = ""  # written by nbkit (notebook 11), or completed already
    layers, shared = text["num_hidden_layers"], text.get("num_kv_shared_layers") or 0
    owners = [i for i in range(layers - shared) if text["layer_types"][i] == "full_attention"]
    key_is_value = bool(owners) and f"{prefix}layers.{owners[0]}.self_attn.v_proj.weight" not in header
    changed = []
    wanted = {
        "architectures": ["Gemma4ForConditionalGeneration" if "text_config" in config else "Gemma4ForCausalLM"],
        "model_type": "gemma4" if "text_config" in config else "gemma4_text",
    }
    for name, value in wanted.items():
        if config.get(name) != value:
            changed.append(f"{name} {config.get(name)} -> {value}")
            config[name] = value
    if text.get("attention_k_eq_v", False) != key_is_value:
        changed.append(f"attention_k_eq_v {text.get('attention_k_eq_v')} -> {key_is_value} (as the weights say)")
        text["attention_k_eq_v"] = key_is_value
    rope = text.setdefault("rope_parameters", {})
    for layer_type, rope_type in (("full_attention", "proportional"), ("sliding_attention", "default")):
        said = rope.setdefault(layer_type, {}).get("rope_type")
        if said != rope_type:
            changed.append(f"rope_parameters' {layer_type} rope_type {said} -> {rope_type!r}")
            rope[layer_type]["rope_type"] = rope_type
    changed += _complete_weights(folder / "model.safetensors", header, prefix, text, key_is_value)
    return changed


def check_gemma4(folder: Path) -> list[str]:
    """What in `folder` transformers (its AutoConfig) or Tunix 0.1.7 would read otherwise than the module says."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    text = getattr(config, "text_config", config)
    wrong = []
    if text.rope_parameters["full_attention"].get("rope_type") != "proportional":
        wrong.append("transformers reads the global layers' RoPE as not proportional")
    header = _header(folder / "model.safetensors")[0]
    owners = [i for i in range(text.num_hidden_layers) if text.layer_types[i] == "full_attention"]
    prefix = "model.language_model." if hasattr(config, "text_config") else ""
    if owners and text.attention_k_eq_v == (f"{prefix}layers.{owners[0]}.self_attn.v_proj.weight" in header):
        wrong.append(f"config.json's attention_k_eq_v {text.attention_k_eq_v} where the weights say otherwise")
    if not any(name.startswith(f"{prefix}layers.") for name in header):
        wrong.append(f"the weights are not named {prefix}layers.*, as Tunix 0.1.7 reads them")
    return wrong


def _complete_weights(
    path: Path, header: dict[str, Any], prefix: str, text: dict[str, Any], key_is_value: bool
) -> list[str]:
    """model.safetensors with a text-only model's `model.` prefix dropped and the KV-shared layers' unused key/value
    projections and key norm added as zeros (Tunix 0.1.7's), rewritten at the byte level: any dtype, no weight
    held in memory. Returns what was changed."""
    rename = prefix if prefix == "model." else ""
    kept = prefix if prefix != "model." else ""
    layers, shared = text["num_hidden_layers"], text.get("num_kv_shared_layers") or 0
    dtype = header[f"{prefix}embed_tokens.weight"]["dtype"]
    added: dict[str, list[int]] = {}
    for i in range(layers - shared, layers):
        full = text["layer_types"][i] == "full_attention"
        head = (text.get("global_head_dim") or text["head_dim"]) if full else text["head_dim"]
        kv_heads = text.get("num_global_key_value_heads") if full and key_is_value else text["num_key_value_heads"]
        names = ["k_proj"] + ([] if full and key_is_value else ["v_proj"])
        added.update({f"{kept}layers.{i}.self_attn.{n}.weight": [kv_heads * head, text["hidden_size"]] for n in names})
        added[f"{kept}layers.{i}.self_attn.k_norm.weight"] = [head]
    added = {name: shape for name, shape in added.items() if name not in header}
    if not rename and not added:
        return []
    _rewrite(path, rename, {name: (dtype, shape) for name, shape in added.items()})
    changed = [f"weights named {rename}* -> * (as Tunix 0.1.7 reads them)"] if rename else []
    if added:
        changed.append(f"{len(added)} unused key/value weights of the KV-shared layers added as zeros (Tunix 0.1.7's)")
    return changed


def _header(path: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's header (name -> dtype, shape, data_offsets; its __metadata__ left out) and where its
    data starts."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header, 8 + size


def _rewrite(path: Path, prefix: str, added: dict[str, tuple[str, list[int]]]) -> None:
    """`path` with `prefix` dropped from every name and `added` (name -> dtype, shape) appended as zeros."""
    header, start = _header(path)
    new = {name.removeprefix(prefix): entry for name, entry in header.items()}
    end = max((entry["data_offsets"][1] for entry in header.values()), default=0)
    grown = end
    for name, (dtype, shape) in added.items():
        size = _BYTES[dtype] * math.prod(shape)
        new[name] = {"dtype": dtype, "shape": shape, "data_offsets": [grown, grown + size]}
        grown += size
    encoded = json.dumps(new, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data 8-byte aligned, as safetensors writes it
    staging = path.with_name(path.name + ".partial")
    with open(path, "rb") as source, open(staging, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)) + encoded)
        source.seek(start)
        shutil.copyfileobj(source, out, 1 << 24)
        out.write(bytes(grown - end))
    os.replace(staging, path)


def check_keras_hub_export(family: str) -> None:
    """A ParameterError, before anything trains, where the installed KerasHub cannot export `family` to Hugging Face's
    form (KerasHub 0.31.1, Kaggle's TPU image in 2026, has no Gemma 4 exporter; 0.32 has)."""
    import keras_hub

    version = tuple(int(part) for part in keras_hub.__version__.split(".")[:2])
    if family == "gemma4" and version < (0, 32):
        raise ParameterError(
            f"EXPORT_TRANSFORMERS=True: KerasHub {keras_hub.__version__} cannot export Gemma 4 to Hugging Face's form "
            f"(KerasHub 0.32 can). Run `pip install -U 'keras-hub>=0.32'` and restart the notebook, or give "
            f"EXPORT_TRANSFORMERS=False (the merged KerasHub preset and the LoRA weights are written either way)."
        )
