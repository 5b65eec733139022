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
# # Text classifier on TPU: Kaggle's "Contradictory, My Dear Watson", or any CSV of texts
#
# Config -> data -> tokenizer -> model -> train -> evaluate -> submit. The worked example is the
# sentence-pair competition "Contradictory, My Dear Watson": does a hypothesis follow from a premise
# (0 entailment), say something else (1 neutral) or contradict it (2), in 15 languages; scored on
# accuracy. The model is a multilingual BERT from KerasHub, fine-tuned with Keras 3 on JAX, which is
# what runs on Kaggle's TPU VMs (Hugging Face's TensorFlow models are gone from transformers 5).
#
# On Kaggle: attach the competition and the model (`keras/bert/keras/bert_base_multi`, "Add Input" ->
# Models) and pick a TPU. On a CPU with no model attached the same code trains a tiny BERT, with a
# vocabulary made from the data, on a small generated sample in the competition's form: it proves the
# pipeline, not the model. For another text competition, point `DATA_ROOT` at its CSV files and name
# its columns.
#
# **This notebook is the program: edit it.** The tokenizer, `get_dataset`, `build_model`, the
# learning-rate schedule and the validation split are plain code in the cells below; `nbkit` finds the
# accelerator, the data and the model's files, checks them, and writes the outputs when the run ends.
#
# `papermill notebooks/08_text_classifier.ipynb out/08.ipynb -p BACKEND jax -p SIMULATE_DEVICES 8`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder of train.csv, test.csv and sample_submission.csv; "auto": Watson's, else a sample
ID_COLUMN: str = "id"  # the id column of the three files
TEXT_COLUMNS: str = "premise,hypothesis"  # one text column, or two (a pair) separated by a comma
LABEL_COLUMN: str = "label"  # train.csv's labels: the classes are its values
LANGUAGE_COLUMN: str = "language"  # scores per language, split stratified by it; none if "" or not in the data (said)
METRIC: str = "accuracy"  # "accuracy", "f1_macro" or "roc_auc" (two classes: the second's probability, which it names)
PRESET: str = "bert_base_multi"  # KerasHub preset (attached or kagglehub), its folder, or "tiny" (a BERT from scratch)
SEQUENCE_LENGTH: int = 128  # tokens per example (a pair's shared), longer cut; at most the preset's max (smoke: 32)
EPOCHS: int = 0  # training epochs; 0: the model's choice, 3 to fine-tune a preset, 10 for the tiny BERT
PER_REPLICA_BATCH: int = 16  # examples per replica per step (the global batch is this times the replicas)
LEARNING_RATE: float = 0.0  # the peak after warm-up; 0: the model's choice, 2e-5 for a preset, 2e-3 for the tiny BERT
VALIDATION_SHARE: float = 0.2  # the share of train.csv held out to score on (stratified by label and language)
SEED: int = 42  # fixes the split, the initial weights of the head and the order of the training examples
PROFILE: str = "auto"  # "full": as above; "smoke": 32 tokens, tiny BERT if no preset attached; "auto": smoke on a CPU
BACKEND: str = "jax"  # "jax" (best for KerasHub and TPU VMs), "tensorflow", "auto" (TensorFlow if it sees the chip)
PRECISION: str = "auto"  # "auto" (bfloat16 on TPUs and recent GPUs), "float32", "mixed_bfloat16" or "mixed_float16"
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8, best with jax; 0: no split)
STEPS_PER_EXECUTION: int = 16  # training steps per compiled call (fewer host round-trips)
COMPILE_CACHE: str = "auto"  # JAX compile cache for the next run: "auto": OUTPUT_DIR/compile-cache, "none" or a folder
OUTPUT_DIR: str = "auto"  # plots, model, metrics.json and submission.csv; "auto": the working folder's text-classifier/

# %% [markdown]
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in its
# staging folder and replace the previous run's only when the run ends well), then the accelerator
# is found, before anything imports Keras.

# %%
from nbkit import accel, atomic, params, staging
from nbkit.accel import cache
from nbkit.errors import DataError, ParameterError

params.check_parameters(
    globals(), EPOCHS=0, PER_REPLICA_BATCH=1, SEQUENCE_LENGTH=8, STEPS_PER_EXECUTION=1,
    METRIC=("accuracy", "f1_macro", "roc_auc"),
)
TEXTS = [name.strip() for name in TEXT_COLUMNS.split(",")]
if not 1 <= len(TEXTS) <= 2 or not all(TEXTS):
    raise ParameterError(f"TEXT_COLUMNS={TEXT_COLUMNS!r}: name one text column, or two separated by a comma.")
if not 0 < VALIDATION_SHARE < 1:
    raise ParameterError(f"VALIDATION_SHARE={VALIDATION_SHARE}: a share between 0 and 1, such as 0.2.")
if not 0 <= LEARNING_RATE < float("inf"):  # NaN too
    raise ParameterError(
        f"LEARNING_RATE={LEARNING_RATE}: a peak rate above 0, such as 2e-5, or 0 for the model's choice."
    )
outputs = staging.start(OUTPUT_DIR, default="text-classifier", data_root=DATA_ROOT)  # never inside DATA_ROOT
print(outputs.describe())

acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES, precision=PRECISION)
compile_cache = cache.use(outputs.folder / "compile-cache" if COMPILE_CACHE == "auto" else COMPILE_CACHE, acc)
print(compile_cache.describe())

# %% [markdown]
# ## Data
# Every row of the three files is read and checked before anything is trained: the columns, the ids
# (each once, and the test's those of the sample submission), no empty text in train.csv, the labels.
# The classes are train.csv's label values (`1` and `1.0` are one). The lines under the counts say
# what the checks let through: an empty test text, a sample with other columns or another id column.

# %%
from nbkit.inputs import presets
from nbkit.text import competition

data = competition.load_data(DATA_ROOT, ID_COLUMN, TEXTS, LABEL_COLUMN, LANGUAGE_COLUMN)
print(data.describe())
competition.check_metric(METRIC, len(data.classes))
languages = data.train.languages  # None when the data has no such column

# %% [markdown]
# ## Configuration
# The full profile fine-tunes the pretrained preset for a few epochs at a small learning rate. A CPU
# cannot, in reasonable time: the smoke profile uses a preset only where one is attached (it downloads
# none) and cuts the texts to 32 tokens; with no preset it trains a tiny BERT from scratch, which
# takes more epochs and larger steps. `EPOCHS` and `LEARNING_RATE` left at 0 are the model's choice;
# a value you give is used as it is. A preset's BERT has positions for so many tokens
# (`max_sequence_length`): a longer `SEQUENCE_LENGTH` stops here, before anything is built.

# %%
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")
if PRESET == "tiny":
    preset_folder, preset_reason = None, "PRESET='tiny'"
else:
    preset_folder, preset_reason = presets.find_preset(PRESET, download=not SMOKE)
    if preset_folder is None and not SMOKE:
        raise DataError(f"No pretrained model to fine-tune: {preset_reason}.")
chosen, whose = [], "the preset's" if preset_folder else "the tiny BERT's"  # values not as given, said below
if EPOCHS == 0:
    EPOCHS = 3 if preset_folder else 10
    chosen.append(f"EPOCHS=0: {whose} {EPOCHS}")
if LEARNING_RATE == 0:
    LEARNING_RATE = 2e-5 if preset_folder else 2e-3
    chosen.append(f"LEARNING_RATE=0: {whose} {LEARNING_RATE:g}")
if SMOKE and SEQUENCE_LENGTH > 32:
    chosen.append(f"SEQUENCE_LENGTH={SEQUENCE_LENGTH} cut to 32 by the smoke profile")
    SEQUENCE_LENGTH = 32
presets.check_sequence_length(preset_folder, SEQUENCE_LENGTH)
print(f"model: {preset_folder or 'a tiny BERT from scratch'} ({preset_reason})")
GLOBAL_BATCH = PER_REPLICA_BATCH * acc.num_replicas
print(
    f"{'smoke' if SMOKE else 'full'}: {EPOCHS} epochs, {SEQUENCE_LENGTH} tokens, global batch {GLOBAL_BATCH}, "
    f"peak lr {LEARNING_RATE:g}" + (f" ({'; '.join(chosen)})" if chosen else "")
)

# %% [markdown]
# ## Validation split
# A share of train.csv, drawn within each (label, language) group, so the validation set has the
# training set's mix of both: a score per language then means something.

# %%
import numpy as np


def validation_rows(labels, groups, share, seed):
    """A boolean mask: about `share` of the rows of each (label, group) pair, drawn at random."""
    rng = np.random.default_rng(seed)
    strata = [f"{label}|{group}" for label, group in zip(labels, groups)]
    chosen = np.zeros(len(strata), bool)
    for stratum in sorted(set(strata)):
        rows = rng.permutation([i for i, s in enumerate(strata) if s == stratum])
        chosen[rows[: int(round(len(rows) * share))]] = True
    return chosen


is_val = validation_rows(data.train.labels, languages or [""] * data.train.count, VALIDATION_SHARE, SEED)
train_rows, val_rows = np.flatnonzero(~is_val), np.flatnonzero(is_val)
print(f"{len(train_rows)} training and {len(val_rows)} validation rows")

# %% [markdown]
# ## Tokenizer
# The preset's own tokenizer (BERT's is WordPiece, multilingual). The tiny BERT gets a WordPiece vocabulary
# learned from the training texts. The preprocessor joins a pair as `[CLS] first [SEP] second [SEP]`
# with segment ids 0 and 1 and cuts the longer text first when the pair has more than
# `SEQUENCE_LENGTH` tokens.

# %%
import keras
import keras_hub
import tensorflow as tf

AUTO = tf.data.AUTOTUNE


def build_preprocessor():
    if preset_folder:
        return keras_hub.models.TextClassifierPreprocessor.from_preset(preset_folder, sequence_length=SEQUENCE_LENGTH)
    texts = tf.data.Dataset.from_tensor_slices([t for column in data.train.texts for t in np.array(column)[train_rows]])
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        texts.batch(1000), vocabulary_size=2000, reserved_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)
    return keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=SEQUENCE_LENGTH)


preprocessor = build_preprocessor()
tokenizer = preprocessor.tokenizer
print(f"vocabulary of {tokenizer.vocabulary_size():,} tokens")

# How many training examples the sequence length cuts: raise SEQUENCE_LENGTH if many are.
lengths = sum(
    np.array([len(ids) for ids in tokenizer(list(np.array(column)[train_rows]))]) for column in data.train.texts
)
cut = np.mean(lengths + len(TEXTS) + 1 > SEQUENCE_LENGTH)  # + [CLS] and a [SEP] after each text
print(f"{cut:.1%} of the training examples are longer than {SEQUENCE_LENGTH} tokens and get cut")

# %% [markdown]
# ## Input pipeline
# Every text is tokenized once on the host (tf.data) and kept; each epoch then shuffles and batches
# the token ids, so the accelerator never waits for the tokenizer.

# %%


def tokenize(split, rows):
    """The preprocessor's features (token_ids, segment_ids, padding_mask) of `rows` of a split, as arrays."""
    texts = tuple(np.array(column, object)[rows] for column in split.texts)
    # x= names the texts: a tuple passed alone would be read as (texts, labels), the second text dropped.
    batches = tf.data.Dataset.from_tensor_slices(texts).batch(1024).map(
        lambda *t: preprocessor(x=t), num_parallel_calls=AUTO
    )
    found = list(batches.as_numpy_iterator())
    return {name: np.concatenate([b[name] for b in found]) for name in found[0]}


def get_dataset(features, labels, training=False):
    """Training: batches of (features, label), shuffled anew each epoch. Otherwise every (features, label or id),
    in order."""
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    if not training:
        return dataset
    return dataset.shuffle(len(labels), seed=SEED).repeat().batch(GLOBAL_BATCH, drop_remainder=True).prefetch(AUTO)


train_features = tokenize(data.train, train_rows)
val_features = tokenize(data.train, val_rows)
train_labels, val_labels = data.train.labels[train_rows], data.train.labels[val_rows]
steps_per_epoch = len(train_rows) // GLOBAL_BATCH
if steps_per_epoch == 0 or len(val_rows) < GLOBAL_BATCH:
    raise DataError(
        f"{len(train_rows)} training and {len(val_rows)} validation rows for a global batch of {GLOBAL_BATCH}: "
        "each needs one full batch at least. Lower PER_REPLICA_BATCH."
    )
steps_per_execution = min(STEPS_PER_EXECUTION, steps_per_epoch, acc.max_steps_per_execution or STEPS_PER_EXECUTION)
steps_per_epoch -= steps_per_epoch % steps_per_execution
keras.utils.set_random_seed(SEED)
train_batches = get_dataset(train_features, train_labels, training=True)
val_batches = get_dataset(val_features, val_labels).batch(GLOBAL_BATCH, drop_remainder=True).cache()
print(f"{steps_per_epoch} steps per epoch, {steps_per_execution} per execution")

# %% [markdown]
# ## Model
# The preset's BERT (or the tiny one) without a head, then dropout and a dense layer over the `[CLS]`
# token, whose final state sums up the pair. The logits stay float32 under mixed precision, where the
# softmax and the loss need the range. Built inside `acc.scope()`, so its variables live on every replica.

# %%
from keras import layers

from nbkit import models


def build_backbone():
    if preset_folder:
        return keras_hub.models.Backbone.from_preset(preset_folder)
    return keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2, hidden_dim=64,
        intermediate_dim=128, max_sequence_length=SEQUENCE_LENGTH,
    )


def build_model():
    backbone = build_backbone()
    cls_token = backbone.output["sequence_output"][:, 0, :]
    x = layers.Dropout(0.1)(cls_token)
    outputs = layers.Dense(len(data.classes), dtype="float32")(x)
    return keras.Model(backbone.input, outputs, name="text_classifier")


keras.utils.set_random_seed(SEED)  # the same initial weights on every run
with acc.scope():
    model = build_model()
    models.check_outputs(model, len(data.classes))  # one logit per class, said before any training
print(f"{model.name}: {model.count_params():,} parameters")

# %% [markdown]
# ## Learning-rate schedule
# A linear warm-up over the first tenth of the steps (the new head's random gradients would otherwise
# shake the pretrained weights), then a cosine decay to zero: the usual shape for fine-tuning BERT.

# %%
from nbkit import plots


def learning_rate_schedule(total_steps):
    warmup_steps = max(1, total_steps // 10)
    return keras.optimizers.schedules.CosineDecay(
        0.0, total_steps - warmup_steps, warmup_target=LEARNING_RATE, warmup_steps=warmup_steps
    )


schedule = learning_rate_schedule(EPOCHS * steps_per_epoch)
figure = plots.learning_rate(
    [float(schedule(e * steps_per_epoch)) for e in range(EPOCHS)], path=outputs.staging / "learning_rate.png"
)

with acc.scope():
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
        steps_per_execution=steps_per_execution,  # several steps per compiled call: fewer host round-trips
    )

# %% [markdown]
# ## Train
# One line per epoch. The input monitor says how much of each epoch the accelerator waited for the
# next batch, and warns when training is data-bound.

# %% tags=["nbval-ignore-output"]
from nbkit import models

input_monitor = models.input_monitor()
history = model.fit(
    input_monitor.watch(train_batches),
    epochs=EPOCHS,
    steps_per_epoch=steps_per_epoch,
    validation_data=val_batches,
    callbacks=[input_monitor],
    verbose=2,
)
print(compile_cache.report())

# %%
figure = plots.training_curves(history.history, path=outputs.staging / "training_curves.png")
figure = plots.input_wait(input_monitor.epochs, path=outputs.staging / "input_wait.png")

# %% [markdown]
# ## Evaluate
# Every validation example predicted once: the confusion matrix, the competition's metric, and the
# accuracy per language, where a multilingual model is weakest.

# %%
import matplotlib.pyplot as plt


def predict_probabilities(features, keys):
    """Class probabilities of every example, in order, and their labels or ids."""
    logits, keys = models.predict(model, get_dataset(features, keys), GLOBAL_BATCH)  # every row once
    return keras.ops.convert_to_numpy(keras.ops.softmax(logits)), keys


val_probabilities, _ = predict_probabilities(val_features, val_labels)
confusion, scores = data.score(val_labels, val_probabilities, METRIC)
print(f"learned (validation accuracy above 1.5x chance): {scores['accuracy'] > 1.5 / len(data.classes)}")
figure = plots.confusion(confusion, data.classes, scores, path=outputs.staging / "confusion_matrix.png")


# %% tags=["nbval-ignore-output"]
if languages:  # the weakest first
    val_languages = np.array(languages)[val_rows]
    correct = val_probabilities.argmax(1) == val_labels
    per_language = {
        lang: {"accuracy": float(correct[val_languages == lang].mean()), "examples": int(np.sum(val_languages == lang))}
        for lang in sorted(set(val_languages), key=lambda lang: correct[val_languages == lang].mean())
    }
    for lang, found in per_language.items():
        print(f"{lang:>12}: accuracy {found['accuracy']:.3f} on {found['examples']} examples")
    figure, axis = plt.subplots(figsize=(8, 3))
    axis.bar(list(per_language), [found["accuracy"] for found in per_language.values()])
    axis.set_ylim(0, 1)
    axis.set_title("validation accuracy per language")
    axis.tick_params(axis="x", rotation=60)
    figure.tight_layout()
    figure.savefig(outputs.staging / "accuracy_per_language.png")
    scores["accuracy_per_language"] = per_language

# %% [markdown]
# ## Predict and submit
# `submission.csv` in the sample submission's form: its header, its ids in its order. Data without
# a test.csv gets everything but the submission.

# %%
if data.test is None:
    test_rows = 0
    print("No submission.csv: the data has no test.csv.")
else:
    test_features = tokenize(data.test, np.arange(data.test.count))
    test_probabilities, test_ids = predict_probabilities(test_features, np.array(data.test.ids))
    written = data.write_submission(test_ids, test_probabilities, METRIC, outputs.staging / "submission.csv")
    test_rows = len(test_ids)
    of = f": the probability of class {data.classes[1]!r}" if METRIC == "roc_auc" else ""
    print(f"wrote {test_rows} rows to {written.name}{of}")
metrics_file = atomic.write_json(
    {
        **scores,
        "epochs": EPOCHS,
        "learning_rate": LEARNING_RATE,
        "global_batch": GLOBAL_BATCH,
        "replicas": acc.num_replicas,
        "backend": acc.backend,
        "precision": acc.precision,
        "model": str(preset_folder or "tiny BERT"),
        "sequence_length": SEQUENCE_LENGTH,
        "share_cut": float(cut),
        "test_rows": test_rows,
    },
    outputs.staging / "metrics.json",
)
model.save(outputs.staging / "model.keras")
print(f"wrote {metrics_file.name} and model.keras")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(f"validation {METRIC} {scores[METRIC]:.3f} (the competition's metric); accuracy {scores['accuracy']:.3f}")
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
