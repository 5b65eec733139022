"""The model a test set is answered with (notebook 12) and the engine that runs it: ENGINE chosen from what is
installed and the accelerator there; MODEL found (a folder, notebook 10's or 11's output folder, an attached Kaggle
Models handle; "auto": the one model attached, or in the smoke profile a tiny Gemma 3 with random weights) and checked
before anything loads: a merged model, not LoRA weights alone; config.json, the weights, a tokenizer, the stop tokens
and the context. No torch, JAX or vLLM import at module import: the notebook loads the model and generates."""

from __future__ import annotations

import importlib.util
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError
from nbkit.llm import export, gemma

ENGINES = ("auto", "vllm", "transformers", "jax")
_NEEDS = {  # engine -> (the modules it imports, what to do where they are missing)
    "vllm": (("vllm", "torch"), "pip install vllm (with the internet off: attach a dataset of its wheels)"),
    "transformers": (("torch", "transformers"), "pip install torch transformers (Kaggle's GPU image has them)"),
    "jax": (("jax", "flax", "tunix"), "pip install jax flax google-tunix (Kaggle's TPU image has them)"),
}
_TUNIX_FAMILIES = ("gemma3_text", "gemma3", "gemma2")  # what Tunix's Gemma code runs (nbkit.llm.gemma reads)


def _installed(engine: str) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in _NEEDS[engine][0])


def pick_engine(engine: str) -> tuple[str, str, str]:
    """(engine, device: "tpu", "cuda" or "cpu", why) of ENGINE. "auto": JAX (Tunix) on a TPU; vLLM where it is
    installed and a GPU is there; else Hugging Face transformers (on the GPU or the CPU) where torch is installed; else
    JAX. A named engine that cannot run here stops now, saying what to install or which accelerator to pick."""
    tpu = nbenv.is_tpu_vm()
    cuda = not tpu and _installed("transformers") and _cuda()
    if engine == "auto":
        ready = [name for name in ("vllm", "transformers", "jax") if _installed(name)]
        ready = [name for name in ready if name != "vllm" or cuda]
        if tpu and "jax" in ready:
            ready = ["jax"]
        if not ready:
            raise ParameterError(
                "ENGINE='auto': no engine is installed here: torch and transformers (a GPU or the CPU), or jax, flax "
                "and google-tunix (a TPU). Install one (Kaggle's GPU and TPU images have them)."
            )
        engine, why = ready[0], "ENGINE='auto'"
    else:
        if not _installed(engine):
            missing = [name for name in _NEEDS[engine][0] if importlib.util.find_spec(name) is None]
            raise ParameterError(
                f"ENGINE={engine!r} needs {', '.join(missing)}, not installed here: {_NEEDS[engine][1]}."
            )
        if engine == "vllm" and not cuda:
            raise ParameterError("ENGINE='vllm' needs a GPU, and torch sees none here: pick a GPU, or ENGINE='auto'.")
        why = f"ENGINE={engine!r}"
    device = "tpu" if tpu else "cuda" if cuda and engine != "jax" else "cpu"
    if engine == "jax" and not tpu:
        import jax

        device = {"gpu": "cuda"}.get(jax.default_backend(), jax.default_backend())
    return engine, device, f"{why}: {engine} on the {device.upper() if device != 'cuda' else 'GPU'}"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@dataclass
class _ModelFolder:
    """A checked model folder: what the notebook needs before it loads the weights."""

    folder: Path
    model_type: str
    vocabulary: int
    context: int | None  # config.json's max_position_embeddings, where it says
    stop_ids: list[int]  # generation_config.json's and config.json's eos_token_id
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        context = f"a context of {self.context:,} tokens" if self.context else "no context length in config.json"
        line = f"model: {self.folder} ({self.model_type}, a vocabulary of {self.vocabulary:,}, {context})"
        return "\n".join([line, *self.notes])


def find_model(model: str, smoke: bool, environment: Any = None) -> tuple[Path | None, str]:
    """(folder, why) of MODEL: a folder (a file: its folder); a Kaggle Models handle, attached; "auto": the one model
    folder attached under the input folder (config.json beside *.safetensors), or None in the smoke profile: the
    notebook then writes the tiny Gemma 3 (`tiny_model`)."""
    environment = environment or nbenv.detect()
    if model == "auto" and smoke:
        return None, "MODEL='auto' in the smoke profile: a tiny Gemma 3 with random weights stands in"
    if model == "auto":
        found = sorted(
            {p.parent for depth in range(1, 6) for p in environment.input_dir.glob("*/" * depth + "config.json")}
        )
        found = [folder for folder in found if any(folder.glob("*.safetensors"))]
        if len(found) != 1:
            names = ", ".join(map(str, found)) or "none"
            raise ParameterError(
                f"MODEL='auto' looks for one model folder attached under {environment.input_dir} (config.json beside "
                f"*.safetensors) and found {names}: attach notebook 11's output (its grpo-reasoning/model) or 10's "
                f"(its llm-finetune/transformers), or give MODEL."
            )
        return found[0], f"MODEL='auto': the one model attached ({found[0]})"
    if Path(model).is_file():
        return Path(model).parent, f"MODEL is a file: its folder {Path(model).parent} is read"
    folder, why = gemma.find_model(model, environment)
    return Path(folder), why


def check_model(folder: str | Path, engine: str) -> _ModelFolder:
    """The model folder checked before anything loads; notebook 11's or 10's output folder stands for the merged
    model it holds (model/, transformers/). Refused: LoRA weights alone, a KerasHub preset, no config.json, weights or
    tokenizer, and for ENGINE="jax" a model Tunix's Gemma code does not run."""
    folder, notes = Path(folder), []
    for sub, notebook in (("model", 11), ("transformers", 10)):
        if not (folder / "config.json").is_file() and (folder / sub / "config.json").is_file():
            notes.append(f"{folder} is notebook {notebook}'s output folder: its {sub}/ (the merged model) is read")
            folder = folder / sub
    names = {p.name for p in folder.iterdir()}
    if not [n for n in names if n.endswith(".safetensors") and n != "lora.safetensors"]:
        if "lora.safetensors" in names or any(n.endswith(".lora.h5") for n in names):
            raise DataError(
                f"{folder} holds LoRA weights alone ({', '.join(sorted(n for n in names if 'lora' in n))}): the "
                f"engines need the model with the LoRA merged in. Give notebook 11's model/ (beside lora.safetensors) "
                f"or notebook 10's transformers/ (run 10 with EXPORT_TRANSFORMERS=True)."
            )
        keras = "model.weights.h5" in names or "merged-preset" in names
        raise DataError(
            f"{folder} has no *.safetensors weights"
            + (" (it is a KerasHub preset, which no engine here reads)" if keras else "")
            + ": give a Hugging Face model folder (config.json, *.safetensors, tokenizer files). Notebook 10 writes "
            "one with EXPORT_TRANSFORMERS=True (transformers/), notebook 11 always (model/)."
        )
    gemma.weight_shapes(sorted(folder.glob("*.safetensors")), DataError)
    config = _json(folder / "config.json")
    text = config.get("text_config") or config  # a multimodal Gemma 3's language model
    if not {"tokenizer.json", "tokenizer.model"} & names:
        raise DataError(
            f"{folder} has no tokenizer (tokenizer.json or tokenizer.model): copy the tokenizer files of the model it "
            f"was trained from into it (notebooks 10 and 11 write them with the weights)."
        )
    kind = str(text.get("model_type") or config.get("model_type"))
    if engine == "jax" and kind not in _TUNIX_FAMILIES:
        raise ParameterError(
            f"ENGINE='jax' runs Gemma 3 and Gemma 2 (Tunix's code); {folder} is {kind!r}: use ENGINE='transformers' "
            f"(or 'vllm' on a GPU)."
        )
    generation = _json(folder / "generation_config.json") if "generation_config.json" in names else {}
    stops = [generation.get("eos_token_id"), config.get("eos_token_id"), text.get("eos_token_id")]
    stop_ids = sorted({int(i) for s in stops for i in (s if isinstance(s, list) else [s]) if isinstance(i, int)})
    vocabulary, context = text.get("vocab_size"), text.get("max_position_embeddings")
    if "tokenizer_config.json" not in names:
        notes.append(
            "WARNING: no tokenizer_config.json: transformers guesses the tokenizer's special tokens (exports of nbkit "
            "before notebook 12 lack it; export the model again with this kit's notebook 10 or 11)"
        )
    if not isinstance(vocabulary, int):
        raise DataError(f"{folder}/config.json gives no vocab_size: use the config.json that came with the weights.")
    return _ModelFolder(folder, kind, vocabulary, context if isinstance(context, int) else None, stop_ids, notes)


def _json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"{path} is missing: a Hugging Face model folder holds it. Copy the model folder whole."
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise DataError(f"{path} is not JSON ({error}): it is damaged or cut short. Copy the model again.") from None
    if not isinstance(found, dict):
        raise DataError(f"{path} holds a JSON {type(found).__name__}, not an object: copy the model again.")
    return found


# ---- the tiny stand-in: a Gemma 3 with random weights, in the form of notebooks 10's and 11's exports ----

_TINY = dict(num_layers=2, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=1)
_SYMBOLS = ["<start_of_turn>", "<end_of_turn>", "<reasoning>", "</reasoning>", "<answer>", "</answer>", "\n"]


def tiny_model(folder: str | Path, texts: list[str], seed: int) -> Path:
    """A Gemma 3 of two layers with random weights in `folder` (replaced whole), written as notebook 11 writes its
    model (`export.save_gemma`: the chat template and stop tokens with it), with a SentencePiece tokenizer learned
    from `texts` in Gemma's shape (`export.gemma_pieces`; byte fallback). Its answers are noise; the point is that
    every engine reads it as it reads a real export, and gives the same greedy answers."""
    import sentencepiece

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=proto,
        model_type="BPE",
        vocab_size=320,
        hard_vocab_limit=False,
        character_coverage=1.0,
        byte_fallback=True,
        **export.gemma_pieces(_SYMBOLS),
        num_threads=1,  # the same pieces on every machine
        minloglevel=2,
    )
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
    sizes = {**_TINY, "num_embed": tokenizer.get_piece_size(), "sliding_window_size": 64}  # prompts go past it
    return export.save_gemma("gemma3", _random_weights(sizes, seed), sizes, proto.getvalue(), folder)


def _random_weights(sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Tunix-named Gemma 3 weights drawn at random. The post-attention and post-feed-forward norms are large (x21)
    and the query/key norms sharp (x4), so that each answer depends on its prompt: with plain draws the embedding
    carries the residual stream and a random Gemma repeats one token for every prompt."""
    rng = np.random.default_rng(seed)
    width, head, heads, kv, hidden = (
        sizes[k] for k in ("embed_dim", "head_dim", "num_heads", "num_kv_heads", "hidden_dim")
    )

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[-2] if len(shape) > 1 else 1)).astype(np.float32)

    weights = {"embedder.input_embedding": rng.standard_normal((sizes["num_embed"], width)).astype(np.float32)}
    weights["final_norm.scale"] = np.zeros(width, np.float32)
    for i in range(sizes["num_layers"]):
        at = f"layers.{i}."
        weights.update(
            {
                f"{at}attn.q_einsum.w": normal(heads, width, head),
                f"{at}attn.kv_einsum.w": normal(2, kv, width, head),
                f"{at}attn.attn_vec_einsum.w": normal(heads, head, width),
                f"{at}mlp.gate_proj.kernel": normal(width, hidden),
                f"{at}mlp.up_proj.kernel": normal(width, hidden),
                f"{at}mlp.down_proj.kernel": normal(hidden, width),
                f"{at}attn._query_norm.scale": np.full(head, 3.0, np.float32),
                f"{at}attn._key_norm.scale": np.full(head, 3.0, np.float32),
            }
        )
        for norm, scale in (("pre_attention", 0), ("post_attention", 20), ("pre_ffw", 0), ("post_ffw", 20)):
            weights[f"{at}{norm}_norm.scale"] = np.full(width, float(scale), np.float32)
    return weights
