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
# # Image classifier on TPU: Kaggle's "Flower Classification with TPUs", or your own competition
#
# Config -> data -> model -> train -> evaluate -> submit, on TFRecords in the layout of Kaggle's TPU
# competitions (`tfrecords-jpeg-<size>x<size>/{train,val,test}/*.tfrec`). The worked example is the
# flowers competition (104 classes, `submission.csv` with `id,label`): on Kaggle, attach it and pick
# a TPU; anywhere else the notebook generates a small learnable sample in the same format and runs on
# the CPU. For another competition, convert its pictures (`python -m nbkit tfrecords`, or notebook
# 07) and point `DATA_ROOT` at the result: the classes, the image size and the submission's form come
# from its `nbkit-dataset.json`. CI also runs it with `BACKEND="jax"` and `SIMULATE_DEVICES=8`, the
# core count of a TPU v5e-8 (TensorFlow's 8 logical CPUs are much slower here: see the README).
#
# `papermill notebooks/02_flowers_classifier.ipynb out/02.ipynb -p BACKEND jax -p SIMULATE_DEVICES 8`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder holding tfrecords-jpeg-*/ (your converted data, or the flowers competition's); "auto": the flowers competition (Kaggle input, else a generated sample); "sample"
IMAGE_SIZE: int = 0  # size of the tfrecords-jpeg-<size>x<size> folder to read; 0: the smallest there (192 for flowers)
MODEL: str = "auto"  # "small_cnn" or a keras.applications name like "EfficientNetB0"; "auto" picks by profile
WEIGHTS: str = "auto"  # "imagenet" (an attached copy of Keras' ImageNet file, else downloaded), "none", or that file; "auto" picks by profile
EPOCHS: int = 0  # training epochs; 0 means the profile's (smoke 8, full 12)
PER_REPLICA_BATCH: int = 16  # images per replica per step (the global batch is this times the replicas)
BACKEND: str = "auto"  # Keras backend: "auto" (JAX on TPUs TensorFlow cannot see), "tensorflow" or "jax"
PROFILE: str = "auto"  # "auto" (smoke on CPU, full on TPU/GPU), "smoke" or "full"
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8, best with jax; 0: no split)
STEPS_PER_EXECUTION: int = 16  # training steps per compiled call (fewer host round-trips)
STEPS_PER_EPOCH: int = 0  # training steps per epoch; 0 means one pass over the training images (a cap keeps a trial run short)
PRECISION: str = "auto"  # "auto" (bfloat16 on TPU, float16 on recent GPUs, float32 on CPU), "float32", "mixed_bfloat16" or "mixed_float16"
SEED: int = 42  # fixes the initial weights, the order of the training records and their augmentation
AUGMENT: str = "flips"  # training augmentation on the host: "flips" (the starter notebooks') or "standard" (+ zoom, rotation, colour)
FOLD: int = -1  # -1: the data's train/val split; k: validate on fold k of data converted with --folds, train on the others (writes oof.csv)
TTA: int = 1  # test-time augmentation: views of each image averaged (1: none; 2: + flipped; 3: + zoomed; 4: + both)
COMPILE_CACHE: str = "auto"  # JAX's compiled programs, kept for the next session (a resumed run, the next fold): "auto": OUTPUT_DIR/compile-cache; "none"; or a folder several runs share
OUTPUT_DIR: str = "auto"  # where plots, model, metrics.json and submission.csv go; "auto": the working folder's classifier/ (classifier-fold<k>/)

# %% [markdown]
# ## Setup
# Parameters are checked first (names, types, values: a misspelt one stops here too), and the output
# folder is taken: this run's files go to its `.incomplete-run/` and move in only when the run ends
# well, so a run that fails or is stopped leaves the previous run's outputs as they were. Then the
# accelerator is found (before anything imports Keras).

# %%
from nbkit import accel, env, params, staging
from nbkit.images import augment

params.check_parameters(globals())
params.check_run(BACKEND, PROFILE, SIMULATE_DEVICES, EPOCHS, PER_REPLICA_BATCH, STEPS_PER_EXECUTION)
params.check_int("STEPS_PER_EPOCH", STEPS_PER_EPOCH)
params.check_int("IMAGE_SIZE", IMAGE_SIZE)
params.check_int("SEED", SEED)
params.check_choice("AUGMENT", AUGMENT, augment.SETS)
params.check_int("FOLD", FOLD, minimum=-1)
params.check_choice("TTA", TTA, range(1, 5))
environment = env.detect()
default_folder = environment.working_dir / ("classifier" if FOLD == -1 else f"classifier-fold{FOLD}")
outputs = staging.start(default_folder if OUTPUT_DIR == "auto" else OUTPUT_DIR)
print(outputs.describe())

compile_cache = outputs.folder / "compile-cache" if COMPILE_CACHE == "auto" else COMPILE_CACHE
acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES, compile_cache=compile_cache)
print(acc.describe())
print(acc.set_precision(PRECISION))  # before any model is built

# %% [markdown]
# ## Configuration
# The "smoke" profile trains a small CNN from scratch; "full" fine-tunes a pretrained EfficientNetB0
# with the starter notebooks' learning-rate schedule (max 5e-5 x replicas).

# %%
from nbkit import models
from nbkit.images import recipe

profile = recipe.profile(PROFILE, acc.kind, MODEL, WEIGHTS, EPOCHS)
models.check_name(profile.model)  # a misspelt MODEL stops here, before any data is read
schedule = profile.schedule(acc.num_replicas)
print(profile.describe())

# %% [markdown]
# ## Data
# The dataset's description says its classes and the form of its submission. Every record is read
# and every image decoded once before training, so a damaged file, a label out of range, a repeated
# test id or an image of the wrong size stops here with the file and record, not halfway through
# training. The global batch is checked against the splits and the memory.

# %%
from nbkit import batching
from nbkit.competitions import flowers
from nbkit.images import checks, layout

data = flowers.locate_data(DATA_ROOT, remote_tpu=acc.remote_tpu)
print(f"data: {data.reason}")
dataset = flowers.load_description(data.path)
print(f"dataset: {dataset.describe()}")
image_size = layout.choose_size(data.path, IMAGE_SIZE)
files = layout.split_files(data.path, image_size, dataset.folds, FOLD)  # FOLD k: fold k validates
splits = checks.check_splits(files, image_size, dataset.num_classes)
print(f"{image_size}x{image_size} images: {checks.describe(splits)}")
plan = batching.plan(
    splits["train"].count,
    splits["val"].count,
    PER_REPLICA_BATCH,
    acc.num_replicas,
    item_bytes=image_size * image_size * 3,
    steps_per_execution=STEPS_PER_EXECUTION,
    max_steps_per_epoch=STEPS_PER_EPOCH,
    execution_limit=acc.execution_limit,
    local_replicas=acc.local_replicas,  # on a pod slice: this host's
)
print(plan.describe())

# %%
from nbkit.images import ordered, pipeline, plots

train_batches = pipeline.train_batches(splits["train"].files, image_size, plan, SEED, recipe=AUGMENT)
print(pipeline.describe_reading(splits["train"].files, plan))
val_batches = ordered.val_batches(splits["val"].files, image_size, plan.global_batch, plan.local_rows)
images, labels = next(iter(train_batches))
figure = plots.batch(images.numpy()[:20], labels.numpy()[:20], dataset.classes, path=outputs.staging / "batch.png")

# %% [markdown]
# ## Model
# Built and compiled inside `acc.scope()`, so its variables live on every replica. It takes uint8
# images (a quarter of the bytes to send) and rescales them itself; its logits stay float32.
# `steps_per_execution` runs several training steps per compiled call: fewer host round-trips.

# %%
import keras

keras.utils.set_random_seed(SEED)  # the same initial weights on every run (and every pod host)
with acc.scope():
    model = models.build_classifier(
        profile.model, image_size, dataset.num_classes, weights=profile.weights, search=[environment.input_dir]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
        steps_per_execution=plan.steps_per_execution,
    )
print(f"{model.name}: {model.count_params():,} parameters")

# %%
figure = plots.learning_rate(schedule.values(profile.epochs), path=outputs.staging / "learning_rate.png")

# %% [markdown]
# ## Train
# One line per epoch; the learning rate follows the schedule. The input monitor says how much of
# each epoch the accelerator waited for the next batch, and warns when training is data-bound.

# %% tags=["nbval-ignore-output"]
from nbkit.images import monitor

input_monitor = monitor.input_monitor()
history = model.fit(
    input_monitor.watch(train_batches),
    epochs=profile.epochs,
    steps_per_epoch=plan.steps_per_epoch,
    validation_data=val_batches,
    callbacks=[keras.callbacks.LearningRateScheduler(schedule), input_monitor],
    verbose=2,
)
print(acc.compile_cache.report())

# %%
figure = plots.training_curves(history.history, path=outputs.staging / "training_curves.png")
figure = plots.input_wait(input_monitor.epochs, path=outputs.staging / "input_wait.png")

# %% [markdown]
# ## Evaluate
# Predictions on the whole validation set (padded to full batches, then cut; with `TTA` views,
# their probabilities averaged): confusion matrix, the competition's metric and macro F1 /
# precision / recall, and a batch titled OK or, in red, NO -> the true class. With a `FOLD`, these
# are out-of-fold predictions: `oof.csv` keeps them for `python -m nbkit oof`.

# %%
from nbkit.images import metrics, oof, predict, submission

val = predict.predict_in_order(
    model, splits["val"].files, image_size, labeled=True, global_batch=plan.global_batch, views=TTA, rows=plan.local_rows
)
val_labels, val_predictions = val.keys, val.probabilities.argmax(axis=1)
confusion, scores = metrics.of_predictions(val_labels, val.probabilities, dataset.metric)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / dataset.num_classes}")
figure = plots.confusion(confusion, dataset.classes, scores, path=outputs.staging / "confusion_matrix.png")
if FOLD != -1:
    oof.write(splits["val"].ids, val_labels, val.probabilities, FOLD, dataset, outputs.staging / "oof.csv")

# %%
shown = next(iter(ordered.image_batches(splits["val"].files, image_size, True, 20, splits["val"].count))).numpy()
figure = plots.batch(shown, val_labels[:20], dataset.classes, val_predictions[:20], path=outputs.staging / "predictions.png")

# %% [markdown]
# ## Predict and submit
# `submission.csv` in the dataset's form, one row per test id in the test files' order;
# `metrics.json` keeps the scores.

# %%
test = predict.predict_in_order(
    model, splits["test"].files, image_size, labeled=False, global_batch=plan.global_batch, views=TTA, rows=plan.local_rows
)
written = submission.write(test.keys, test.probabilities.argmax(axis=1), dataset, outputs.staging / "submission.csv")
metrics_file = metrics.write(
    {
        **scores,
        "epochs": profile.epochs,
        "global_batch": plan.global_batch,
        "replicas": acc.num_replicas,
        "backend": acc.backend,
        "precision": acc.precision,
        "model": profile.model,
        "image_size": image_size,
        "fold": FOLD,
        "tta": TTA,
        "test_rows": len(test.keys),
    },
    outputs.staging / "metrics.json",
)
saved = models.save_model(model, outputs.staging / "model.keras")
print(f"wrote {len(test.keys)} rows to {written.name}, plus {metrics_file.name} and {saved.name}")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(metrics.describe(scores))
if TTA > 1:  # what the extra views bought
    print(metrics.describe(metrics.of_predictions(val_labels, val.per_view[0], dataset.metric)[1], "1 view:"))
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
