"""The Gemma 4, 3 or 2 that notebook 11 trains with Tunix: MODEL found (a folder, or a Kaggle Models handle attached
or fetched), and its Hugging Face config.json read as the sizes Tunix's ModelConfig takes, checked against the
weights' headers (the plan and the mesh are `planning`'s; the trained model is written back by `export`). No Tunix or
JAX import: the notebook builds, trains and saves."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit.errors import ParameterError
from nbkit.llm import gemma4_config, model_sizes
from nbkit.llm.model_sizes import HUGGING_FACE, NAMES, TUNIX


def gemma_config(folder: str | Path) -> dict[str, Any]:
    """The sizes Tunix's Gemma code needs, from a Hugging Face folder's config.json (no weights read), with
    "family": "gemma4" (tunix.models.gemma4's ModelConfig; "attention_pattern" as AttentionType names; text weights
    only), "gemma3" (tunix.models.gemma3's) or "gemma2" (tunix.models.gemma's; "attention_types" as its
    AttentionType names). The folder is checked: config.json, tokenizer.model and *.safetensors there, and the
    weights' headers against config.json (Gemma 3 and 2: each layer's post-attention and post-feed-forward norms)."""
    folder = Path(folder)
    try:
        kind = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        kind = {}  # named below
    if isinstance(kind, dict) and "class_name" in kind:
        raise ParameterError(
            f"MODEL={str(folder)!r} is a KerasHub preset (notebook 10's merged-preset/ is one), which Tunix does not "
            f"read: give a folder of Hugging Face safetensors (notebook 10 writes one, transformers/, with "
            f"EXPORT_TRANSFORMERS=True) or a Transformers variation's handle."
        )
    missing = [n for n in ("config.json", "tokenizer.model") if not (folder / n).is_file()]
    files = sorted(folder.glob("*.safetensors"))
    if missing or not files:
        raise ParameterError(
            f"MODEL={str(folder)!r} lacks {', '.join(missing or ['*.safetensors'])}: give a folder of Hugging Face "
            f"safetensors with config.json and tokenizer.model (notebook 10 writes one with EXPORT_TRANSFORMERS=True)."
        )
    config, kind = _read_config(folder)
    _check_tokenizer_file(folder / "tokenizer.model")
    sizes = {names[TUNIX]: config[names[HUGGING_FACE]] for names in NAMES.values()}
    sizes["sliding_window_size"] = config.get("sliding_window")
    if kind == "gemma4":
        sizes = {"family": "gemma4", **sizes, **gemma4_config.gemma4_sizes(config, f"{folder}/config.json")}
        left_out = gemma4_config.check_gemma4_weights(weight_shapes(files, ParameterError), sizes, folder)
        if left_out:
            print(f"{folder}: text weights only: {len(left_out)} of the vision/audio towers' weights left out")
        return sizes
    if kind == "gemma2":
        sizes = {"family": "gemma2", **sizes, **_gemma2_sizes(config, folder)}
    else:
        local, full, factor = model_sizes.rope_settings(config)
        sizes.update(
            {
                "family": "gemma3",
                "local_base_frequency": int(local),
                "global_base_frequency": int(full),
                "global_scale_factor": factor,
            }
        )
    _check_weights(files, sizes)
    return sizes


def _check_tokenizer_file(path: Path) -> None:
    """A tokenizer.model SentencePiece can read, else a ParameterError naming it (before anything loads)."""
    import sentencepiece

    try:
        sentencepiece.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as error:
        raise ParameterError(
            f"{path} is not a SentencePiece model ({str(error).splitlines()[0][:120]}): it is damaged or another "
            f"tokenizer's. Copy the model folder again: tokenizer.model must be the one that came with the weights."
        ) from None


def _read_config(folder: Path) -> tuple[dict[str, Any], str]:
    """(config.json's text model (a multimodal Gemma's text_config), its family), refused unless it is Gemma 4, 3 or
    2 and gives every size as a whole number."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ParameterError(
            f"{folder}/config.json is not JSON ({error}): it is damaged or cut short. Copy the model folder again."
        ) from None
    if config.get("model_type") in ("gemma3", "gemma4"):  # a multimodal model: its text model
        config = {"model_type": config["model_type"] + "_text", **config.get("text_config", config)}
    try:
        kind = model_sizes.family({"model_type": config.get("model_type")})
    except ParameterError:
        kind = None
    if kind not in ("gemma4", "gemma3", "gemma2"):
        raise ParameterError(
            f"{folder}/config.json: model_type {config.get('model_type')!r}: notebook 11 trains Gemma 4 (model_type "
            f"gemma4_text or gemma4, Tunix's tunix.models.gemma4), Gemma 3 (gemma3_text or gemma3, tunix.models.gemma3)"
            f" or Gemma 2 (gemma2, tunix.models.gemma). Give such a folder."
        )
    lacking = [key for key in _SIZE_KEYS if not isinstance(config.get(key), int)]
    if lacking:
        raise ParameterError(
            f"{folder}/config.json has no whole number for {', '.join(lacking)}: Tunix needs every size of the model. "
            f"Use the config.json that came with the weights (Hugging Face's Gemma configs give them all)."
        )
    return config, kind


_SIZE_KEYS = tuple(names[HUGGING_FACE] for names in NAMES.values())


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


def weight_shapes(files: Sequence[Path], error: type[Exception]) -> dict[str, tuple[int, ...]]:
    """Each weight's shape from the safetensors files' headers (no weight read); a file cut short by a copy raises
    `error`, naming it."""
    from safetensors import safe_open

    shapes = {}
    for path in files:
        try:
            with safe_open(str(path), "np") as f:
                shapes.update({key: tuple(f.get_slice(key).get_shape()) for key in f.keys()})
        except Exception as fault:  # safetensors' own SafetensorError, or an OSError
            raise error(
                f"{path} cannot be read as safetensors ({type(fault).__name__}: {fault}): it is damaged or cut short. "
                f"Copy the model folder again."
            ) from None
    return shapes


def _check_weights(files: Sequence[Path], sizes: dict[str, Any]) -> None:
    """The safetensors' headers (no weight read): readable, with each layer's post-attention and post-feed-forward
    norms (Tunix's Gemma 3 and 2 have them), and the shapes config.json promises (the embedding, layer 0's
    projections, the number of layers): a config of another model stops here, not in Tunix's build."""
    shapes = weight_shapes(files, ParameterError)
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


def find_model(model: str, environment: Any = None) -> tuple[str, str]:
    """(folder, why) of MODEL: a folder as given; a Kaggle Models handle (owner/model/framework/variation[/n])
    attached to the notebook, else fetched by kagglehub (internet on)."""
    if Path(model).is_dir() or model.startswith(("/", ".")) or model.count("/") < 3:
        if not Path(model).is_dir():
            preset = " (a KerasHub preset's name is notebook 10's: Tunix reads Hugging Face safetensors)" * (
                "/" not in model
            )
            raise ParameterError(
                f"MODEL={model!r} is not a folder, nor a Kaggle Models handle owner/model/framework/variation{preset}: "
                f"give a Transformers variation's handle (google/gemma-3/transformers/gemma-3-1b-it), or a folder."
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
