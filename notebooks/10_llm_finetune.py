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
# # Fine-tune Gemma with LoRA on a TPU, sharded over the chips
#
# Config -> data -> memory plan -> tokenizer -> sharded model -> LoRA -> train -> evaluate -> save. A Gemma 3
# (or Gemma 4, or Gemma) model from KerasHub learns to answer prompts the way a file of prompt/response pairs does.
# Only small low-rank matrices beside the attention kernels train (LoRA); the model's own weights stay frozen
# in bfloat16. A memory plan, worked out from the preset's config before any weight is read, picks the layout:
# on a v5e-8 (15.75 GiB a chip) Gemma 3 1B and, at short sequences, 4B (7.2 GiB of weights) fit one chip and
# train data parallel; where the weights and a longer sequence's activations do not fit one chip, the model is
# split over the 8 chips along its hidden axis (model parallel), a split checked once the model is built.
#
# On Kaggle: attach the model (`keras/gemma3/keras/gemma3_instruct_1b`, "Add Input" -> Models, after
# accepting Gemma's license on the model's page) and your pairs (a CSV or JSONL file), pick a TPU. On a CPU
# with no model attached the same code trains a tiny Gemma 3, with a tokenizer learned from the data, on a
# generated sample whose answer is the prompt's words in reverse order: it proves the pipeline, not the model.
# Gemma 4 (`gemma4_instruct_2b`, `keras/gemma4/keras/gemma4_instruct_2b`): the same code, in Gemma 4's chat turns;
# `PRESET="tiny-gemma4"` trains a tiny one from scratch (it learns the sample's rule less readily than Gemma 3's).
# Its export to transformers (`EXPORT_TRANSFORMERS=True`, what notebook 11 reads) needs KerasHub 0.32 or later.
#
# **This notebook is the program: edit it.** The chat format, the tokenizer, `build_model`, the LoRA
# targets, the optimizer and the evaluation are plain code below; `nbkit` reads and checks the data, plans
# the memory, checks the sharding, and writes the outputs when the run ends.
#
# `papermill notebooks/10_llm_finetune.ipynb out/10.ipynb -p SIMULATE_DEVICES 8 -p MESH 2x4`

# %% tags=["parameters"]
PRESET: str = "gemma3_instruct_1b"  # a Gemma 3/4 preset or folder; "tiny", "tiny-gemma4", "tiny-gemma": from scratch
DATA_ROOT: str = "auto"  # a CSV or JSONL file of prompt/response pairs, or a folder of them; "auto": a generated sample
PROMPT_COLUMN: str = "prompt"  # the column (CSV) or key (JSONL) of the prompts
RESPONSE_COLUMN: str = "response"  # the column or key of the answers to learn
SEQUENCE_LENGTH: int = 256  # tokens per pair, chat turns included: longer pairs are cut (the share is printed)
LORA_RANK: int = 16  # the rank of the LoRA matrices: more is more capacity and more memory
EPOCHS: int = 0  # passes over the training pairs; 0: the model's choice, 1 for a preset, 40 for the tiny model
PER_REPLICA_BATCH: int = 0  # pairs per batch shard per step; 0: 1 for a preset, 16 pairs a step for the tiny model
LEARNING_RATE: float = 0.0  # the peak after warm-up; 0: the model's choice, 1e-4 for a preset, 1e-2 for the tiny model
HELD_OUT_SHARE: float = 0.1  # the share of pairs held out to score the loss and the generated answers on
MESH: str = "auto"  # "auto" (data parallel if it fits a chip, else model parallel), "data", or batch x model as "2x4"
EXPORT_TRANSFORMERS: bool = False  # also write the merged model as Hugging Face safetensors, where KerasHub can
PROFILE: str = "auto"  # "full": as above; "smoke": the tiny model when no preset is attached; "auto": smoke on a CPU
BACKEND: str = "jax"  # Keras backend: "jax" only (keras.distribution shards on JAX)
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N devices (8: like a TPU v5e-8; 0: no split)
SEED: int = 42  # fixes the split, the tiny model's weights, LoRA's initial weights and the order of the pairs
OUTPUT_DIR: str = "auto"  # LoRA weights, merged model and metrics.json; "auto": the working folder's llm-finetune/

# %% [markdown]
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in a staging folder
# and replace the previous run's only when the run ends well), then the accelerator is found.

# %%
import importlib.util

from nbkit import accel, atomic, params, staging
from nbkit.errors import ParameterError
from nbkit.llm import data, export, hf_folder, model_sizes, planning, sharding

params.check_parameters(globals(), EPOCHS=0, PER_REPLICA_BATCH=0, SEQUENCE_LENGTH=8, LORA_RANK=1, BACKEND=("jax",))
if not 0 < HELD_OUT_SHARE < 1:
    raise ParameterError(f"HELD_OUT_SHARE={HELD_OUT_SHARE}: a share between 0 and 1, such as 0.1.")
if not 0 <= LEARNING_RATE < float("inf"):  # NaN too
    raise ParameterError(
        f"LEARNING_RATE={LEARNING_RATE}: a peak rate above 0, such as 1e-4, or 0 for the model's choice."
    )
if EXPORT_TRANSFORMERS and importlib.util.find_spec("safetensors") is None:  # checked now, not after training
    raise ParameterError("EXPORT_TRANSFORMERS=True needs the safetensors package: `pip install safetensors`, or False.")
outputs = staging.start(OUTPUT_DIR, default="llm-finetune", data_root=DATA_ROOT)
print(outputs.describe())
acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES)
MESH_SHAPE = planning.parse_mesh(MESH, acc.num_replicas)  # None: the memory plan picks

# %% [markdown]
# ## Data
# Every pair is read and checked before anything loads: both columns on every row, both text, neither empty;
# pairs given more than once are counted. A share of the distinct prompts, drawn at random, is held out with
# every pair that asks it: the loss and the generated answers are scored on prompts never trained on.

# %%
import numpy as np

pairs = data.load_pairs(DATA_ROOT, PROMPT_COLUMN, RESPONSE_COLUMN)
print(pairs.describe())
train_rows, held_out_rows, split_line = data.split(pairs, HELD_OUT_SHARE, SEED)
print(split_line)

# %% [markdown]
# ## Configuration and memory plan
# A preset's `config.json` says how large the model is, before any weight is read: the plan adds up the
# bytes each chip holds (the frozen weights in bfloat16, split over the mesh's model axis; LoRA's weights,
# gradients and AdamW's moments in float32; an estimate of the activations) and stops when they do not fit.
# The smoke profile downloads nothing: with no preset attached it trains the tiny model.

# %%
import json

from nbkit.inputs import presets

SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")
TINY = dict(num_layers=2, num_query_heads=4, num_key_value_heads=1, hidden_dim=64, intermediate_dim=128, head_dim=32)
# Gemma 4's own parts, each in small: per-layer embeddings, global layers (every second) with a head size of their own
# and RoPE on a quarter of it, the last 2 layers (a sliding, a global) reusing the keys and values of the last ones of
# their kind with a double-wide MLP there, a final soft cap. (Tunix, which reads the export in notebook 11, needs the
# global head size unlike the width.)
TINY_GEMMA4 = dict(
    TINY, num_layers=4, global_head_dim=128, sliding_window_pattern=2, num_kv_shared_layers=2,
    use_double_wide_mlp=True, hidden_size_per_layer_input=8, global_rope_partial_rotary_factor=0.25,
    final_logit_soft_cap=30.0,
)  # fmt: skip
TINY_FAMILIES = {"tiny": "gemma3", "tiny-gemma": "gemma", "tiny-gemma4": "gemma4"}
preset_folder, preset_reason = None, f"PRESET={PRESET!r}"
if PRESET not in TINY_FAMILIES:
    preset_folder, preset_reason = presets.find_preset(PRESET, download=not SMOKE)
    if preset_folder is None and not SMOKE:
        raise ParameterError(
            f"No Gemma to fine-tune: {preset_reason} (accept Gemma's license on the model's page first)."
        )
if preset_folder:  # its config.json, read before any weight: the family, and the sizes the plan counts
    preset_config = json.loads(open(f"{preset_folder}/config.json").read())
    FAMILY, config = model_sizes.family(preset_config), preset_config["config"]
else:  # a tiny model of PRESET's family; the vocabulary's size is known once the tokenizer is learned: 200 at most
    FAMILY = TINY_FAMILIES.get(PRESET) or ("gemma4" if "gemma4" in PRESET else "gemma3")
    config = dict(TINY_GEMMA4 if FAMILY == "gemma4" else TINY, vocabulary_size=200)
    if FAMILY == "gemma3":
        config["use_query_key_norm"] = True  # Gemma 3's query and key norms
if EXPORT_TRANSFORMERS:  # said now, not after training
    hf_folder.check_keras_hub_export(FAMILY)
# The tiny model's base weights are random: LoRA must reach every kernel to teach it anything. A pretrained
# Gemma needs only KerasHub's default, the attention's query and value.
LORA_TARGETS = (
    ["query", "value"]
    if preset_folder
    else ["query", "key", "value", "attention_output", "ffw_gating", "ffw_gating_2", "ffw_linear"]
)
whose = "the preset's" if preset_folder else "the tiny model's"
defaults = {"EPOCHS": 1 if preset_folder else 40, "LEARNING_RATE": 1e-4 if preset_folder else 1e-2}
chosen = [f"{name}=0: {whose} {value:g}" for name, value in defaults.items() if not globals()[name]]  # said below
EPOCHS, LEARNING_RATE = EPOCHS or defaults["EPOCHS"], LEARNING_RATE or defaults["LEARNING_RATE"]
if SMOKE and SEQUENCE_LENGTH > 32:
    chosen.append(f"SEQUENCE_LENGTH={SEQUENCE_LENGTH} cut to 32 by the smoke profile")
    SEQUENCE_LENGTH = 32
import jax

DEVICE_KIND = jax.devices()[0].device_kind  # "TPU v5 lite" on a v5e; "cpu"
chip_gib = planning.CHIP_GIB.get(DEVICE_KIND)  # None: unknown, not checked
plan = planning.memory_plan(
    model_sizes.from_config(config),
    acc.num_replicas,
    MESH_SHAPE,
    PER_REPLICA_BATCH or 1,
    SEQUENCE_LENGTH,
    LORA_RANK,
    LORA_TARGETS,
    2,
    chip_gib,
)
print(plan.describe())
if not plan.fits:
    raise ParameterError(plan.describe())
BATCH_AXIS, MODEL_AXIS = plan.mesh
if not PER_REPLICA_BATCH:
    PER_REPLICA_BATCH = 1 if preset_folder else max(1, 16 // BATCH_AXIS)
    chosen.append(f"PER_REPLICA_BATCH=0: {whose} {PER_REPLICA_BATCH}")
GLOBAL_BATCH = PER_REPLICA_BATCH * BATCH_AXIS
tiny = f"a tiny {dict(gemma='Gemma', gemma3='Gemma 3', gemma4='Gemma 4')[FAMILY]} from scratch"
# What trains, and why: metrics.json says it too (a tiny model's scores say nothing of Gemma's).
why = f"{preset_reason}; PROFILE={PROFILE!r} on a {acc.kind}: {'smoke' if SMOKE else 'full'}"
TRAINED = {"model": str(preset_folder or tiny), "why": why, **({} if preset_folder else config)}
print(f"model: {preset_folder or tiny} ({preset_reason})")
print(
    f"{'smoke' if SMOKE else 'full'}: {EPOCHS} epochs, {SEQUENCE_LENGTH} tokens, global batch {GLOBAL_BATCH}, "
    f"peak lr {LEARNING_RATE:g}, LoRA rank {LORA_RANK} on {', '.join(LORA_TARGETS)}"
    + (f" ({'; '.join(chosen)})" if chosen else "")
)

# %% [markdown]
# ## Chat format and tokenizer
# Gemma's instruction-tuned models were trained on chat turns: the prompt in a user turn, the answer in a
# model turn, each closed by `<end_of_turn>` (Gemma 4: `<|turn>user` ... `<turn|>`). The preprocessor puts `<bos>`
# first and gives the prompt's tokens zero weight in the loss: the model learns to answer, not to ask. The tiny
# model learns a BPE vocabulary from the training pairs (SentencePiece, in memory), with Gemma's special tokens in it.

# %%
import io

import keras
import keras_hub
import sentencepiece

# The markers that open and close a turn: Gemma 4's, or Gemma's, Gemma 2's and Gemma 3's.
START, END = ("<|turn>", "<turn|>") if FAMILY == "gemma4" else ("<start_of_turn>", "<end_of_turn>")


def chat_prompt(prompt):
    return f"{START}user\n{prompt}{END}\n{START}model\n"


def chat_response(response):
    return f"{response}{END}"


# The turn markers, and the image markers KerasHub's Gemma 3 tokenizer looks up, each kept one piece (Gemma 4's
# tokenizer is told the vocabulary has no image or video markers).
IMAGES = ["<start_of_image>", "<end_of_image>", "<img>"] if FAMILY != "gemma4" else []
TURNS_AND_IMAGES = [START, END, *IMAGES, "\n"]


def build_preprocessor():
    if preset_folder:
        return keras_hub.models.CausalLMPreprocessor.from_preset(preset_folder, sequence_length=SEQUENCE_LENGTH)
    # BPE with Gemma's special tokens as symbols: a WORD model would keep "river<end_of_turn>" one (unknown) piece.
    # `gemma_pieces` gives Gemma's special pieces and ids, so that Hugging Face reads the export alike. Not Gemma's
    # byte fallback: 256 pieces the data never uses, whose random rows the tiny model's LoRA cannot train (GRPO
    # from this model in notebook 11 then raised no reward).
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([chat_prompt(pairs.prompts[i]) + chat_response(pairs.responses[i]) for i in train_rows]),
        model_writer=model,
        model_type="BPE",
        vocab_size=config["vocabulary_size"],
        hard_vocab_limit=False,
        minloglevel=2,
        **export.gemma_pieces(TURNS_AND_IMAGES),
    )
    if FAMILY == "gemma4":
        tokenizer = keras_hub.models.Gemma4Tokenizer(model.getvalue(), has_vision_tokens=False, has_video_tokens=False)
        return keras_hub.models.Gemma4CausalLMPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)
    # Gemma 3's for the tiny Gemma too: Gemma's takes no prompt/response pairs, so it cannot keep the prompt out of
    # the loss (the ids are the same: one SentencePiece model).
    tokenizer = keras_hub.models.Gemma3Tokenizer(proto=model.getvalue())
    return keras_hub.models.Gemma3CausalLMPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)


preprocessor = build_preprocessor()
tokenizer = preprocessor.tokenizer
if not preset_folder:
    config["vocabulary_size"] = tokenizer.vocabulary_size()
TRAINED["tokenizer"] = (
    "the preset's" if preset_folder else f"{tokenizer.vocabulary_size()} BPE pieces learned from the training pairs"
)
print(f"vocabulary of {tokenizer.vocabulary_size():,} tokens")
# How many pairs SEQUENCE_LENGTH cuts (+1: <bos>): raise it if many are.
prompt_tokens = np.array([len(t) + 1 for t in tokenizer([chat_prompt(p) for p in pairs.prompts])])
pair_tokens = prompt_tokens + [len(t) for t in tokenizer([chat_response(r) for r in pairs.responses])]
cut = data.check_lengths(prompt_tokens, pair_tokens, SEQUENCE_LENGTH, pairs)
print(f"{cut:.1%} of the pairs are longer than {SEQUENCE_LENGTH} tokens and get cut")

# %% [markdown]
# ## Tokenize once
# Every pair is tokenized once on the host and kept as arrays: `token_ids`, `padding_mask`, the labels
# (the tokens shifted by one) and the loss weights (0 on the prompt and the padding). Each epoch then
# shuffles and batches those arrays (tf.data), so the chips never wait for the tokenizer.

# %%
import tensorflow as tf

from nbkit.errors import DataError


def tokenize(rows):
    found = [
        preprocessor({
            "prompts": [chat_prompt(pairs.prompts[i]) for i in rows[s : s + 256]],
            "responses": [chat_response(pairs.responses[i]) for i in rows[s : s + 256]],
        })
        for s in range(0, len(rows), 256)
    ]
    x = {name: np.concatenate([np.asarray(f[0][name]) for f in found]) for name in found[0][0]}
    return x, np.concatenate([np.asarray(f[1]) for f in found]), np.concatenate([np.asarray(f[2]) for f in found])


def get_dataset(x, y, weights):
    """Batches of (features, labels, loss weights), shuffled anew each epoch, without end."""
    dataset = tf.data.Dataset.from_tensor_slices((x, y, weights)).shuffle(len(y), seed=SEED).repeat()
    return dataset.batch(GLOBAL_BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


steps_per_epoch = len(train_rows) // GLOBAL_BATCH
if steps_per_epoch == 0 or len(held_out_rows) < BATCH_AXIS:
    raise DataError(
        f"{len(train_rows)} training and {len(held_out_rows)} held-out pairs for a global batch of {GLOBAL_BATCH} on "
        f"a batch axis of {BATCH_AXIS}: give more pairs, or a smaller PER_REPLICA_BATCH or batch axis (MESH)."
    )
train_x, train_y, train_weights = tokenize(train_rows)
held_x, held_y, held_weights = tokenize(held_out_rows)
print(
    f"{steps_per_epoch} steps per epoch; {int(train_weights.sum()):,} answer tokens carry the loss of "
    f"{train_x['padding_mask'].sum():,}"
)

# %% [markdown]
# ## Sharding
# A mesh of the devices, `batch` x `model`: each batch shard is one replica of the data, and the model's
# hidden axis is split over the `model` axis. nbkit's layout rules say where each kernel goes (the LoRA
# kernels too); Keras places every weight as it is created. With `MESH="data"` the model axis has one
# device: every chip holds the whole model.

# %%
mesh = keras.distribution.DeviceMesh((BATCH_AXIS, MODEL_AXIS), ("batch", "model"), keras.distribution.list_devices())
layout_rules = sharding.layout_rules(LORA_TARGETS, config)
keras.distribution.set_distribution(
    keras.distribution.ModelParallel(layout_map=sharding.layout_map(mesh, layout_rules), batch_dim_name="batch")
)
print(f"mesh {BATCH_AXIS} (batch) x {MODEL_AXIS} (model) over {acc.num_replicas} devices")

# %% [markdown]
# ## Model and LoRA
# The preset's weights in `bfloat16` on a TPU (`mixed_bfloat16` would keep them in float32: twice the
# memory); float32 on a CPU, which is slow in bfloat16. `enable_lora` freezes every weight and adds two
# rank-`LORA_RANK` matrices beside each target kernel: only those train. The sharding is then checked
# against the plan: a rule that placed nothing, or a large kernel no rule placed, stops here.

# %%
DTYPE = "bfloat16" if acc.kind == "tpu" else "float32"


def build_model():
    if preset_folder:
        # The family's own class: KerasHub 0.32's CausalLM.from_preset picks Gemma4CausalLM or Gemma4AssistantCausalLM
        # for a Gemma 4, as a set's order falls in that process (the assistant then fails to build).
        causal_lm_class = {"gemma4": keras_hub.models.Gemma4CausalLM, "gemma3": keras_hub.models.Gemma3CausalLM}
        return causal_lm_class.get(FAMILY, keras_hub.models.GemmaCausalLM).from_preset(
            preset_folder, dtype=DTYPE, preprocessor=None
        )
    if FAMILY == "gemma4":  # text only; Gemma 4's four norms a layer, query/key norms and windows are built in
        backbone = keras_hub.models.Gemma4Backbone(**config, image_size=896, vision_encoder=None, dtype=DTYPE)
        return keras_hub.models.Gemma4CausalLM(backbone=backbone, preprocessor=None)
    if FAMILY == "gemma3":  # with Gemma 3's post-attention and post-MLP norms and sliding windows, as Tunix's (11)
        backbone = keras_hub.models.Gemma3Backbone(
            **config, image_size=896, vision_encoder=None, dtype=DTYPE, use_post_ffw_norm=True,
            use_post_attention_norm=True, use_sliding_window_attention=True, sliding_window_size=512,
        )
        return keras_hub.models.Gemma3CausalLM(backbone=backbone, preprocessor=None)
    backbone = keras_hub.models.GemmaBackbone(**config, dtype=DTYPE)
    return keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)


keras.utils.set_random_seed(SEED)  # the same tiny model and LoRA weights on every run
causal_lm = build_model()
causal_lm.backbone.enable_lora(LORA_RANK, LORA_TARGETS)
# A preset's vision and audio encoders stay whole on every chip, frozen, as the memory plan counts them.
encoders = [getattr(causal_lm.backbone, name, None) for name in ("vision_encoder", "audio_encoder")]
whole = [weight for encoder in encoders if encoder is not None for weight in encoder.weights]
for line in sharding.check_sharding(
    causal_lm.backbone.weights, layout_rules, config["hidden_dim"], dict(zip(mesh.axis_names, mesh.shape)), whole
):
    print(line)
trainable = sum(int(np.prod(w.shape)) for w in causal_lm.trainable_weights)
print(f"{causal_lm.count_params():,} parameters, {trainable:,} of them trainable (LoRA's)")

# %% [markdown]
# ## Optimizer and schedule
# AdamW, with no weight decay on norms and biases, under a linear warm-up over the first tenth of the steps
# and a cosine decay to zero. The loss is the cross-entropy of the next token, weighted: zero on the prompt.

# %%


def learning_rate_schedule(total_steps):
    warmup_steps = max(1, total_steps // 10)
    return keras.optimizers.schedules.CosineDecay(
        0.0, total_steps - warmup_steps, warmup_target=LEARNING_RATE, warmup_steps=warmup_steps
    )


optimizer = keras.optimizers.AdamW(learning_rate_schedule(EPOCHS * steps_per_epoch), weight_decay=0.01)
optimizer.exclude_from_weight_decay(var_names=["bias", "scale"])
causal_lm.compile(
    optimizer=optimizer,
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
    sampler="greedy",  # generate(): the likeliest next token each time (Gemma's default, said here)
    # Several steps per compiled call (fewer host round-trips): the most, up to 16, that divide an epoch.
    steps_per_execution=max(n for n in range(1, 17) if steps_per_epoch % n == 0),
)

# %% [markdown]
# ## Train
# The callback counts the tokens each epoch trained on, the real ones (the padding mask's: padding up to
# SEQUENCE_LENGTH is not work done), and prints tokens/s and the model FLOPs utilisation: about 4 x parameters
# FLOPs a token (forward 2, backward through the activations 2; the frozen weights get no gradient), against
# the chips' bfloat16 peak (v5e: 197 TFLOP/s a chip; a CPU's is unknown).

# %%
import time

PEAK_TFLOPS = {"TPU v5 lite": 197, "TPU v6 lite": 918, "TPU v4": 275}.get(DEVICE_KIND)
TOKENS_PER_PAIR = float(train_x["padding_mask"].sum()) / len(train_x["padding_mask"])  # the training pairs' mean


class Throughput(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self.start
        self.tokens = steps_per_epoch * GLOBAL_BATCH * TOKENS_PER_PAIR  # real tokens, padding left out
        self.tokens_per_second = self.tokens / seconds
        flops = 4 * causal_lm.count_params() * self.tokens_per_second
        mfu = (
            f"{flops / (PEAK_TFLOPS * 1e12 * acc.num_replicas):.1%}"
            if PEAK_TFLOPS
            else "unknown (no peak known for this chip)"
        )
        if epoch % max(1, EPOCHS // 4) == 0 or epoch + 1 == EPOCHS:
            print(
                f"epoch {epoch + 1}: {self.tokens_per_second:,.0f} tokens/s (padding not counted), "
                f"model FLOPs utilisation {mfu}"
            )


# %% tags=["nbval-ignore-output"]
throughput = Throughput()
history = causal_lm.fit(
    get_dataset(train_x, train_y, train_weights), epochs=EPOCHS, steps_per_epoch=steps_per_epoch,
    callbacks=[throughput], verbose=2 if not SMOKE else 0,
)
print(f"training loss {history.history['loss'][0]:.3f} -> {history.history['loss'][-1]:.3f}")

# %% [markdown]
# ## Evaluate
# The held-out pairs' loss, then greedy answers to their prompts. `generate` splits its batch over the mesh's
# batch axis, so the prompts are padded to a multiple of it. An answer scores when it is exactly the response.

# %% tags=["nbval-ignore-output"]
whole = len(held_y) - len(held_y) % BATCH_AXIS  # evaluate() splits each batch over the mesh's batch axis
held_out_loss = causal_lm.evaluate(
    {name: v[:whole] for name, v in held_x.items()}, held_y[:whole], sample_weight=held_weights[:whole],
    batch_size=BATCH_AXIS, verbose=0,
)[0]
causal_lm.preprocessor = preprocessor  # generate() takes text
prompts = [chat_prompt(pairs.prompts[i]) for i in held_out_rows]
padded = prompts + [prompts[0]] * (-len(prompts) % BATCH_AXIS)
generated = causal_lm.generate(padded, max_length=SEQUENCE_LENGTH, stop_token_ids=[tokenizer.token_to_id(END)])
answers = [g.removeprefix(p).split(END)[0].strip() for g, p in zip(generated, prompts)]
exact = float(np.mean([a == pairs.responses[i].strip() for a, i in zip(answers, held_out_rows)]))
for answer, i in list(zip(answers, held_out_rows))[:3]:
    print(f"{pairs.prompts[i]!r} -> {answer!r} (expected {pairs.responses[i]!r})")
print(f"held-out loss {held_out_loss:.3f}, exact match {exact:.3f} on {len(prompts)} prompts")

# %%
if pairs.sample:  # the generated sample's rule; other data has its own
    print(f"learned the sample's rule (exact match at least 0.8): {exact >= 0.8}")

# %% [markdown]
# ## Save
# The LoRA weights alone (small: load them onto the same base model with `load_lora_weights`), and the
# merged model as a KerasHub preset folder (Keras saves each kernel with its LoRA update added), which the family's
# class loads with no LoRA code (`keras_hub.models.Gemma3CausalLM.from_preset`, `Gemma4CausalLM`'s). Optionally
# Hugging Face safetensors.

# %%
import shutil

causal_lm.backbone.save_lora_weights(str(outputs.staging / "model.lora.h5"))
causal_lm.save_to_preset(str(outputs.staging / "merged-preset"))
exported = "not asked (EXPORT_TRANSFORMERS=False)"
if EXPORT_TRANSFORMERS:
    try:
        # From the merged preset: KerasHub's exporter writes a LoRA model's frozen kernels without the LoRA update.
        merged = type(causal_lm).from_preset(str(outputs.staging / "merged-preset"))  # the class that trained
        merged.export_to_transformers(str(outputs.staging / "transformers"))
        # What KerasHub's export gets wrong or leaves out (token ids, stop tokens, chat template; 0.31.1: Gemma 3's
        # global RoPE factor; 0.32: Gemma 4's RoPE, K=V, architecture and weight names) written as trained, then the
        # folder read back as transformers reads it.
        corrections = export.write_for_transformers(
            outputs.staging / "transformers",
            tokenizer.proto,
            export.keras_hub_rope(merged.backbone) if FAMILY == "gemma3" else None,
            made_by=f"KerasHub {keras_hub.__version__}",
        )
        for correction in corrections:
            print(correction)
        shown = train_rows[:8]
        checked = export.check_for_transformers(
            outputs.staging / "transformers",
            [chat_prompt(pairs.prompts[i]) + chat_response(pairs.responses[i]) for i in shown],
            [([{"role": "user", "content": pairs.prompts[i]}], "<bos>" + chat_prompt(pairs.prompts[i])) for i in shown],
        )
        exported = f"transformers/ (checked: {checked})"
    except Exception as error:  # KerasHub exports some architectures only, and needs safetensors
        shutil.rmtree(outputs.staging / "transformers", ignore_errors=True)  # no half-written folder
        exported = f"not written ({type(error).__name__}: {error})"
atomic.write_json(
    {"held_out_loss": held_out_loss, "exact_match": exact, "training_loss": history.history["loss"][-1],
     "tokens_per_second": throughput.tokens_per_second, "epochs": EPOCHS, "learning_rate": LEARNING_RATE,
     "global_batch": GLOBAL_BATCH, "mesh": list(plan.mesh), "lora_rank": LORA_RANK, "lora_targets": LORA_TARGETS,
     "sequence_length": SEQUENCE_LENGTH, "share_cut": cut, "model": TRAINED, "dtype": DTYPE,
     "transformers_export": exported, "tokens_per_second_counts": "real tokens (the padding mask), padding left out"},
    outputs.staging / "metrics.json",
)
print(f"wrote model.lora.h5, merged-preset/, metrics.json; Hugging Face safetensors: {exported}")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
