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
# Config -> data -> rewards -> memory plan -> tokenizer -> model (+ LoRA) -> evaluate -> GRPO -> evaluate -> save.
# The model answers each question as `<reasoning>...</reasoning><answer>...</answer>`. For every question it
# writes `NUM_GENERATIONS` answers; the reward functions below score them; GRPO (Group Relative Policy
# Optimization) raises the likelihood of the answers that scored above their group's mean and lowers the others,
# while a KL term keeps the model near the reference it started from. Tunix (Google's JAX post-training library,
# which Kaggle's TPU image ships) runs the rollouts, the reference model and the updates, sharded over the chips.
#
# On Kaggle: attach Gemma 3 1B for Tunix (`google/gemma-3/transformers/gemma-3-1b-it`, after accepting Gemma's
# license), Gemma 2 2B (`google/gemma-2/transformers/gemma-2-2b-it`), or the model notebook 10 fine-tuned and exported (`EXPORT_TRANSFORMERS=True`): SFT first, then GRPO.
# Attach GSM8K (or your own question/answer CSV or JSONL), pick a TPU v5e-8. On a CPU with no model the same code
# trains a tiny Gemma 3 from scratch on a generated sample (count the words): it proves the pipeline.
#
# **This notebook is the program: edit it.** The system prompt, the answer format, the reward functions, the GRPO
# settings, LoRA and the evaluation are plain code below; `nbkit` finds and checks the data, the model's folder,
# the mesh and the memory, keeps the checkpoints' settings, and writes the outputs when the run ends.
#
# `papermill notebooks/11_grpo_reasoning.ipynb out/11.ipynb -p MESH 2x4 -p MAX_STEPS 60`

# %% tags=["parameters"]
MODEL: str = "auto"  # a folder of Hugging Face Gemma 3 or Gemma 2 safetensors (notebook 10's transformers/, or Gemma 3 1B / Gemma 2 2B for Tunix attached), a Kaggle Models handle of one (kagglehub), "tiny" (a tiny Gemma 3 from scratch); "auto": tiny on a CPU, else Gemma 3 1B
DATA_ROOT: str = "auto"  # a CSV or JSONL file of questions and answers, or a folder of them; "auto": GSM8K where attached, else the generated sample
QUESTION_COLUMN: str = "question"  # the column (CSV) or key (JSONL) of the questions
ANSWER_COLUMN: str = "answer"  # the column or key of the reference answers (GSM8K's: the number after "####" is used)
NUM_GENERATIONS: int = 4  # answers written per question: GRPO scores each against its group (at least 2)
BATCH_SIZE: int = 4  # questions a step (each gets NUM_GENERATIONS answers); BATCH_SIZE x NUM_GENERATIONS must divide by the mesh's fsdp
BETA: float = 0.04  # the KL term's weight: how hard the model is held near the reference
EPSILON: float = 0.2  # the clip of the policy ratio (as PPO's)
LEARNING_RATE: float = 0.0  # AdamW's peak; 0: the model's choice, 3e-6 for Gemma, 3e-3 for the tiny model
MAX_STEPS: int = 0  # GRPO steps; 0: the model's choice, 500 for Gemma, 120 for the tiny model
LORA_RANK: int = 64  # the rank of the LoRA matrices beside the attention and MLP kernels; 0: every weight trains
MAX_PROMPT_LENGTH: int = 256  # tokens of a prompt (system prompt and chat turn included): longer prompts stop the run, counted
MAX_NEW_TOKENS: int = 256  # tokens an answer may have
TEMPERATURE: float = 0.9  # the rollouts' sampling temperature (the evaluation is greedy)
HELD_OUT: int = 16  # questions held out for the evaluation before and after
MESH: str = "auto"  # "auto", "data" (every device on fsdp), or fsdp x tp devices such as "2x4"
CHECKPOINT_EVERY: int = 50  # steps between checkpoints (Kaggle sessions end)
TIME_BUDGET: float = 480.0  # minutes of training at most (a Kaggle TPU session: 9 hours); then a last checkpoint, and on
RESUME: str = "auto"  # "auto": continue from OUTPUT_DIR's checkpoint (same settings, same data order); "restart": from scratch
PROFILE: str = "auto"  # "full": the settings above; "smoke": short answers and prompts, the tiny model when no Gemma is attached; "auto": smoke on a CPU
SIMULATE_DEVICES: int = 8  # CPU only: split the CPU into N devices, as a TPU v5e-8 has chips (0: no split); no effect on a TPU
SEED: int = 42  # fixes the split, the tiny model, LoRA's initial weights, the data order and the rollouts' sampling
OUTPUT_DIR: str = "auto"  # where the model, metrics.json, plots and checkpoints go; "auto": the working folder's grpo-reasoning/

# %% [markdown]
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in a staging folder and
# replace the previous run's only when the run ends well; the checkpoints live beside them), then the devices.

# %%
from nbkit import accel, atomic, params, staging
from nbkit.errors import ParameterError
from nbkit.llm import data, gemma, rl

params.check_parameters(
    globals(), NUM_GENERATIONS=2, BATCH_SIZE=1, MAX_STEPS=0, LORA_RANK=0, MAX_PROMPT_LENGTH=4, MAX_NEW_TOKENS=1,
    HELD_OUT=1, CHECKPOINT_EVERY=1, RESUME=("auto", "restart"),
)  # fmt: skip
for name, low, high in (("BETA", 0, 10), ("EPSILON", 0, 1), ("LEARNING_RATE", 0, 1), ("TEMPERATURE", 0, 10), ("TIME_BUDGET", 0, 1e6)):  # fmt: skip
    if not low <= globals()[name] < high or (name in ("TEMPERATURE", "TIME_BUDGET") and globals()[name] == 0):
        raise ParameterError(f"{name}={globals()[name]}: out of range ({low} to {high}; see its comment).")
outputs = staging.start(OUTPUT_DIR, default="grpo-reasoning", data_root=DATA_ROOT)
print(outputs.describe())
acc = accel.setup("jax", simulate_devices=SIMULATE_DEVICES)
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")

# %% [markdown]
# ## Data
# Every question/answer pair is read and checked before anything loads. GSM8K's answers end in `#### <number>`:
# that number is the reference. A few questions, drawn at random, are held out for the evaluation.

# %%
import numpy as np

path, source = rl.find_questions(DATA_ROOT)
pairs = data.load_pairs(path, QUESTION_COLUMN, ANSWER_COLUMN, names=("QUESTION_COLUMN", "ANSWER_COLUMN"))
answers = [a.split("####")[-1].strip().replace(",", "") for a in pairs.responses]
print(f"data: {source}; {len(answers)} question/answer pairs")
order = np.random.default_rng(SEED).permutation(len(answers))
if len(order) < HELD_OUT + BATCH_SIZE:
    raise ParameterError(f"{len(order)} pairs: fewer than HELD_OUT={HELD_OUT} + BATCH_SIZE={BATCH_SIZE}. Give more.")
held_out_rows, train_rows = order[:HELD_OUT], order[HELD_OUT:]

# %% [markdown]
# ## The task: prompt, answer format and rewards
# Gemma's chat turn with the system prompt before the question. Each reward function takes the prompts, the
# completions and the data's columns (here `answer`) and returns one number a completion; GRPO adds them up.
# A format reward alone is soon gamed (tags around nothing): the answer rewards carry the task. Tunix's loss
# never sees the end token (a completion stops before it): an empty answer costs nothing, and from random weights
# the end token can climb until greedy answers are empty; `not_empty` scores them below any other. Edit freely:
# each function is called once below on hand-made answers, and a function that raises or returns the wrong
# count stops the run naming itself and the prompt.

# %%
import re

SYSTEM_PROMPT = "Think step by step inside <reasoning> </reasoning>, then give the answer inside <answer> </answer>."
FORMAT = re.compile(r"\s*<reasoning>(.+?)</reasoning>\s*<answer>(.+?)</answer>\s*$", re.DOTALL)


def chat_prompt(question):
    return f"<start_of_turn>user\n{SYSTEM_PROMPT}\n\n{question}<end_of_turn>\n<start_of_turn>model\n"


def answer_of(completion):
    found = re.search(r"<answer>(.*?)</answer>", completion, re.DOTALL)
    return found.group(1).strip() if found else None


def format_exact(prompts, completions, **columns):
    return [1.0 if FORMAT.match(c) else 0.0 for c in completions]


PARTS = [re.compile(p, re.DOTALL) for p in (r"\s*<reasoning>", r"[^<]+</reasoning>", r"\s*<answer>", r"[^<]+</answer>", r"\s*$")]


def format_partial(prompts, completions, **columns):  # the format's parts in order, a fifth of a point each
    def parts(c, n=0, at=0):
        while n < len(PARTS) and (found := PARTS[n].match(c, at)):
            n, at = n + 1, found.end()
        return n / len(PARTS)

    return [parts(c) for c in completions]


def answer_exact(prompts, completions, answer, **columns):
    return [2.0 if answer_of(c) == a else 0.0 for c, a in zip(completions, answer)]


def number_close(prompts, completions, answer, **columns):  # within 10%: half a point
    def number(text):
        try:
            return float((text or "").replace(",", "").split()[0])
        except (ValueError, IndexError):
            return None

    found = [(number(answer_of(c)), number(a)) for c, a in zip(completions, answer)]
    return [0.5 if g is not None and t is not None and abs(g - t) <= 0.1 * abs(t) else 0.0 for g, t in found]


def not_empty(prompts, completions, **columns):  # the end token first: below any answer (see the next cell)
    return [0.0 if c.strip() else -1.0 for c in completions]


REWARDS = [format_exact, format_partial, answer_exact, number_close, not_empty]
ideal = [f"<reasoning>...</reasoning><answer>{answers[i]}</answer>" for i in train_rows[:4]]
for name, values in rl.check_rewards(REWARDS, [chat_prompt(pairs.prompts[i]) for i in train_rows[:4]], ideal, answer=[answers[i] for i in train_rows[:4]]).items():  # fmt: skip
    print(f"{name} on correct answers: {values}")

# %% [markdown]
# ## Model, mesh and memory plan
# A Gemma folder's `config.json` says how large the model is before any weight is read. Tunix shards the
# vocabulary, the heads and the feed-forward width over `tp` and the width and the batch over `fsdp`: a mesh that
# does not divide them is refused here. The plan adds up each chip's bytes: the actor, what trains and AdamW's
# state, the reference model (the same weights under LoRA), the rollouts' KV cache and the step's activations.

# %%
import jax

TINY = dict(num_layers=2, num_embed=128, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=1, sliding_window_size=64)  # fmt: skip
model_folder, model_reason = None, f"MODEL={MODEL!r}"
if MODEL not in ("tiny", "auto") or (MODEL == "auto" and not SMOKE):
    model_folder, model_reason = gemma.find_model("google/gemma-3/transformers/gemma-3-1b-it" if MODEL == "auto" else MODEL)
sizes = gemma.gemma_config(model_folder) if model_folder else dict(TINY)
FAMILY = sizes.pop("family", "gemma3")  # Tunix's tunix.models.gemma3, or tunix.models.gemma for Gemma 2
defaults = {"LEARNING_RATE": 3e-6 if model_folder else 3e-3, "MAX_STEPS": 500 if model_folder else 120}
chosen = [f"{n}=0: {v:g}" for n, v in defaults.items() if not globals()[n]]
LEARNING_RATE, MAX_STEPS = LEARNING_RATE or defaults["LEARNING_RATE"], MAX_STEPS or defaults["MAX_STEPS"]
if not model_folder and LORA_RANK:
    chosen.append(f"LORA_RANK={LORA_RANK} -> 0: the tiny model's weights are random, every one trains")
    LORA_RANK = 0
if SMOKE and (MAX_PROMPT_LENGTH > 48 or MAX_NEW_TOKENS > 20):
    chosen.append(f"MAX_PROMPT_LENGTH, MAX_NEW_TOKENS {MAX_PROMPT_LENGTH}, {MAX_NEW_TOKENS} -> 48, 20 (smoke)")
    MAX_PROMPT_LENGTH, MAX_NEW_TOKENS = min(MAX_PROMPT_LENGTH, 48), min(MAX_NEW_TOKENS, 20)
ROWS = BATCH_SIZE * NUM_GENERATIONS
FSDP, TP = gemma.pick_mesh(sizes, acc.num_replicas, ROWS, MESH)
DEVICE_KIND = jax.devices()[0].device_kind
plan = gemma.memory_plan(sizes, acc.num_replicas, LORA_RANK, ROWS, MAX_PROMPT_LENGTH + MAX_NEW_TOKENS, 2 if acc.kind == "tpu" else 4, gemma.CHIP_GIB.get(DEVICE_KIND))  # fmt: skip
print(plan.describe())
if not plan.fits:
    raise ParameterError(plan.describe())
print(f"model: {model_folder or 'a tiny Gemma 3 from scratch'} ({model_reason}); mesh {FSDP} (fsdp) x {TP} (tp)")
print(f"{MAX_STEPS} steps of {BATCH_SIZE} questions x {NUM_GENERATIONS} answers, lr {LEARNING_RATE:g}, LoRA rank {LORA_RANK}, beta {BETA}, epsilon {EPSILON}" + (f" ({'; '.join(chosen)})" if chosen else ""))  # fmt: skip

# %% [markdown]
# ## Tokenizer and prompt lengths
# The folder's `tokenizer.model` (SentencePiece), or for the tiny model one learned from the data with the chat and
# answer tags as whole pieces. Its pieces must be the model's vocabulary, every character of the data must map to
# a piece, and no prompt may be longer than `MAX_PROMPT_LENGTH` (those are counted, and the run stops).

# %%
import io

import sentencepiece

TAGS = ["<start_of_turn>", "<end_of_turn>", "<reasoning>", "</reasoning>", "<answer>", "</answer>", "\n"]
if model_folder:
    tokenizer = sentencepiece.SentencePieceProcessor(model_file=f"{model_folder}/tokenizer.model")
else:  # every character of the data kept (character_coverage 1.0), a vocabulary of 128 or more where it needs
    texts = [chat_prompt(q) + f"<reasoning>{q}</reasoning><answer>{a}</answer>" for q, a in zip(pairs.prompts, answers)]
    sizes["num_embed"] = max(128, -(-(len(set("".join(texts))) + len(TAGS) + 36) // 8) * 8)
    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=proto, model_type="BPE", vocab_size=sizes["num_embed"], hard_vocab_limit=False,
        character_coverage=1.0, pad_id=0, bos_id=1, eos_id=2, unk_id=3, user_defined_symbols=TAGS,
        normalization_rule_name="identity", remove_extra_whitespaces=False, minloglevel=2,
    )  # fmt: skip
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
    sizes["num_embed"] = tokenizer.get_piece_size()
    FSDP, TP = gemma.pick_mesh(sizes, acc.num_replicas, ROWS, (FSDP, TP))  # the vocabulary learned must divide by tp
rl.check_tokenizer(tokenizer, sizes["num_embed"], [chat_prompt(q) for q in pairs.prompts] + TAGS + answers, pairs.where)
prompt_lengths = [len(tokenizer.encode(chat_prompt(q))) + 1 for q in pairs.prompts]  # + <bos>
rl.check_prompt_lengths(prompt_lengths, MAX_PROMPT_LENGTH, pairs.where)
print(f"vocabulary of {tokenizer.get_piece_size()} pieces; prompts of {min(prompt_lengths)} to {max(prompt_lengths)} tokens")

# %% [markdown]
# ## Model and LoRA
# The weights from the folder's safetensors (float32 on a CPU, bfloat16 on a TPU), or the tiny model's random
# ones, placed on the mesh as Tunix's Gemma shards them. With `LORA_RANK` > 0, qwix puts rank-`LORA_RANK` matrices
# beside the attention and MLP kernels and only those train; the reference model is then the base itself.

# %%
import jax.numpy as jnp
import qwix
from flax import nnx
from tunix.models.gemma import model as gemma2
from tunix.models.gemma import params_safetensors as gemma2_safetensors
from tunix.models.gemma3 import model as gemma3
from tunix.models.gemma3 import params_safetensors
from tunix.rl import reshard

DTYPE = jnp.bfloat16 if acc.kind == "tpu" else jnp.float32
mesh = jax.make_mesh((FSDP, TP), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
if FAMILY == "gemma2":  # Tunix's Gemma 2 config has no param_dtype: the loader casts to DTYPE
    config = gemma2.ModelConfig(**{**sizes, "attention_types": [gemma2.AttentionType[t] for t in sizes["attention_types"]]})
    loader = gemma2_safetensors
else:
    config, loader = gemma3.ModelConfig(**sizes, param_dtype=DTYPE), params_safetensors


def build_model():
    if model_folder:
        return loader.create_model_from_safe_tensors(model_folder, config, mesh, dtype=DTYPE)
    with jax.set_mesh(mesh):
        return reshard.reshard_model_to_mesh(gemma3.Gemma3(config, rngs=nnx.Rngs(params=SEED)), mesh)


LORA_MODULES = ".*q_einsum|.*kv_einsum|.*attn_vec_einsum|.*gate_proj|.*up_proj|.*down_proj"
reference = build_model()
if LORA_RANK:
    provider = qwix.LoraProvider(module_path=LORA_MODULES, rank=LORA_RANK, alpha=float(LORA_RANK))
    with jax.set_mesh(mesh):
        actor = qwix.apply_lora_to_model(reference, provider, rngs=nnx.Rngs(SEED), **reference.get_model_input())
    actor = reshard.reshard_model_to_mesh(actor, mesh)
else:  # a copy: the reference stays where it started
    actor = nnx.merge(nnx.graphdef(reference), jax.tree.map(jnp.copy, nnx.state(reference)))
trained = sum(x.size for x in jax.tree.leaves(nnx.state(actor, nnx.LoRAParam if LORA_RANK else nnx.Param)))
print(f"{sum(x.size for x in jax.tree.leaves(nnx.state(reference, nnx.Param))):,} parameters, {trained:,} of them trained")

# %% [markdown]
# ## Evaluate (before)
# Greedy answers to the held-out questions: answer accuracy (exactly the reference), the share in the format, the
# mean share of the format's parts written in order, the share of empty answers (a warning when any), the mean
# completion length in tokens, and a few completions.

# %% tags=["nbval-ignore-output"]
from tunix.generate import sampler as sampler_lib

EOS = [tokenizer.eos_id(), tokenizer.piece_to_id("<end_of_turn>")]


def evaluate(model, rows, show=0):
    sampler = sampler_lib.Sampler(model, tokenizer, sampler_lib.CacheConfig(cache_size=MAX_PROMPT_LENGTH + MAX_NEW_TOKENS + 8, num_layers=sizes["num_layers"], num_kv_heads=sizes["num_kv_heads"], head_dim=sizes["head_dim"]))  # fmt: skip
    prompts = [chat_prompt(pairs.prompts[i]) for i in rows]
    with jax.set_mesh(mesh):
        out = sampler(prompts, max_generation_steps=MAX_NEW_TOKENS, max_prompt_length=MAX_PROMPT_LENGTH, temperature=0.0, eos_tokens=EOS)  # fmt: skip
    texts = [t.split("<end_of_turn>")[0] for t in out.text]
    lengths = [len(t) for t in out.tokens]  # the tokens written before the first end token
    truth = [answers[i] for i in rows]
    for i, text in zip(rows[:show], texts):
        print(f"  {pairs.prompts[i]!r} -> {text!r} (answer {answers[i]!r})")
    if not all(lengths):
        print(f"WARNING: {lengths.count(0)} of {len(lengths)} greedy completions are empty (an end token first): the scores below are of nothing. Keep not_empty among the rewards, lower LEARNING_RATE, or start from a model that answers (SFT).")  # fmt: skip
    return {"accuracy": float(np.mean([answer_of(t) == a for t, a in zip(texts, truth)])),
            "format_share": float(np.mean(format_exact(prompts, texts))), "format_parts": float(np.mean(format_partial(prompts, texts))),
            "empty_share": lengths.count(0) / len(lengths), "mean_length": float(np.mean(lengths)), "completions": texts}  # fmt: skip


before = evaluate(actor, held_out_rows, show=3)
print({k: round(v, 3) for k, v in before.items() if k != "completions"})

# %% [markdown]
# ## GRPO
# Tunix's `RLCluster` holds the actor, the reference and the rollout sampler on the mesh; `GRPOLearner` writes
# `NUM_GENERATIONS` answers a question, scores them, and updates the actor. A checkpoint every `CHECKPOINT_EVERY`
# steps and at the end (orbax, in OUTPUT_DIR/checkpoints/); `RESUME="auto"` continues at the step reached, with
# the same data order (the learner skips the batches already trained on). `TIME_BUDGET` ends training before the
# next step would pass it, with a last checkpoint. Each step's rewards, KL and completion length are kept.

# %% tags=["nbval-ignore-output"]
import time

import grain
import optax
import orbax.checkpoint as ocp
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl.grpo import grpo_learner
from tunix.rl.rollout import base_rollout

settings = {"model": str(model_folder or "tiny"), "data": source, "rows": len(answers), "lora_rank": LORA_RANK,
            "learning_rate": LEARNING_RATE, "batch_size": BATCH_SIZE, "num_generations": NUM_GENERATIONS, "beta": BETA,
            "epsilon": EPSILON, "seed": SEED, "max_prompt_length": MAX_PROMPT_LENGTH, "max_new_tokens": MAX_NEW_TOKENS}  # fmt: skip
checkpoints = (outputs.folder / "checkpoints").resolve()  # orbax wants an absolute path
resumed_at = rl.checkpoint_run(checkpoints, settings, restart=RESUME == "restart")
rows = [{"prompts": chat_prompt(pairs.prompts[i]), "answer": answers[i]} for i in train_rows]
epochs = MAX_STEPS * BATCH_SIZE // len(rows) + 1  # enough for MAX_STEPS (grain cannot batch 1 of an endless repeat)
dataset = grain.MapDataset.source(rows).shuffle(seed=SEED).repeat(epochs).batch(BATCH_SIZE)
Role = rl_cluster_lib.Role
cluster_config = rl_cluster_lib.ClusterConfig(
    role_to_mesh={Role.ACTOR: mesh, Role.REFERENCE: mesh, Role.ROLLOUT: mesh}, rollout_engine="vanilla",
    training_config=rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=optax.adamw(optax.warmup_constant_schedule(0, LEARNING_RATE, max(1, MAX_STEPS // 20)), b2=0.99, weight_decay=0.1),
        eval_every_n_steps=10**9, max_steps=MAX_STEPS, checkpoint_root_directory=str(checkpoints),
        checkpointing_options=ocp.CheckpointManagerOptions(save_interval_steps=CHECKPOINT_EVERY, max_to_keep=2),
    ),
    rollout_config=base_rollout.RolloutConfig(
        max_tokens_to_generate=MAX_NEW_TOKENS, max_prompt_length=MAX_PROMPT_LENGTH, temperature=TEMPERATURE, top_p=1.0,
        top_k=None, kv_cache_size=MAX_PROMPT_LENGTH + MAX_NEW_TOKENS + 8, eos_tokens=EOS, seed=SEED,
    ),
)  # fmt: skip
cluster = rl_cluster_lib.RLCluster(actor=actor, reference=reference, tokenizer=tokenizer, cluster_config=cluster_config)
history = []  # one dict a step: each reward's mean, KL, completion length


def keep_metrics(buffer):  # Tunix hands over each step's metrics (and others: those without rewards are left out)
    step = {k: float(np.mean(v[0])) for k, v in buffer.metrics.items() if k.startswith(("rewards/", "completions/mean"))}
    if step:
        history.append(step)


cluster.with_external_metrics_logger(keep_metrics)
learner = grpo_learner.GRPOLearner(
    rl_cluster=cluster, reward_fns=rl.named_rewards(REWARDS),
    algo_config=grpo_learner.GRPOConfig(  # the KL estimate of the GRPO paper (Tunix's default is the plain log-ratio)
        num_generations=NUM_GENERATIONS, num_iterations=1, beta=BETA, epsilon=EPSILON, kl_loss_mode="low_var_kl"
    ),
)  # fmt: skip
start = time.perf_counter()
batches = rl.time_budget(iter(dataset), TIME_BUDGET * 60, resumed_at)
learner.train(batches)
steps = cluster.actor_trainer.train_steps
seconds = time.perf_counter() - start
print(f"steps {resumed_at} -> {steps} in {seconds:.0f} s" + (f" (TIME_BUDGET reached: {batches.stopped})" if batches.stopped else ""))  # fmt: skip

# %% [markdown]
# ## Evaluate (after) and plots
# The same held-out questions, greedy. Then each reward, the KL term and the completion length per step.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt

after = evaluate(actor, held_out_rows, show=3)
print({k: round(v, 3) for k, v in after.items() if k != "completions"})
kl = cluster.actor_trainer.metrics_logger.get_metric_history("actor", "kl", "train") if BETA else []
names = [f"rewards/{f.__name__}" for f in REWARDS]
figure, axes = plt.subplots(1, 3, figsize=(13, 3.5))
for name in names:
    axes[0].plot([h.get(name, np.nan) for h in history], label=name.split("/")[1])
axes[0].set(title="rewards per step", xlabel="step")
axes[0].legend(fontsize=7)
axes[1].plot(np.asarray(kl, float))
axes[1].set(title="KL to the reference", xlabel="step")
axes[2].plot([h.get("completions/mean_length", np.nan) for h in history])
axes[2].set(title="completion length (tokens)", xlabel="step")
figure.tight_layout()
figure.savefig(outputs.staging / "training.png", dpi=80)
plt.show()

first, last = history[: max(1, len(history) // 5)], history[-max(1, len(history) // 5) :]
reward_change = {n.split("/")[1]: [float(np.mean([h[n] for h in part if n in h])) for part in (first, last)] for n in names}
print("rewards, first fifth of the steps -> last fifth:", {k: f"{a:.2f} -> {b:.2f}" for k, (a, b) in reward_change.items()})
if sum(b - a for a, b in reward_change.values()) <= 0:  # GRPO learns only where a group's answers score apart
    print("WARNING: the rewards did not rise: few answers earned any. Start from a model that writes the format (SFT, notebook 10), raise TEMPERATURE or MAX_STEPS, or add a reward that some answers already earn.")  # fmt: skip

# %%
if not model_folder:  # from random weights in the smoke's 120 steps: the tags first, in the rollouts and greedy
    print(f"learning the format (the partial format reward up by 0.1 or more): {reward_change['format_partial'][1] - reward_change['format_partial'][0] >= 0.1}")  # fmt: skip
    print(f"greedy answers after GRPO: more of the format's parts than before, none empty: {after['format_parts'] > before['format_parts'] and not after['empty_share']}")  # fmt: skip

# %% [markdown]
# ## Save
# The trained model as Hugging Face safetensors (LoRA merged into the base weights), with `config.json` and
# `tokenizer.model`: Tunix's `params_safetensors.create_model_from_safe_tensors` loads it (and notebook 11 again
# as `MODEL`); with LoRA, the LoRA weights alone too. metrics.json says what trained, on what, and how it went.

# %%
def weights(model, kind=nnx.Param):
    return {".".join(map(str, p)): np.asarray(v.get_value() if hasattr(v, "get_value") else v) for p, v in nnx.to_flat_state(nnx.state(model, kind))}  # fmt: skip


if LORA_RANK and FAMILY == "gemma3":  # Tunix's own merge of the LoRA weights into the base's safetensors
    from tunix.models.gemma3 import params as gemma3_params

    gemma3_params.save_lora_merged_model_as_safetensors(model_folder, str(outputs.staging / "model"), actor, LORA_RANK, float(LORA_RANK))  # fmt: skip
else:  # every weight, any LoRA merged in (alpha / rank = 1): Tunix has no Gemma 2 LoRA merge
    gemma.save_gemma(FAMILY, weights(actor), sizes, tokenizer.serialized_model_proto(), outputs.staging / "model")
if LORA_RANK:  # the LoRA weights alone beside
    from safetensors.numpy import save_file

    save_file(weights(actor, nnx.LoRAParam), str(outputs.staging / "lora.safetensors"))
atomic.write_json(
    {"model": str(model_folder or "tiny"), "model_reason": model_reason, "tokenizer": f"{model_folder}/tokenizer.model" if model_folder else "learned from the data (SentencePiece BPE)",
     "data": source, "steps": steps, "resumed_at": resumed_at, "seconds": seconds, "mesh": [FSDP, TP],
     "before": {k: v for k, v in before.items() if k != "completions"}, "after": {k: v for k, v in after.items() if k != "completions"},
     "rewards_first_last": reward_change, "settings": settings, "chosen": chosen},
    outputs.staging / "metrics.json",
)  # fmt: skip
atomic.write_json({"prompts": [pairs.prompts[i] for i in held_out_rows], "answers": [answers[i] for i in held_out_rows], "before": before["completions"], "after": after["completions"]}, outputs.staging / "completions.json")  # fmt: skip
print("wrote model/ (safetensors, config.json, tokenizer.model), metrics.json, completions.json, training.png")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
