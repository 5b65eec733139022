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
# # Train on TPU, hand the model on: resumable training and a model package
#
# Code competitions do not accept TPU notebooks, so the model is trained here and predicted with
# in `06_infer_on_gpu` (GPU or CPU, internet off). This notebook trains the classifier of
# `02_flowers_classifier` (the flowers competition, or your converted data) and writes a **model
# package**: `model.keras`, a `manifest.json` (classes, label values, the submission's form, image
# size, input format, versions, metrics, data fingerprint) and a `dataset-metadata.json`, so
# `kaggle datasets create -p <package>` uploads it as a dataset for notebook 06 to attach.
#
# Kaggle ends sessions after 9 hours. A checkpoint is written after every epoch; run the notebook
# again and it continues from the last completed epoch (weights, optimizer state, learning-rate
# schedule and data order as if never stopped). A finished run is not retrained unless asked.
#
# `papermill notebooks/05_train_on_tpu.ipynb out/05.ipynb -p BACKEND jax -p SIMULATE_DEVICES 8`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder holding tfrecords-jpeg-*/ (your converted data, or the flowers competition's); "auto": the flowers competition (Kaggle input, else a generated sample); "sample"
IMAGE_SIZE: int = 0  # size of the tfrecords-jpeg-<size>x<size> folder to read; 0: the smallest there (192 for flowers)
MODEL: str = "auto"  # "small_cnn" or a keras.applications name like "EfficientNetB0"; "auto" picks by profile
WEIGHTS: str = "auto"  # "imagenet" (an attached copy of Keras' ImageNet file, else downloaded), "none", or that file; "auto" picks by profile
EPOCHS: int = 0  # training epochs; 0 means the profile's (smoke 8, full 12); more than done continues
PER_REPLICA_BATCH: int = 16  # images per replica per step (the global batch is this times the replicas)
BACKEND: str = "auto"  # Keras backend: "auto" (JAX on TPUs TensorFlow cannot see), "tensorflow" or "jax"
PROFILE: str = "auto"  # "auto" (smoke on CPU, full on TPU/GPU), "smoke" or "full"
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8, best with jax)
STEPS_PER_EXECUTION: int = 16  # training steps per compiled call (fewer host round-trips)
STEPS_PER_EPOCH: int = 0  # training steps per epoch; 0 means one pass over the training images (a cap keeps a trial run short)
PRECISION: str = "auto"  # "auto" (bfloat16 on TPU, float16 on recent GPUs, float32 on CPU), "float32", "mixed_bfloat16" or "mixed_float16"
SEED: int = 42  # fixes the initial weights, the order of the training records and their augmentation
AUGMENT: str = "flips"  # training augmentation on the host: "flips" (the starter notebooks') or "standard" (+ zoom, rotation, colour)
RESUME: str = "auto"  # "auto": continue from the checkpoint in OUTPUT_DIR if any; "restart": train from scratch
RESUME_FROM: str = "none"  # an earlier run's checkpoints folder, or that Kaggle notebook's output as "owner/slug" (kagglehub)
DATASET_ID: str = "auto"  # Kaggle dataset of the package, "owner/slug"; "auto": your user name + /<the data's name>-model
MODEL_HANDLE: str = "none"  # also publish the package to Kaggle Models as "owner/model/keras/variation" (kagglehub)
FOLD: int = -1  # -1: the data's train/val split; k: validate on fold k of data converted with --folds, train on the others (writes oof.csv)
TTA: int = 1  # test-time augmentation of the validation and test predictions: views averaged (1: none; up to 4)
COMPILE_CACHE: str = "auto"  # JAX's compiled programs, kept for the next session (a resumed run, the next fold): "auto": OUTPUT_DIR/compile-cache; "none"; or a folder several runs share
OUTPUT_DIR: str = "auto"  # checkpoints, plots, metrics, submission and the package; "auto": the working folder's train-on-tpu/ (train-on-tpu-fold<k>/)

# %% [markdown]
# ## Setup

# %%
from nbkit import accel, env, params, staging
from nbkit.images import augment
from nbkit.inputs import account

params.check_parameters(globals())
params.check_run(BACKEND, PROFILE, SIMULATE_DEVICES, EPOCHS, PER_REPLICA_BATCH, STEPS_PER_EXECUTION)
params.check_int("STEPS_PER_EPOCH", STEPS_PER_EPOCH)
params.check_int("IMAGE_SIZE", IMAGE_SIZE)
params.check_choice("RESUME", RESUME, ("auto", "restart"))
params.check_int("SEED", SEED)
params.check_choice("AUGMENT", AUGMENT, augment.SETS)
params.check_int("FOLD", FOLD, minimum=-1)
params.check_choice("TTA", TTA, range(1, 5))
if DATASET_ID != "auto":
    params.check_handle("DATASET_ID", DATASET_ID, example="alice/flowers-model", slug=account.DATASET_SLUG)
if MODEL_HANDLE != "none":
    params.check_handle("MODEL_HANDLE", MODEL_HANDLE, "owner/model/framework/variation", "alice/flowers/keras/default")
environment = env.detect()
run_name = "train-on-tpu" if FOLD == -1 else f"train-on-tpu-fold{FOLD}"  # its folder, here and as a notebook output
outputs = staging.start(environment.working_dir / run_name if OUTPUT_DIR == "auto" else OUTPUT_DIR)
print(outputs.describe())

compile_cache = outputs.folder / "compile-cache" if COMPILE_CACHE == "auto" else COMPILE_CACHE
acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES, compile_cache=compile_cache)
print(acc.describe())
print(acc.set_precision(PRECISION))  # before any model is built

# %% [markdown]
# ## Configuration and data
# The same profiles, dataset description, checked TFRecords and batch plan as notebook 02.
# Checkpoints are written straight into `OUTPUT_DIR/checkpoints` after every epoch; the other
# outputs wait in `outputs.staging` until the run ends.

# %%
from nbkit import batching, models
from nbkit.competitions import flowers
from nbkit.images import checks, layout, recipe

profile = recipe.profile(PROFILE, acc.kind, MODEL, WEIGHTS, EPOCHS)
models.check_name(profile.model)  # a misspelt MODEL stops here, before any data is read
schedule = profile.schedule(acc.num_replicas)
print(profile.describe())

data = flowers.locate_data(DATA_ROOT, remote_tpu=acc.remote_tpu)
print(f"data: {data.reason}")
dataset = flowers.load_description(data.path)
print(f"dataset: {dataset.describe()}")
image_size = layout.choose_size(data.path, IMAGE_SIZE)
files = layout.split_files(data.path, image_size, dataset.folds, FOLD)  # FOLD k: fold k validates
splits = checks.check_splits(files, image_size, dataset.num_classes)
fingerprint = checks.fingerprint(splits["train"].files + splits["val"].files)
print(f"{image_size}x{image_size} images: {checks.describe(splits)}; data fingerprint {fingerprint}")
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

# %% [markdown]
# ## Resume or start
# Whatever must not change between an interrupted run and its continuation is recorded with the
# checkpoint; a run with other settings stops and says which, instead of mixing two trainings.

# %% tags=["nbval-ignore-output"]
from pathlib import Path

from nbkit.handoff import resume
from nbkit.inputs import kaggle_hub

checkpoints = outputs.folder / "checkpoints"
if RESUME_FROM != "none" and RESUME == "auto" and outputs.writes:  # on a pod slice, process 0 copies
    earlier = Path(kaggle_hub.notebook_output(RESUME_FROM, f"{run_name}/checkpoints"))
    print(resume.copy_checkpoint(earlier, checkpoints))
    print(acc.compile_cache.copy_from(earlier.parent / "compile-cache"))  # before the model is built
settings = {
    "model": profile.model,
    "weights": profile.weights,
    "image_size": image_size,
    "global_batch": plan.global_batch,
    "steps_per_epoch": plan.steps_per_epoch,
    "precision": acc.precision,
    "max_lr": schedule.max_lr,
    "seed": SEED,
    "augment": AUGMENT,
    "fold": FOLD,
    "data": fingerprint,
}
run = resume.TrainingRun(checkpoints, settings, restart=RESUME == "restart", hosts=acc.hosts)
print(run.describe(profile.epochs))

# %% [markdown]
# ## Model
# Built and compiled in the accelerator's scope (as in notebook 02), then given the checkpoint's
# weights and optimizer state when resuming.

# %%
import keras

keras.utils.set_random_seed(SEED)
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
run.restore(model, acc)
print(f"{model.name}: {model.count_params():,} parameters")

# %% [markdown]
# ## Train
# Epoch e's batches depend only on (SEED, e), so the data stream restarts where it stopped.
# `run.fit` is `model.fit` from the first epoch not done yet, with a checkpoint after each.

# %% tags=["nbval-ignore-output"]
from nbkit.images import ordered, pipeline

train_batches = pipeline.train_batches(
    splits["train"].files, image_size, plan, SEED, first_epoch=run.epochs_done, recipe=AUGMENT
)
print(pipeline.describe_reading(splits["train"].files, plan))
val_batches = ordered.val_batches(splits["val"].files, image_size, plan.global_batch, plan.local_rows)
history = run.fit(
    model,
    train_batches,
    profile.epochs,
    steps_per_epoch=plan.steps_per_epoch,
    validation_data=val_batches,
    callbacks=[keras.callbacks.LearningRateScheduler(schedule)],
    verbose=2,
)
print(f"epochs done: {run.epochs_done}")
print(acc.compile_cache.report())

# %%
from nbkit.images import plots

figure = plots.training_curves(history, path=outputs.staging / "training_curves.png")

# %% [markdown]
# ## Evaluate and predict
# Scores on the validation set (with a `FOLD`, out of fold: `oof.csv`); `submission.csv` from this
# model, which notebook 06 must reproduce (with the same `TTA`).

# %%
from nbkit.images import metrics, oof, predict, submission

val = predict.predict_in_order(
    model, splits["val"].files, image_size, labeled=True, global_batch=plan.global_batch, views=TTA, rows=plan.local_rows
)
confusion, scores = metrics.of_predictions(val.keys, val.probabilities, dataset.metric)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / dataset.num_classes}")
figure = plots.confusion(confusion, dataset.classes, scores, path=outputs.staging / "confusion_matrix.png")
if FOLD != -1:
    oof.write(splits["val"].ids, val.keys, val.probabilities, FOLD, dataset, outputs.staging / "oof.csv")

test = predict.predict_in_order(
    model, splits["test"].files, image_size, labeled=False, global_batch=plan.global_batch, views=TTA, rows=plan.local_rows
)
written = submission.write(test.keys, test.probabilities.argmax(axis=1), dataset, outputs.staging / "submission.csv")

# %% [markdown]
# ## Model package
# Upload it as a dataset (`kaggle datasets create -p <package>`, then `kaggle datasets version -p
# <package> -m "..."` for later versions) and attach that dataset to notebook 06; or set
# `MODEL_HANDLE` and it is published to Kaggle Models, which notebook 06 reads by that handle.

# %%
from nbkit.handoff import package

suffix = "model" if FOLD == -1 else f"fold{FOLD}-model"
dataset_id = package.default_dataset_id(dataset, suffix) if DATASET_ID == "auto" else DATASET_ID
training = {**settings, "epochs": run.epochs_done, "replicas": acc.num_replicas, "accelerator": acc.kind}
folder = package.write_package(
    outputs.staging / "model-package",
    model,
    dataset=dataset,
    image_size=image_size,
    backend=acc.backend,
    metrics=scores,
    training=training,
    dataset_id=dataset_id,
)
print(f"wrote the model package {folder.name}: {', '.join(sorted(p.name for p in folder.iterdir()))}")
if dataset_id.startswith(package.PLACEHOLDER_OWNER):
    print("No Kaggle user name here: set DATASET_ID='<you>/<slug>' (or KAGGLE_USERNAME) before uploading.")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(metrics.describe(scores))
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
package_folder = outputs.folder / "model-package"  # published now
print(f"kaggle datasets create -p {package_folder.resolve()}")
if MODEL_HANDLE != "none":
    print(f"published to Kaggle Models: {package.publish_model(package_folder, MODEL_HANDLE)}")
