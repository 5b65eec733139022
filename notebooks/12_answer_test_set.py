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
# # Answer a test set: your fine-tuned Gemma on a competition's questions, internet off
#
# Config -> engine -> test set -> model -> prompts -> generate -> answers -> submission.
# The last step of the route 10 (SFT on a TPU) -> 11 (GRPO on a TPU) -> 12: the model those notebooks exported
# answers every question of a test file, as code competitions run a notebook (a GPU or a TPU, internet off), and
# `submission.csv` is written in the sample submission's form and order, or not at all.
#
# On Kaggle: attach the competition (its test file and `sample_submission.csv`) and the model: notebook 11's output
# (its `grpo-reasoning/model`), notebook 10's (`llm-finetune/transformers`, written with `EXPORT_TRANSFORMERS=True`),
# or a Kaggle Model. Pick a GPU (vLLM where installed, else Hugging Face transformers) or a TPU (Tunix's sampler on
# JAX), turn the internet off, and run. Nothing is downloaded.
#
# **This notebook is the program: edit it.** The chat turns, the generation loop of each engine and the answer
# extractor are plain code below; `nbkit` finds and checks the test file, the sample submission and the model folder,
# picks the engine, batches the prompts by length, and writes the outputs when the run ends.
#
# `papermill notebooks/12_answer_test_set.ipynb out/12.ipynb -p MODEL out/grpo-reasoning/model -p PROFILE full`

# %% tags=["parameters"]
MODEL: str = "auto"  # a model folder (10's transformers/, 11's model/) or an attached Models handle; "auto": see below
DATA_ROOT: str = "auto"  # a test CSV or JSONL file, or its folder (with sample_submission.csv); "auto": see below
ID_COLUMN: str = "id"  # the column (CSV) or key (JSONL) of the ids, as the submission names it
PROMPT_COLUMN: str = "auto"  # the column or key of the questions; "auto": "prompt", else "question"
ANSWER_COLUMN: str = "auto"  # the submission's answer column; "auto": the sample submission's other one, or "answer"
ENGINE: str = "auto"  # "vllm", "transformers" or "jax" (Tunix); "auto": see below
SYSTEM_PROMPT: str = "auto"  # instructions before each question; "auto": notebook 11's (its answer format); "": none
BATCH_SIZE: int = 32  # prompts generated at once (vLLM schedules within a batch: give it 256)
MAX_NEW_TOKENS: int = 256  # tokens an answer may have
TEMPERATURE: float = 0.0  # 0: greedy (the same answers every run); above 0: sampled, seeded by SEED
SEED: int = 42  # the sampling's seed, and the tiny stand-in model's weights
TIME_BUDGET: float = 480.0  # minutes of generation at most; past it the run stops and writes no submission
PROFILE: str = "auto"  # "full": the settings above; "smoke": answers of 16 tokens at most; "auto": smoke on a CPU
OUTPUT_DIR: str = "auto"  # submission.csv, completions.json, metrics.json; "auto": see below

# %% [markdown]
# `ENGINE="auto"`: Tunix's sampler on JAX on a TPU; vLLM where it is installed and a GPU is there; else Hugging Face
# transformers (the GPU, or the CPU) where torch is installed; else JAX. An engine named but not installed stops here.
# `DATA_ROOT="auto"`: the competition's `test.csv` or `test.jsonl` attached, else a generated sample in notebook 11's
# shape ("how many words: apple river stone", ids such as "007") with its `sample_submission.csv`.
# `MODEL="auto"`: the one model folder attached; in the smoke profile (a CPU's default) a tiny Gemma 3 with
# **random weights**, learned tokenizer and all, written in the form of 10's and 11's exports, so the notebook runs
# alone: its answers are noise. `OUTPUT_DIR="auto"`: on Kaggle the working folder itself (a code competition reads
# `/kaggle/working/submission.csv`), elsewhere the working folder's `answers/`.
#
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in a staging folder and
# replace the previous run's only when every answer is written), then the engine is chosen.

# %%
from nbkit import env, params, staging
from nbkit.errors import ParameterError, RunError
from nbkit.llm import answers, engines, rl

params.check_parameters(globals(), BATCH_SIZE=1, MAX_NEW_TOKENS=1, ENGINE=engines.ENGINES)
if not 0 <= TEMPERATURE <= 10:
    raise ParameterError(f"TEMPERATURE={TEMPERATURE}: give a number from 0 (greedy) to 10.")
if not 0 < TIME_BUDGET < 1e6:
    raise ParameterError(f"TIME_BUDGET={TIME_BUDGET}: give the minutes generation may take, a number above 0.")
environment = env.detect()
if OUTPUT_DIR == "auto" and environment.platform == "kaggle":
    OUTPUT_DIR = str(environment.working_dir)  # where a code competition looks for submission.csv
outputs = staging.start(OUTPUT_DIR, default="answers", data_root=DATA_ROOT)
print(outputs.describe())
ENGINE, DEVICE, engine_reason = engines.pick_engine(ENGINE)
print(engine_reason)
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and DEVICE == "cpu")
if SMOKE:
    print(params.override(globals(), "smoke profile", MAX_NEW_TOKENS=min(MAX_NEW_TOKENS, 16)))

# %% [markdown]
# ## The test set
# Every row is read and checked before any model loads: an id (each once) and a prompt that is not empty. The sample
# submission beside the test file gives the submission's columns and order, and must list exactly the test file's
# ids; ids stay text as the sample writes them ("007" is not 7).

# %%
test = answers.load_test(DATA_ROOT, ID_COLUMN, PROMPT_COLUMN, ANSWER_COLUMN)
print(test.describe())

# %% [markdown]
# ## The model
# A Hugging Face folder: `config.json`, the weights as safetensors, the tokenizer, and from this kit's exports the
# chat template (`tokenizer_config.json`) and the stop tokens (`generation_config.json`: the end of the text and of a
# turn). It is checked before it loads: LoRA weights alone (11's `lora.safetensors`, 10's `model.lora.h5`) are
# refused, naming the merged model beside them; 10's and 11's output folders stand for the model they hold.

# %%
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # its notes on a missing torch are not this notebook's
from transformers import AutoTokenizer

from nbkit.llm import export, gemma, model_sizes, planning

ELEVEN = "Think step by step inside <reasoning> </reasoning>, then give the answer inside <answer> </answer>."
SYSTEM = ELEVEN if SYSTEM_PROMPT == "auto" else SYSTEM_PROMPT
model_folder, model_reason = engines.find_model(MODEL, SMOKE)
RANDOM = model_folder is None
if RANDOM:  # the tokenizer learned from what it will read: the system prompt and the questions
    model_folder = engines.tiny_model(environment.working_dir / "answers-tiny-model", [SYSTEM, *test.prompts], SEED)
model = engines.check_model(model_folder, ENGINE)
print(model_reason)
print(model.describe())
if RANDOM:
    print("RANDOM WEIGHTS: the answers are noise. Attach a model (notebook 11's model/, 10's transformers/) as MODEL.")
tokenizer = AutoTokenizer.from_pretrained(model.folder)

# %% [markdown]
# ## Prompts
# Each question in the model's own chat turns (its chat template), after the system prompt: what 11 trained on. A
# folder without a chat template (an export of an older nbkit) gets Gemma's turns, with a warning; another model
# without one stops. The prompts are tokenized once, checked against the model's vocabulary and context, and batched
# by length, longest first: each batch pads its prompts to its longest, so sorted batches pad little.

# %%
if not tokenizer.chat_template:
    if not model.model_type.startswith("gemma"):
        raise ParameterError(
            f"{model.folder} has no chat template (tokenizer_config.json's chat_template, or chat_template.jinja) and "
            f"is no Gemma: copy the base model's tokenizer_config.json into it."
        )
    print(
        f"WARNING: {model.folder} has no chat template: Gemma's turns are used (notebook 11's). Export the model again "
        f"with this kit's notebook 10 or 11 to keep its template with it."
    )
    tokenizer.chat_template = export.CHAT_TEMPLATE


def chat(question):
    turns = [{"role": "system", "content": SYSTEM}] if SYSTEM else []
    turns.append({"role": "user", "content": question})
    return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)


texts = [chat(question) for question in test.prompts]
tokens = tokenizer(texts, add_special_tokens=False)["input_ids"]  # the template writes <bos> itself
answers.check_prompts(tokens, test.where, model.vocabulary, model.context, MAX_NEW_TOKENS)
lengths = [len(ids) for ids in tokens]
batches = answers.length_batches(lengths, BATCH_SIZE)
in_order = [list(range(i, min(i + BATCH_SIZE, len(lengths)))) for i in range(0, len(lengths), BATCH_SIZE)]
vocabulary = tokenizer.get_vocab()
STOP_IDS = sorted({*model.stop_ids, tokenizer.eos_token_id, vocabulary.get("<end_of_turn>")} - {None})
PAD = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else STOP_IDS[0]
print(f"the first prompt: {texts[0]!r}")
stops = tokenizer.convert_ids_to_tokens(STOP_IDS)
print(f"{len(texts)} prompts of {min(lengths)}-{max(lengths)} tokens; generation stops at {stops}")
print(
    f"{len(batches)} batches of up to {BATCH_SIZE}, longest first: padding is "
    f"{answers.padding_share(lengths, batches):.0%} of their prompt tokens "
    f"({answers.padding_share(lengths, in_order):.0%} in the file's order)"
)

# %% [markdown]
# ## Generate
# One function a batch per engine, each returning the completions' tokens before their first stop token. transformers
# pads on the left (every prompt ends where its answer starts); Tunix's sampler pads each batch's prompts to a power of
# two, and its last batch is filled up to the first's size (fewer shapes: fewer compiles); vLLM takes the token ids and
# schedules them itself. Greedy at `TEMPERATURE=0`; above it plain sampling (no top-k or top-p cut), seeded.
# `TIME_BUDGET` stops before the next batch would pass it (the mean batch so far as the measure): then no submission is
# written, since a partial one would score every missing answer as wrong.


# %%
def until_stop(ids):  # a completion's tokens before its first stop token
    stops = set(STOP_IDS)
    return next((ids[:at] for at, token in enumerate(ids) if token in stops), ids)


def load_transformers():
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    # bfloat16 where the GPU computes it (not a T4: float16 overflows in Gemma, float32 then), float32 on a CPU
    fast = DEVICE == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    llm = AutoModelForCausalLM.from_pretrained(model.folder, dtype=torch.bfloat16 if fast else torch.float32)
    llm = llm.to(DEVICE).eval()
    config = GenerationConfig(
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=TEMPERATURE > 0,
        temperature=TEMPERATURE or None,
        top_k=0,
        top_p=1.0,
        eos_token_id=STOP_IDS,
        pad_token_id=PAD,
    )
    torch.manual_seed(SEED)

    def generate(rows):
        longest = max(lengths[i] for i in rows)
        ids = [[PAD] * (longest - lengths[i]) + tokens[i] for i in rows]
        mask = [[0] * (longest - lengths[i]) + [1] * lengths[i] for i in rows]
        with torch.inference_mode():
            out = llm.generate(
                input_ids=torch.tensor(ids, device=DEVICE),
                attention_mask=torch.tensor(mask, device=DEVICE),
                generation_config=config,
            )
        return [until_stop(row) for row in out[:, longest:].tolist()]

    return generate


def load_jax():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from tunix.generate import sampler as sampler_lib
    from tunix.models.gemma import model as gemma2
    from tunix.models.gemma import params_safetensors as gemma2_safetensors
    from tunix.models.gemma3 import model as gemma3
    from tunix.models.gemma3 import params_safetensors

    sizes = gemma.gemma_config(model.folder)
    family, dtype = sizes.pop("family"), jnp.float32 if DEVICE == "cpu" else jnp.bfloat16
    if family == "gemma2":  # as notebook 11 builds it: Tunix's Gemma 2 config has no param_dtype
        config = gemma2.ModelConfig(
            **{**sizes, "attention_types": [gemma2.AttentionType[t] for t in sizes["attention_types"]]}
        )
        loader = gemma2_safetensors
    else:
        config, loader = gemma3.ModelConfig(**sizes, param_dtype=dtype), params_safetensors
    fsdp, tp = planning.pick_mesh(model_sizes.from_config(sizes), jax.device_count(), len(batches[0]), "auto")
    mesh = jax.make_mesh((fsdp, tp), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    llm = loader.create_model_from_safe_tensors(str(model.folder), config, mesh, dtype=dtype)
    bucket = 2 ** int(np.ceil(np.log2(max(lengths))))  # the longest batch's padded prompt
    cache = sampler_lib.CacheConfig(
        cache_size=bucket + MAX_NEW_TOKENS,
        num_layers=sizes["num_layers"],
        num_kv_heads=sizes["num_kv_heads"],
        head_dim=sizes["head_dim"],
    )
    sampler = sampler_lib.Sampler(llm, tokenizer, cache)  # it adds <bos> once, as the template wrote it
    seeds = iter(range(SEED, SEED + len(batches)))

    def generate(rows):
        filled = [texts[i] for i in rows] + [texts[rows[-1]]] * (len(batches[0]) - len(rows))
        with jax.set_mesh(mesh):
            out = sampler(
                filled,
                max_generation_steps=MAX_NEW_TOKENS,
                temperature=TEMPERATURE,
                top_p=1.0 if TEMPERATURE else None,  # no top_p: greedy
                eos_tokens=STOP_IDS,
                seed=next(seeds),
            )
        return [until_stop([int(t) for t in ids]) for ids in out.tokens[: len(rows)]]

    return generate


def load_vllm():
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(model.folder), seed=SEED, max_model_len=max(lengths) + MAX_NEW_TOKENS)
    sampling = SamplingParams(
        temperature=TEMPERATURE, top_p=1.0, max_tokens=MAX_NEW_TOKENS, stop_token_ids=STOP_IDS, seed=SEED
    )

    def generate(rows):
        out = llm.generate([{"prompt_token_ids": tokens[i]} for i in rows], sampling, use_tqdm=False)
        return [until_stop(list(o.outputs[0].token_ids)) for o in out]

    return generate


# %% tags=["nbval-ignore-output"]
import time

start = time.perf_counter()
generate = {"transformers": load_transformers, "jax": load_jax, "vllm": load_vllm}[ENGINE]()
load_seconds = time.perf_counter() - start
print(f"{ENGINE} loaded {model.folder} in {load_seconds:.1f} s")
completion_tokens = [None] * len(texts)
start, done = time.perf_counter(), 0
budget = rl.time_budget(iter(batches), TIME_BUDGET * 60)
for number, rows in enumerate(budget, 1):
    for row, ids in zip(rows, generate(rows)):
        completion_tokens[row] = ids
    done += len(rows)
    if number % max(1, len(batches) // 10) == 0 or number == len(batches):
        print(f"batch {number}/{len(batches)}: {done} of {len(texts)} answered in {time.perf_counter() - start:.1f} s")
seconds = time.perf_counter() - start
if budget.stopped:
    raise RunError(
        f"TIME_BUDGET={TIME_BUDGET:g} minutes reached ({budget.stopped}): {done} of {len(texts)} prompts answered. "
        f"No submission is written (every missing answer would score as wrong): raise TIME_BUDGET, lower "
        f"MAX_NEW_TOKENS, or pick a faster accelerator or engine."
    )
new_tokens = sum(map(len, completion_tokens))
print(f"{len(texts) / seconds:.1f} answers/s, {new_tokens / seconds:.0f} new tokens/s ({ENGINE} on {DEVICE})")

# %% [markdown]
# ## Answers
# The answer of each completion: notebook 11's `<answer>...</answer>`, else the whole completion, stripped. Edit
# `extract_answer` to the competition's form (a number, a letter).

# %% tags=["nbval-ignore-output"]
import re

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_answer(completion):
    found = ANSWER.search(completion)
    return (found.group(1) if found else completion).strip()


completions = [tokenizer.decode(ids) for ids in completion_tokens]
final = [extract_answer(c) for c in completions]
tagged = sum(bool(ANSWER.search(c)) for c in completions)
print(f"{tagged} of {len(completions)} completions hold <answer>...</answer>; {final.count('')} answers are empty")
for key, prompt, completion in list(zip(test.ids, test.prompts, completions))[:3]:
    print(f"  {key}: {prompt!r} -> {completion!r}")

# %% [markdown]
# ## Submit
# `submission.csv` in the sample submission's columns and order, read back and checked; `completions.json` (each id,
# prompt, raw completion and its length in tokens) and `metrics.json` (engine, model, speed) beside it. They
# replace an earlier run's only together.

# %%
import csv

from nbkit import atomic

written = test.write_submission(final, outputs.staging / "submission.csv")
with open(written, newline="", encoding="utf-8") as f:
    header, *rows = list(csv.reader(f))
key = header.index(test.id_column)
claims = {  # read back with the csv module, against the sample submission
    "submission.csv has the sample submission's columns": header == test.header,
    "it lists every id once, in the sample submission's order": [r[key] for r in rows] == [r[key] for r in test.rows],
    "each id's answer is its own question's": all(
        r[header.index(test.answer_column)] == final[test.ids.index(r[key])] for r in rows
    ),
}
for claim, held in claims.items():
    print(f"{claim}: {held}")
if not all(claims.values()):  # never published: a submission that scores other answers than these
    raise RunError(f"submission.csv read back is not what was answered: {claims}. Report this as an nbkit bug.")
records = [
    {"id": k, "prompt": p, "completion": c, "tokens": len(ids)}
    for k, p, c, ids in zip(test.ids, test.prompts, completions, completion_tokens)
]
atomic.write_json(records, outputs.staging / "completions.json")
metrics = {
    "engine": ENGINE,
    "device": DEVICE,
    "engine_reason": engine_reason,
    "model": str(model.folder),
    "model_reason": model_reason,
    "random_weights": RANDOM,
    "data": test.source,
    "count": len(texts),
    "load_seconds": load_seconds,
    "seconds": seconds,
    "answers_per_second": len(texts) / seconds,
    "new_tokens": new_tokens,
    "tokens_per_second": new_tokens / seconds,
    "tagged_answers": tagged,
    "padding_share": answers.padding_share(lengths, batches),
    "batch_size": BATCH_SIZE,
    "max_new_tokens": MAX_NEW_TOKENS,
    "temperature": TEMPERATURE,
    "seed": SEED,
    "system_prompt": SYSTEM,
}
atomic.write_json(metrics, outputs.staging / "metrics.json")
print(f"wrote submission.csv ({len(rows)} answers), completions.json, metrics.json")

# %% [markdown]
# Every answer is written: the outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
