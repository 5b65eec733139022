# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Teach Gemma to show its work: GRPO through Tunix on a TPU
#
# Config -> data -> memory plan -> rewards -> tokenizer -> model (+ LoRA) -> warm start -> evaluate -> GRPO ->
# evaluate -> save.
# The model answers each question as `<reasoning>...</reasoning><answer>...</answer>`. For every question it
# writes `NUM_GENERATIONS` answers; the reward functions below score them; GRPO (Group Relative Policy
# Optimization) raises the likelihood of the answers that scored above their group's mean and lowers the others,
# while a KL term keeps the model near the reference it started from. Tunix (Google's JAX post-training library,
# which Kaggle's TPU image ships) runs the rollouts, the reference model and the updates, sharded over the chips.
#
# On Kaggle: attach Gemma 3 1B for Tunix (`google/gemma-3/transformers/gemma-3-1b-it`, after accepting Gemma's
# license), Gemma 4 E2B or E4B (their Hugging Face folders: the text model trains, the vision and audio towers are
# left out), Gemma 2 2B (`google/gemma-2/transformers/gemma-2-2b-it`), or the model notebook 10 fine-tuned and
# exported (`EXPORT_TRANSFORMERS=True`): SFT first, then GRPO. Gemma 4's mixture of experts (26B-A4B) needs Tunix's
# git head (Kaggle's TPU image has it): the released Tunix 0.1.7 routes its experts otherwise than Google trained it.
# Attach GSM8K (or your own question/answer CSV or JSONL), pick a TPU v5e-8. On a CPU with no model the same code
# takes the route real runs take, in miniature: a tiny Gemma 3 from scratch learns the answer format by a short
# supervised warm start (SFT) on the sample's worked answers, then GRPO raises how often it answers right.
#
# **This notebook is the program: edit it.** The system prompt, the answer format, the reward functions, the GRPO
# settings, LoRA and the evaluation are plain code below; `nbkit` finds and checks the data, the model's folder,
# the mesh and the memory, keeps the checkpoints' settings, and writes the outputs when the run ends.
#
# `papermill notebooks/11_grpo_reasoning.ipynb out/11.ipynb -p MESH 2x4 -p MAX_STEPS 60`

# %% tags=["parameters"]
MODEL: str = "auto"  # a Gemma 4/3/2 safetensors folder or Kaggle Models handle; "tiny"; "tiny-gemma4"; "auto"
DATA_ROOT: str = "auto"  # a CSV or JSONL file of questions and answers, or a folder of them; "auto": see below
QUESTION_COLUMN: str = "question"  # the column (CSV) or key (JSONL) of the questions
ANSWER_COLUMN: str = "answer"  # the column or key of the answers (GSM8K's: worked solution, then "#### <answer>")
REASONING_COLUMN: str = ""  # a column of worked solutions for the warm start; "": the answer's text before "####"
NUM_GENERATIONS: int = 4  # answers written per question: GRPO scores each against its group (at least 2)
BATCH_SIZE: int = 4  # questions a step; BATCH_SIZE x NUM_GENERATIONS must divide by the mesh's fsdp
BETA: float = 0.04  # the KL term's weight: how hard the model is held near the reference
EPSILON: float = 0.2  # the clip of the policy ratio (as PPO's)
LEARNING_RATE: float = 0.0  # GRPO's AdamW peak; 0: the model's choice, 3e-6 for Gemma, 3e-4 for the tiny model
MAX_STEPS: int = 0  # GRPO steps; 0: the model's choice, 500 for Gemma, 120 for the tiny model
SFT_STEPS: int = -1  # warm-start steps on the worked answers before GRPO; -1: 100 for the tiny model, else 0
SFT_LEARNING_RATE: float = 3e-3  # the warm start's AdamW rate (3e-3 suits the tiny model; about 2e-5 for Gemma)
LORA_RANK: int = 64  # rank of the LoRA matrices beside the attention and MLP kernels; 0: every weight trains
MAX_PROMPT_LENGTH: int = 256  # tokens of a prompt (system prompt and chat turn included); longer ones stop the run
MAX_NEW_TOKENS: int = 256  # tokens an answer may have
TEMPERATURE: float = 0.9  # the rollouts' sampling temperature, above 0 (the evaluation is greedy)
HELD_OUT: int = 16  # distinct questions held out for the evaluation before and after
MESH: str = "auto"  # "auto", "data" (every device on fsdp), or fsdp x tp devices such as "2x4"
CHECKPOINT_EVERY: int = 50  # steps between checkpoints (Kaggle sessions end)
TIME_BUDGET: float = 480.0  # minutes of GRPO at most (a Kaggle TPU session: 9 hours); then a last checkpoint
RESUME: str = "auto"  # "auto": continue from OUTPUT_DIR's checkpoint (same settings); "restart": from scratch
PROFILE: str = "auto"  # "full": the settings above; "smoke": short prompts and answers; "auto": smoke on a CPU
SIMULATE_DEVICES: int = 8  # CPU only: split the CPU into N devices, as a TPU v5e-8 has chips (0: no split)
SEED: int = 42  # fixes the split, the tiny model, LoRA's initial weights, the data order and the sampling
OUTPUT_DIR: str = "auto"  # the model, metrics.json, plots and checkpoints; "auto": the working folder's grpo-reasoning/

# %% [markdown]
# `MODEL="auto"`: the tiny Gemma 3 in the smoke profile (a CPU's default), else Gemma 3 1B for Tunix attached (or
# fetched by kagglehub). `MODEL="tiny-gemma4"`: a tiny Gemma 4 from scratch (per-layer inputs, KV-shared layers with
# a double-wide MLP, global layers with their own head size and partial RoPE).
# `DATA_ROOT="auto"`: GSM8K's `main_train.csv` where a dataset holding it is attached, else a generated sample in
# GSM8K's shape (the question lists words, the answer numbers them and ends in `#### <how many>`).
#
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in a staging folder and
# replace the previous run's only when the run ends well; the checkpoints live beside them), then the devices.

# %%
from nbkit import accel, atomic, params, staging
from nbkit.errors import ParameterError
from nbkit.llm import data, export, gemma, gemma4_config, model_sizes, planning, rl

params.check_parameters(
    globals(),
    NUM_GENERATIONS=2,
    BATCH_SIZE=1,
    MAX_STEPS=0,
    SFT_STEPS=-1,
    LORA_RANK=0,
    MAX_PROMPT_LENGTH=4,
    MAX_NEW_TOKENS=1,
    HELD_OUT=1,
    CHECKPOINT_EVERY=1,
    RESUME=("auto", "restart"),
)
RANGES = {  # name: (lowest, highest, whether the lowest itself is allowed)
    "BETA": (0, 10, True),
    "EPSILON": (0, 1, True),
    "LEARNING_RATE": (0, 1, True),
    "SFT_LEARNING_RATE": (0, 1, False),
    "TEMPERATURE": (0, 10, False),
    "TIME_BUDGET": (0, 1e6, False),
}
for name, (low, high, low_allowed) in RANGES.items():
    value = globals()[name]
    if not (low <= value < high) or (value == low and not low_allowed):
        above = "from" if low_allowed else "above"
        raise ParameterError(f"{name}={value}: give a number {above} {low} and below {high} (see its comment).")
outputs = staging.start(OUTPUT_DIR, default="grpo-reasoning", data_root=DATA_ROOT)
print(outputs.describe())
acc = accel.setup("jax", simulate_devices=SIMULATE_DEVICES)
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")

# %% [markdown]
# ## Data
# Every question/answer pair is read and checked before anything loads. GSM8K's answers are a worked solution
# that ends in `#### <number>`: the number is the reference answer, the solution is what the warm start learns
# to write inside `<reasoning>` (`REASONING_COLUMN` names a column of worked solutions instead, where the data has
# one). The held-out questions are drawn among the distinct ones, so a question repeated in the data is never both
# trained on and evaluated.

# %%
path, source = data.find_questions(DATA_ROOT)
pairs = data.load_pairs(path, QUESTION_COLUMN, ANSWER_COLUMN, names=("QUESTION_COLUMN", "ANSWER_COLUMN"))
worked, answers = data.references(pairs.responses, pairs.where)
if REASONING_COLUMN:  # the worked solutions in a column of their own, read and checked as the pairs are
    names = ("QUESTION_COLUMN", "REASONING_COLUMN")
    worked = data.load_pairs(path, QUESTION_COLUMN, REASONING_COLUMN, names=names).responses
print(f"data: {source}; {len(answers)} question/answer pairs, {sum(map(bool, worked))} with a worked solution")
train_rows, held_out_rows, split_line = data.split(pairs, HELD_OUT, SEED)
print(split_line)
if len(train_rows) < BATCH_SIZE:
    raise ParameterError(f"{len(train_rows)} training pairs: fewer than BATCH_SIZE={BATCH_SIZE}. Give more data.")

# %% [markdown]
# ## Model, mesh and memory plan
# A Gemma folder's `config.json` says how large the model is before any weight is read (its shapes are checked
# against the safetensors' headers), and which of Tunix's Gemma codes runs it; what the installed Tunix would compute
# otherwise than the model was trained (Gemma 4's experts on Tunix 0.1.7) stops here, saying what to install. Tunix
# shards the vocabulary, the heads and the feed-forward width over `tp` and the width and the batch over `fsdp`: a
# mesh that does not divide them is refused here. The plan adds up each chip's bytes: the actor, what trains and
# AdamW's state, the reference model (the same weights under LoRA), the rollouts' KV cache and the step's
# activations. Then the run's settings are compared with the checkpoint's, if any, before anything loads.

# %%
from pathlib import Path

import jax

TINY = dict(
    num_layers=2,
    num_embed=128,
    embed_dim=64,
    hidden_dim=128,
    num_heads=4,
    head_dim=16,
    num_kv_heads=1,
    sliding_window_size=64,
)
TINY_GEMMA4 = dict(  # the unshared layers end (local, global), as Tunix's KV sharing needs; the last layer global
    TINY,
    num_layers=4,
    attention_pattern=["LOCAL_SLIDING", "GLOBAL", "LOCAL_SLIDING", "GLOBAL"],
    frac_shared_layers=0.5,  # the last two layers reuse the keys and values of the first two
    override_kv_shared_ffw_hidden=2 * TINY["hidden_dim"],
    per_layer_input_dim=8,
    global_key_size=32,
    num_global_kv_heads=1,
)
model_folder, model_reason = None, f"MODEL={MODEL!r}"
if MODEL not in ("tiny", "tiny-gemma4", "auto") or (MODEL == "auto" and not SMOKE):
    handle = "google/gemma-3/transformers/gemma-3-1b-it" if MODEL == "auto" else MODEL
    model_folder, model_reason = gemma.find_model(handle)
    if Path(model_folder).resolve().is_relative_to(outputs.folder.resolve()):
        raise ParameterError(
            f"MODEL={model_folder!r} is inside OUTPUT_DIR, whose outputs this run replaces when it ends: copy the "
            f"model elsewhere first, or give another OUTPUT_DIR."
        )
sizes = gemma.gemma_config(model_folder) if model_folder else dict(TINY_GEMMA4 if MODEL == "tiny-gemma4" else TINY)
# Tunix's tunix.models.gemma4, tunix.models.gemma3, or tunix.models.gemma for Gemma 2
FAMILY = sizes.pop("family", "gemma4" if MODEL == "tiny-gemma4" else "gemma3")
if FAMILY == "gemma4":
    gemma4_config.check_tunix(sizes)
chosen = []  # the settings this cell chose, said in the summary below and in metrics.json
if not LEARNING_RATE:
    LEARNING_RATE = 3e-6 if model_folder else 3e-4
    chosen.append(f"LEARNING_RATE=0: {LEARNING_RATE:g}")
if not MAX_STEPS:
    MAX_STEPS = 500 if model_folder else 120
    chosen.append(f"MAX_STEPS=0: {MAX_STEPS}")
has_worked = any(worked[i] for i in train_rows)
if SFT_STEPS < 0:
    SFT_STEPS = 100 if has_worked and not model_folder else 0
    chosen.append(f"SFT_STEPS=-1: {SFT_STEPS}" + ("" if has_worked else " (the data has no worked solutions)"))
if not model_folder and LORA_RANK:
    chosen.append(f"LORA_RANK={LORA_RANK} -> 0: the tiny model's weights are random, every one trains")
    LORA_RANK = 0
if SMOKE and (MAX_PROMPT_LENGTH > 48 or MAX_NEW_TOKENS > 20):
    capped = min(MAX_PROMPT_LENGTH, 48), min(MAX_NEW_TOKENS, 20)
    chosen.append(
        f"MAX_PROMPT_LENGTH, MAX_NEW_TOKENS {MAX_PROMPT_LENGTH}, {MAX_NEW_TOKENS} -> {capped[0]}, {capped[1]} (smoke)"
    )
    MAX_PROMPT_LENGTH, MAX_NEW_TOKENS = capped
if SFT_STEPS and not has_worked:
    raise ParameterError(
        f"SFT_STEPS={SFT_STEPS}: the data has no worked solutions to learn from (answers written as GSM8K's: the "
        f"solution, then '#### <answer>'). Set SFT_STEPS=0, give such answers, or name a column of worked solutions "
        f"as REASONING_COLUMN."
    )
ROWS = BATCH_SIZE * NUM_GENERATIONS
FSDP, TP = planning.pick_mesh(model_sizes.from_config({**sizes, "family": FAMILY}), acc.num_replicas, ROWS, MESH)
DEVICE_KIND = jax.devices()[0].device_kind
plan = planning.memory_plan(
    model_sizes.from_config({**sizes, "family": FAMILY}),
    acc.num_replicas,
    (FSDP, TP),
    ROWS / acc.num_replicas,  # Tunix splits a step's rows over every device
    MAX_PROMPT_LENGTH + MAX_NEW_TOKENS,
    LORA_RANK,
    weight_bytes=2 if acc.kind == "tpu" else 4,
    chip_gib=planning.CHIP_GIB.get(DEVICE_KIND),
    grpo=True,
)
print(plan.describe())
if not plan.fits:
    raise ParameterError(plan.describe())
from_scratch = f"a tiny Gemma {FAMILY[-1]} from scratch"
print(f"model: {model_folder or from_scratch} ({model_reason}); mesh {FSDP} (fsdp) x {TP} (tp)")
print(f"warm start: {SFT_STEPS} SFT steps, lr {SFT_LEARNING_RATE:g}")
print(
    f"GRPO: {MAX_STEPS} steps of {BATCH_SIZE} questions x {NUM_GENERATIONS} answers, lr {LEARNING_RATE:g}, "
    f"LoRA rank {LORA_RANK}, beta {BETA}, epsilon {EPSILON}, temperature {TEMPERATURE}"
)
if chosen:
    print("chosen:", "; ".join(chosen))
settings = {  # a checkpoint continues only with the same settings (MAX_STEPS may grow)
    "model": str(model_folder or ("tiny" if MODEL == "auto" else MODEL)),
    "data": source,
    "rows": len(answers),
    "held_out": HELD_OUT,
    "seed": SEED,
    "lora_rank": LORA_RANK,
    "sft_steps": SFT_STEPS,
    "reasoning_column": REASONING_COLUMN,
    "sft_learning_rate": SFT_LEARNING_RATE,
    "learning_rate": LEARNING_RATE,
    "batch_size": BATCH_SIZE,
    "num_generations": NUM_GENERATIONS,
    "beta": BETA,
    "epsilon": EPSILON,
    "temperature": TEMPERATURE,
    "max_prompt_length": MAX_PROMPT_LENGTH,
    "max_new_tokens": MAX_NEW_TOKENS,
}
if not model_folder:  # the tiny model's vocabulary is learned: a checkpoint made with another tokenizer does not fit
    settings["tokenizer"] = "BPE learned from the data, Gemma's ids"
checkpoints = (outputs.folder / "checkpoints").resolve()  # orbax wants an absolute path
resumed_at, history = rl.checkpoint_run(checkpoints, settings, restart=RESUME == "restart")
if resumed_at:
    print(f"resuming at GRPO step {resumed_at} from {checkpoints}")

# %% [markdown]
# ## The task: prompt, answer format and rewards
# The model family's chat turn with the system prompt before the question (Gemma 4's own system turn; Gemma 3 and
# 2 put it before the question in the user's turn), ended by the family's end-of-turn piece. Each reward function
# takes the prompts, the completions and the data's columns (here `answer`) and returns one number a completion;
# GRPO adds them up.
# A format reward alone is soon gamed (tags around nothing): the answer rewards carry the task. Tunix's loss
# never sees the end token (a completion stops before it): an empty answer costs nothing, and from random weights
# the end token can climb until greedy answers are empty; `not_empty` scores them below any other. Edit freely:
# each function is called below as Tunix calls it, on hand-made ideal answers and on empty ones; a function that
# raises or returns the wrong count stops the run naming itself and the prompt, and one that pays the ideal
# answer no more than an empty one is named in a warning.

# %%
import re

import numpy as np

SYSTEM_PROMPT = "Think step by step inside <reasoning> </reasoning>, then give the answer inside <answer> </answer>."
FORMAT = re.compile(r"\s*<reasoning>(.+?)</reasoning>\s*<answer>(.+?)</answer>\s*$", re.DOTALL)


TURNS = {  # (the prompt around the system prompt and the question, the piece that ends a turn)
    "gemma4": ("<|turn>system\n{system}<turn|>\n<|turn>user\n{question}<turn|>\n<|turn>model\n", "<turn|>"),
    "gemma3": ("<start_of_turn>user\n{system}\n\n{question}<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>"),
}
TURN, END_OF_TURN_PIECE = TURNS["gemma4" if FAMILY == "gemma4" else "gemma3"]  # Gemma 2's turns are Gemma 3's


def chat_prompt(question):
    return TURN.format(system=SYSTEM_PROMPT, question=question)


def answer_of(completion):
    found = re.search(r"<answer>(.*?)</answer>", completion, re.DOTALL)
    return found.group(1).strip() if found else None


def format_exact(prompts, completions, **columns):
    return [1.0 if FORMAT.match(c) else 0.0 for c in completions]


PARTS = [r"\s*<reasoning>", r"[^<]+</reasoning>", r"\s*<answer>", r"[^<]+</answer>", r"\s*$"]
PARTS = [re.compile(part, re.DOTALL) for part in PARTS]


def format_partial(prompts, completions, **columns):  # the format's parts in order, a fifth of a point each
    def parts(completion):
        done, at = 0, 0
        while done < len(PARTS) and (found := PARTS[done].match(completion, at)):
            done, at = done + 1, found.end()
        return done / len(PARTS)

    return [parts(c) for c in completions]


def answer_exact(prompts, completions, answer, **columns):
    return [2.0 if answer_of(c) == a else 0.0 for c, a in zip(completions, answer)]


def number(text):
    try:
        return float((text or "").replace(",", "").split()[0])
    except (ValueError, IndexError):
        return None


def number_close(prompts, completions, answer, **columns):  # within 10%: half a point
    rewards = []
    for completion, reference in zip(completions, answer):
        given, truth = number(answer_of(completion)), number(reference)
        close = given is not None and truth is not None and abs(given - truth) <= 0.1 * abs(truth)
        rewards.append(0.5 if close else 0.0)
    return rewards


def not_empty(prompts, completions, **columns):  # the end token first: below any answer (see the next cell)
    return [0.0 if c.strip() else -1.0 for c in completions]


REWARDS = [format_exact, format_partial, answer_exact, number_close, not_empty]
some = train_rows[:4]
ideal = [f"<reasoning>...</reasoning><answer>{answers[i]}</answer>" for i in some]
checked = rl.check_rewards(
    REWARDS, [chat_prompt(pairs.prompts[i]) for i in some], ideal, answer=[answers[i] for i in some]
)
for name, values in checked.items():
    print(f"{name} on correct answers: {values}")

# %% [markdown]
# ## Tokenizer and prompt lengths
# The folder's `tokenizer.model` (SentencePiece), or for the tiny model one learned from the data with the chat and
# answer tags as whole pieces. Its pieces must be the model's vocabulary, every character of the data must map to
# a piece, and no prompt may be longer than `MAX_PROMPT_LENGTH` (those are counted, and the run stops).

# %%
import io

import sentencepiece

TURN_PIECES = ["<|turn>", "<turn|>"] if FAMILY == "gemma4" else ["<start_of_turn>", "<end_of_turn>"]
TAGS = [*TURN_PIECES, "<reasoning>", "</reasoning>", "<answer>", "</answer>", "\n"]
texts = [
    chat_prompt(q) + f"<reasoning>{w}</reasoning><answer>{a}</answer>"
    for q, w, a in zip(pairs.prompts, worked, answers)
]
if model_folder:
    tokenizer = sentencepiece.SentencePieceProcessor(model_file=f"{model_folder}/tokenizer.model")
else:  # every character of the data kept (character_coverage 1.0), a vocabulary of 128 or more where it needs
    # Gemma's special pieces and ids (`gemma_pieces`), so that Hugging Face reads the saved model alike; not Gemma's
    # byte fallback (256 pieces the data never uses: with them GRPO's claims failed in 2 of 4 seed runs) nor its
    # split digits (answers past the smoke profile's 20 new tokens).
    characters = len(set("".join(texts)))
    sizes["num_embed"] = max(128, -(-(characters + len(TAGS) + 36) // 8) * 8)
    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=proto,
        model_type="BPE",
        vocab_size=sizes["num_embed"],
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
        **export.gemma_pieces(TAGS),
    )
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
    sizes["num_embed"] = tokenizer.get_piece_size()
    # the vocabulary learned must divide by tp
    described = model_sizes.from_config({**sizes, "family": FAMILY})
    FSDP, TP = planning.pick_mesh(described, acc.num_replicas, ROWS, (FSDP, TP))
fixed = [chat_prompt(""), *TAGS]  # the notebook's own text first, so an unknown character in it is named as such
where = ["the system prompt and chat turn"] + ["a tag"] * len(TAGS) + pairs.where
rl.check_tokenizer(tokenizer, sizes["num_embed"], fixed + texts, where)
prompt_lengths = [len(tokenizer.encode(chat_prompt(q))) + 1 for q in pairs.prompts]  # + <bos>
rl.check_prompt_lengths(prompt_lengths, MAX_PROMPT_LENGTH, pairs.where, smoke_cap=48 if SMOKE else None)
print(
    f"vocabulary of {tokenizer.get_piece_size()} pieces; prompts of {min(prompt_lengths)}-{max(prompt_lengths)} tokens"
)

# %% [markdown]
# ## Model and LoRA
# The weights from the folder's safetensors (float32 on a CPU, bfloat16 on a TPU), or the tiny model's random
# ones, placed on the mesh as Tunix's Gemma shards them. With `LORA_RANK` > 0, qwix puts rank-`LORA_RANK` matrices
# beside the attention and MLP kernels and only those train; the reference model is then the base itself (Gemma 4's
# per-layer input projections and its experts, where it has them, stay as they are).

# %%
import jax.numpy as jnp
import qwix
from flax import nnx
from tunix.models.gemma import model as gemma2
from tunix.models.gemma import params_safetensors as gemma2_safetensors
from tunix.models.gemma3 import model as gemma3
from tunix.models.gemma3 import params_safetensors
from tunix.models.gemma4 import model as gemma4
from tunix.models.gemma4 import params_safetensors as gemma4_safetensors
from tunix.rl import reshard

DTYPE = jnp.bfloat16 if acc.kind == "tpu" else jnp.float32
mesh = jax.make_mesh((FSDP, TP), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
if FAMILY == "gemma2":  # Tunix's Gemma 2 config has no param_dtype: the loader casts to DTYPE
    attention_types = [gemma2.AttentionType[t] for t in sizes["attention_types"]]
    config = gemma2.ModelConfig(**{**sizes, "attention_types": attention_types})
    loader = gemma2_safetensors
elif FAMILY == "gemma4":
    pattern = tuple(gemma4.AttentionType[t] for t in sizes["attention_pattern"])
    config = gemma4.ModelConfig(**{**sizes, "attention_pattern": pattern}, param_dtype=DTYPE)
    loader = gemma4_safetensors
else:
    config, loader = gemma3.ModelConfig(**sizes, param_dtype=DTYPE), params_safetensors


def build_model():
    if model_folder:
        return loader.create_model_from_safe_tensors(model_folder, config, mesh, dtype=DTYPE)
    model = (gemma4.Gemma4 if FAMILY == "gemma4" else gemma3.Gemma3)(config, rngs=nnx.Rngs(params=SEED))
    # Tunix's Gemma starts its feed-forward kernels at zero (its models are loaded, not trained from scratch):
    # gate x up would be 0 with a gradient of 0, and the MLP would never train. Drawn as a fresh network's are.
    keys = iter(jax.random.split(jax.random.key(SEED), 3 * len(model.layers)))
    for layer in model.layers:
        for kernel in (layer.mlp.gate_proj.kernel, layer.mlp.up_proj.kernel, layer.mlp.down_proj.kernel):
            shape, dtype = kernel[...].shape, kernel[...].dtype
            kernel[...] = jax.random.normal(next(keys), shape, dtype) / shape[0] ** 0.5
    with jax.set_mesh(mesh):
        return reshard.reshard_model_to_mesh(model, mesh)


LORA_MODULES = ".*q_einsum|.*kv_einsum|.*k_einsum|.*attn_vec_einsum|.*gate_proj|.*up_proj|.*down_proj"  # k: K=V
TRAINED = nnx.LoRAParam if LORA_RANK else nnx.Param
reference = build_model()
if LORA_RANK:
    provider = qwix.LoraProvider(module_path=LORA_MODULES, rank=LORA_RANK, alpha=float(LORA_RANK))
    with jax.set_mesh(mesh):
        actor = qwix.apply_lora_to_model(reference, provider, rngs=nnx.Rngs(SEED), **reference.get_model_input())
    actor = reshard.reshard_model_to_mesh(actor, mesh)
else:  # a copy: the reference stays where it started
    actor = nnx.merge(nnx.graphdef(reference), jax.tree.map(jnp.copy, nnx.state(reference)))
parameters = sum(x.size for x in jax.tree.leaves(nnx.state(reference, nnx.Param)))
trained = sum(x.size for x in jax.tree.leaves(nnx.state(actor, TRAINED)))
print(f"{parameters:,} parameters, {trained:,} of them trained")

# %% [markdown]
# ## Warm start (SFT)
# GRPO learns only where some answers of a group score above the others. From a model that never writes the format
# or a right answer (the tiny model from scratch; a base Gemma on a hard task) every reward is 0 and nothing moves:
# the winners of Kaggle's Tunix hackathon fine-tuned first, then ran GRPO. So `SFT_STEPS` supervised steps on the
# worked answers come first, through Tunix's own `PeftTrainer`: `<reasoning>` the worked solution, `<answer>` the
# reference, the loss on the answer's tokens only. A hundred steps teach the tiny model the format and some right
# answers on the sample; GRPO then has something to raise. A rule of your own may want more: copying a question's
# first word took the tiny model 400 steps (after 100 it answered 0-12% right, and GRPO had nothing to raise).
# Under full training the warm-started model is GRPO's reference. Its checkpoint (checkpoints/sft/) is kept, so a
# resumed run does not repeat it.

# %% tags=["nbval-ignore-output"]
import optax
import orbax.checkpoint as ocp
from tunix.sft import peft_trainer
from tunix.sft import utils as sft_utils

SFT_LENGTH = MAX_PROMPT_LENGTH + MAX_NEW_TOKENS
END_OF_TURN = tokenizer.piece_to_id(END_OF_TURN_PIECE)


def sft_example(row):  # (tokens, loss mask) of one worked answer, padded to SFT_LENGTH
    prompt = [tokenizer.bos_id()] + tokenizer.encode(chat_prompt(pairs.prompts[row]))
    target = f"<reasoning>{worked[row]}</reasoning><answer>{answers[row]}</answer>"
    answer = tokenizer.encode(target) + [END_OF_TURN]
    tokens = (prompt + answer)[:SFT_LENGTH]
    mask = ([0] * len(prompt) + [1] * len(answer))[:SFT_LENGTH]
    padding = [tokenizer.pad_id()] * (SFT_LENGTH - len(tokens))
    return tokens + padding, mask + [0] * len(padding)


def sft_batches():  # ROWS worked answers a step, drawn at random from the training rows that have one
    rows = [row for row in train_rows if worked[row]]
    rng = np.random.default_rng(SEED)
    while True:
        tokens, mask = zip(*[sft_example(row) for row in rng.choice(rows, ROWS)])
        yield peft_trainer.TrainingInput(input_tokens=np.array(tokens), input_mask=np.array(mask))


def sft_model_input(batch):  # what Tunix's default SFT loss takes
    valid = batch.input_tokens != tokenizer.pad_id()
    return {
        "input_tokens": batch.input_tokens,
        "input_mask": batch.input_mask,
        "positions": sft_utils.build_positions_from_mask(valid),
        "attention_mask": sft_utils.make_causal_attn_mask(valid),
    }


sft_losses = []
if SFT_STEPS:
    sft_config = peft_trainer.TrainingConfig(
        eval_every_n_steps=10**9,
        max_steps=SFT_STEPS,
        checkpoint_root_directory=str(checkpoints / "sft"),
        checkpointing_options=ocp.CheckpointManagerOptions(save_interval_steps=SFT_STEPS, max_to_keep=1),
        pbar_description=None,
    )
    sft = peft_trainer.PeftTrainer(actor, optax.adamw(SFT_LEARNING_RATE), sft_config)
    sft = sft.with_gen_model_input_fn(sft_model_input)
    with jax.set_mesh(mesh):
        sft.train(sft_batches())
    if sft.metrics_logger.metric_exists("", "loss", "train"):  # none when its checkpoint was restored
        sft_losses = [float(x) for x in sft.metrics_logger.get_metric_history("", "loss", "train")]
        print(f"warm start: loss {sft_losses[0]:.2f} -> {sft_losses[-1]:.2f} in {len(sft_losses)} steps")
    else:
        print(f"warm start: restored from {checkpoints / 'sft'} ({sft.train_steps} steps)")
    if not LORA_RANK:  # the warm-started model is the reference GRPO's KL term holds the actor near
        reference = nnx.merge(nnx.graphdef(actor), jax.tree.map(jnp.copy, nnx.state(actor)))
    del sft  # its optimizer state would stay on the chips through GRPO

# %% [markdown]
# ## Evaluate (before)
# Greedy answers to the held-out questions: answer accuracy (exactly the reference), the share in the format, the
# mean share of the format's parts written in order, the share of empty answers (a warning when any), the mean
# completion length in tokens, and a few completions.

# %% tags=["nbval-ignore-output"]
from tunix.generate import sampler as sampler_lib

EOS = [tokenizer.eos_id(), END_OF_TURN]
checked_format_exact, checked_format_partial = rl.named_rewards([format_exact, format_partial])


def evaluate(model, rows, show=0):
    cache = sampler_lib.CacheConfig(
        cache_size=MAX_PROMPT_LENGTH + MAX_NEW_TOKENS + 8,
        num_layers=sizes["num_layers"],
        num_kv_heads=sizes["num_kv_heads"],
        head_dim=sizes["head_dim"],
    )
    sampler = sampler_lib.Sampler(model, tokenizer, cache)
    prompts = [chat_prompt(pairs.prompts[i]) for i in rows]
    with jax.set_mesh(mesh):
        out = sampler(
            prompts,
            max_generation_steps=MAX_NEW_TOKENS,
            max_prompt_length=MAX_PROMPT_LENGTH,
            temperature=0.0,
            eos_tokens=EOS,
        )
    texts = [t.split(END_OF_TURN_PIECE)[0] for t in out.text]
    lengths = [len(t) for t in out.tokens]  # the tokens written before the first end token
    for i, text in zip(rows[:show], texts):
        print(f"  {pairs.prompts[i]!r} -> {text!r} (answer {answers[i]!r})")
    if not all(lengths):
        print(
            f"WARNING: {lengths.count(0)} of {len(lengths)} greedy completions are empty (an end token first): the "
            f"scores below are of nothing. Keep not_empty among the rewards, lower LEARNING_RATE, or warm-start "
            f"longer (SFT_STEPS)."
        )
    right = [answer_of(text) == answers[i] for text, i in zip(texts, rows)]
    return {
        "accuracy": float(np.mean(right)),
        "format_share": float(np.mean(checked_format_exact(prompts, texts))),
        "format_parts": float(np.mean(checked_format_partial(prompts, texts))),
        "empty_share": lengths.count(0) / len(lengths),
        "mean_length": float(np.mean(lengths)),
        "completions": texts,
    }


before = evaluate(actor, held_out_rows, show=3)
print({k: round(v, 3) for k, v in before.items() if k != "completions"})

# %% [markdown]
# ## GRPO
# Tunix's `RLCluster` holds the actor, the reference and the rollout sampler on the mesh; `GRPOLearner` writes
# `NUM_GENERATIONS` answers a question, scores them, and updates the actor. A checkpoint every `CHECKPOINT_EVERY`
# steps and at the end (orbax, in OUTPUT_DIR/checkpoints/); `RESUME="auto"` continues at the step reached, with
# the same data order (the learner skips the batches already trained on); a run that already reached `MAX_STEPS`
# trains no more. `TIME_BUDGET` ends training before the next step would pass it, with a last checkpoint. Each
# step's rewards and completion length are kept beside the checkpoints, so a resumed run plots the whole history.

# %% tags=["nbval-ignore-output"]
import time

import grain
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl.grpo import grpo_learner
from tunix.rl.rollout import base_rollout

rows = [{"prompts": chat_prompt(pairs.prompts[i]), "answer": answers[i]} for i in train_rows]
epochs = MAX_STEPS * BATCH_SIZE // len(rows) + 1  # enough for MAX_STEPS (grain cannot batch 1 of an endless repeat)
dataset = grain.MapDataset.source(rows).shuffle(seed=SEED).repeat(epochs).batch(BATCH_SIZE)
schedule = optax.warmup_constant_schedule(0, LEARNING_RATE, max(1, MAX_STEPS // 20))
Role = rl_cluster_lib.Role
cluster_config = rl_cluster_lib.ClusterConfig(
    role_to_mesh={Role.ACTOR: mesh, Role.REFERENCE: mesh, Role.ROLLOUT: mesh},
    rollout_engine="vanilla",
    training_config=rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=optax.adamw(schedule, b2=0.99, weight_decay=0.1),
        eval_every_n_steps=10**9,
        max_steps=MAX_STEPS,
        checkpoint_root_directory=str(checkpoints),
        checkpointing_options=ocp.CheckpointManagerOptions(save_interval_steps=CHECKPOINT_EVERY, max_to_keep=2),
    ),
    rollout_config=base_rollout.RolloutConfig(
        max_tokens_to_generate=MAX_NEW_TOKENS,
        max_prompt_length=MAX_PROMPT_LENGTH,
        temperature=TEMPERATURE,
        top_p=1.0,
        top_k=None,
        kv_cache_size=MAX_PROMPT_LENGTH + MAX_NEW_TOKENS + 8,
        eos_tokens=EOS,
        seed=SEED,
    ),
)
# Where GRPO starts, to count what it moved: under full training the reference is that copy; LoRA's weights are small.
start_state = jax.tree.map(jnp.copy, nnx.state(actor, TRAINED)) if LORA_RANK else nnx.state(reference, nnx.Param)
cluster = rl_cluster_lib.RLCluster(actor=actor, reference=reference, tokenizer=tokenizer, cluster_config=cluster_config)
earlier = len(history)  # the steps kept from the run this one resumes


def keep_metrics(buffer):  # each step's reward means and completion length (other buffers have no rewards)
    kept = ("rewards/", "completions/mean")
    step = {k: float(np.mean(v[0])) for k, v in buffer.metrics.items() if k.startswith(kept)}
    if step:
        history.append({"step": resumed_at + len(history) - earlier + 1, **step})
        atomic.write_json(history, checkpoints / "history.json")


cluster.with_external_metrics_logger(keep_metrics)
algo_config = grpo_learner.GRPOConfig(  # the KL estimate of the GRPO paper (Tunix's default is the plain log-ratio)
    num_generations=NUM_GENERATIONS, num_iterations=1, beta=BETA, epsilon=EPSILON, kl_loss_mode="low_var_kl"
)
learner = grpo_learner.GRPOLearner(rl_cluster=cluster, reward_fns=rl.named_rewards(REWARDS), algo_config=algo_config)
start = time.perf_counter()
batches = rl.time_budget(iter(dataset), TIME_BUDGET * 60, resumed_at)
if resumed_at >= MAX_STEPS:
    print(
        f"the checkpoint already reached step {resumed_at} (MAX_STEPS={MAX_STEPS}): nothing to train. Raise "
        f"MAX_STEPS to train on, or RESUME='restart' to start again; the outputs are written again from it."
    )
else:
    learner.train(batches)
steps = cluster.actor_trainer.train_steps
seconds = time.perf_counter() - start
stopped = f" (TIME_BUDGET reached: {batches.stopped})" if batches.stopped else ""
print(f"steps {resumed_at} -> {steps} in {seconds:.0f} s{stopped}")

# %% [markdown]
# ## Evaluate (after) and plots
# The same held-out questions, greedy. Then each reward and the completion length per step, over the whole run
# (a resumed run's earlier steps included), the KL term of this session's steps, and the warm start's loss.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

after = evaluate(actor, held_out_rows, show=3)
print({k: round(v, 3) for k, v in after.items() if k != "completions"})
names = [f"rewards/{f.__name__}" for f in REWARDS]
x = [h["step"] for h in history]
trained_now = BETA and steps > resumed_at  # Tunix logs the KL of this session's steps only
kl = cluster.actor_trainer.metrics_logger.get_metric_history("actor", "kl", "train") if trained_now else []
figure, axes = plt.subplots(1, 4, figsize=(16, 3.5))
for name in names:
    axes[0].plot(x, [h.get(name, np.nan) for h in history], label=name.split("/")[1])
axes[0].set(title="rewards per step", xlabel="GRPO step")
axes[0].legend(fontsize=7)
axes[1].plot(np.arange(resumed_at + 1, resumed_at + 1 + len(kl)), np.asarray(kl, float))
axes[1].set(title="KL to the reference (this session)", xlabel="GRPO step")
axes[2].plot(x, [h.get("completions/mean_length", np.nan) for h in history])
axes[2].set(title="completion length (tokens)", xlabel="GRPO step")
axes[3].plot(np.arange(1, len(sft_losses) + 1), sft_losses)
axes[3].set(title="warm start (SFT) loss", xlabel="SFT step")
figure.tight_layout()
figure.savefig(outputs.staging / "training.png", dpi=80)
plt.show()

fifth = max(1, len(history) // 5)
reward_change = {}
for name in names:
    first = [h[name] for h in history[:fifth] if name in h]
    last = [h[name] for h in history[-fifth:] if name in h]
    reward_change[name.split("/")[1]] = [float(np.mean(first or np.nan)), float(np.mean(last or np.nan))]
print(
    "rewards, first fifth of the steps -> last fifth:",
    {k: f"{a:.2f} -> {b:.2f}" for k, (a, b) in reward_change.items()},
)
if sum(b - a for a, b in reward_change.values()) <= 0:  # GRPO learns only where a group's answers score apart
    print(
        "WARNING: the rewards did not rise: few answers earned any. Warm-start longer (SFT_STEPS, or notebook 10), "
        "raise TEMPERATURE or MAX_STEPS, or add a reward that some answers already earn."
    )
start, now = (dict(nnx.to_flat_state(state)) for state in (start_state, nnx.state(actor, TRAINED)))
shared = {i for i, j in enumerate(getattr(actor, "kv_cache_sharing_patterns", ())) if i != j}
idle = {"kv_einsum", "k_einsum", "_key_norm"}  # Gemma 4's KV-shared layers keep these and never use them
used = [p for p in now if not (p[0] == "layers" and p[1] in shared and idle & set(p))]
moved = [not bool(jnp.array_equal(start[p][...], now[p][...])) for p in used]  # compared where the arrays are
moved_count = sum(now[p][...].size for p, m in zip(used, moved) if m)
unused = f" ({len(now) - len(used)} arrays of the KV-shared layers are never used)" if shared else ""
print(f"GRPO moved {moved_count:,} of the {trained:,} trained parameters{unused}")
if steps > resumed_at and not all(moved):
    print(f"WARNING: {moved.count(False)} of the {len(moved)} trained arrays never moved: their gradient is 0.")

# %%
if not model_folder:  # what the tiny run shows on any machine: every claim held in 15 of 16 runs (8 seeds, two CPU
    # float paths; bench/grpo_seeds.py; the tiny Gemma 4: in its one run, seed 42). 16 held-out questions are too few
    # to compare greedy accuracy before and after.
    reward_before, reward_after = reward_change["answer_exact"]
    claims = {
        "the warm start taught the format (half or more of the greedy answers)": before["format_share"] >= 0.5,
        "GRPO raised the rollouts' answer reward (first fifth of the steps -> last)": reward_after > reward_before,
        "after GRPO half or more of the greedy answers are right": after["accuracy"] >= 0.5,
        "greedy answers after GRPO keep the format's parts": after["format_parts"] >= 0.8,
    }
    for claim, held in claims.items():
        print(f"{claim}: {held}")

# %% [markdown]
# ## Save
# The trained model as Hugging Face safetensors (LoRA merged into the base weights), with `config.json` and
# `tokenizer.model`: Tunix's `params_safetensors.create_model_from_safe_tensors` loads it (and notebook 11 again
# as `MODEL`); with LoRA, the LoRA weights alone too. metrics.json says what trained, on what, and how it went.
# A Gemma 4 is written as Hugging Face's Gemma4ForCausalLM (its text model: `model_type` gemma4_text), whose
# config.json says what transformers needs to compute the same model (layer types, proportional RoPE, KV sharing).


# %%
def weights(model, kind=nnx.Param):
    flat = nnx.to_flat_state(nnx.state(model, kind))
    return {".".join(map(str, p)): np.asarray(v.get_value() if hasattr(v, "get_value") else v) for p, v in flat}


if LORA_RANK and FAMILY == "gemma3":  # Tunix's own merge of the LoRA weights into the base's safetensors
    from tunix.models.gemma3 import params as gemma3_params

    gemma3_params.save_lora_merged_model_as_safetensors(
        model_folder, str(outputs.staging / "model"), actor, LORA_RANK, float(LORA_RANK)
    )
else:  # every weight, any LoRA merged in (alpha / rank = 1): Tunix has no Gemma 2 or Gemma 4 LoRA merge
    export.save_gemma(FAMILY, weights(actor), sizes, tokenizer.serialized_model_proto(), outputs.staging / "model")
# What transformers and vLLM read besides the weights (token ids, stop tokens, the chat template), then the folder
# read back as transformers reads it: its tokenizer and chat turns against this run's.
export.write_for_transformers(outputs.staging / "model", tokenizer.serialized_model_proto())
shown = held_out_rows[:8]
checked = export.check_for_transformers(
    outputs.staging / "model",
    [texts[i] for i in shown],
    [
        (
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": pairs.prompts[i]}],
            "<bos>" + chat_prompt(pairs.prompts[i]),
        )
        for i in shown
    ],
)
print(f"model/ reads back as trained in Hugging Face transformers: {checked}")
if LORA_RANK:  # the LoRA weights alone beside
    from safetensors.numpy import save_file

    save_file(weights(actor, nnx.LoRAParam), str(outputs.staging / "lora.safetensors"))
metrics = {
    "model": str(model_folder or ("tiny" if MODEL == "auto" else MODEL)),
    "model_reason": model_reason,
    "tokenizer": f"{model_folder}/tokenizer.model" if model_folder else "learned from the data (SentencePiece BPE)",
    "data": source,
    "split": split_line,
    "sft_steps": SFT_STEPS,
    "sft_loss_first_last": sft_losses[:1] + sft_losses[-1:],
    "steps": steps,
    "resumed_at": resumed_at,
    "seconds": seconds,
    "mesh": [FSDP, TP],
    "before": {k: v for k, v in before.items() if k != "completions"},
    "after": {k: v for k, v in after.items() if k != "completions"},
    "rewards_first_last": reward_change,
    "trained_parameters_moved": moved_count,
    "settings": settings,
    "chosen": chosen,
}
atomic.write_json(metrics, outputs.staging / "metrics.json")
completions = {
    "prompts": [pairs.prompts[i] for i in held_out_rows],
    "answers": [answers[i] for i in held_out_rows],
    "before": before["completions"],
    "after": after["completions"],
}
atomic.write_json(completions, outputs.staging / "completions.json")
print("wrote model/ (safetensors, config.json, tokenizer files), metrics.json, completions.json, training.png")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
