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
# `02_flowers_classifier` (the flowers competition, or your converted data) with the same input
# pipeline, augmentation, model and schedule, written out here too (edit them here), and writes a **model
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
DATA_ROOT: str = "auto"  # folder of tfrecords-jpeg-*/; "auto": the flowers competition (Kaggle input, else "sample")
IMAGE_SIZE: int = 0  # size of the tfrecords-jpeg-<size>x<size> folder to read; 0: the smallest there (192 for flowers)
MODEL: str = "EfficientNetB0"  # a keras.applications backbone, or "small_cnn" (what the smoke profile trains)
WEIGHTS: str = "imagenet"  # "imagenet" (an attached copy of Keras' ImageNet file, else downloaded), "none" or that file
EPOCHS: int = 12  # training epochs (the smoke profile trains at most 8); more than done continues
PER_REPLICA_BATCH: int = 16  # images per replica per step (the global batch is this times the replicas)
AUGMENT: str = "flips"  # augmentation: "flips", "standard" (+ zoom, colour) or "none" (digits, documents, X-rays)
CACHE: str = "auto"  # keep decoded training images in memory: "auto" if at most half the free memory; "memory"; "none"
TTA: int = 1  # test-time views averaged (1: none; 2: + flipped; 3: + zoomed; 4: + both); 1 if AUGMENT "none"
FOLD: int = -1  # -1: the train/val split; k: validate on fold k of --folds data, train on the others (writes oof.csv)
SEED: int = 42  # fixes the initial weights, the order of the training records and their augmentation
PROFILE: str = "auto"  # "full": as above; "smoke": small_cnn from scratch, at most 8 epochs; "auto": smoke on a CPU
BACKEND: str = "auto"  # Keras backend: "auto" (JAX on TPUs TensorFlow cannot see), "tensorflow" or "jax"
PRECISION: str = "auto"  # "auto" (bfloat16 on TPUs and recent GPUs), "float32", "mixed_bfloat16" or "mixed_float16"
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8, best with jax; 0: no split)
STEPS_PER_EXECUTION: int = 16  # training steps per compiled call (fewer host round-trips)
STEPS_PER_EPOCH: int = 0  # training steps per epoch; 0: one pass over the training images (a cap keeps a trial short)
RESUME: str = "auto"  # "auto": continue from the checkpoint in OUTPUT_DIR if any; "restart": train from scratch
RESUME_FROM: str = "none"  # an earlier run's checkpoints folder, or a Kaggle notebook's "owner/slug" (its output)
DATASET_ID: str = "auto"  # the package's Kaggle dataset "owner/slug"; "auto": your user name + /<the data's name>-model
MODEL_HANDLE: str = "none"  # also publish the package to Kaggle Models as "owner/model/keras/variation" (kagglehub)
COMPILE_CACHE: str = "auto"  # JAX compile cache for the next run: "auto": OUTPUT_DIR/compile-cache, "none" or a folder

OUTPUT_DIR: str = "auto"  # the run's outputs and package; "auto": the working folder's train-on-tpu[-fold<k>]/

# %% [markdown]
# ## Setup
# Parameters are checked first, then the output folder is taken (this run's files wait in its
# staging folder and replace the previous run's only when the run ends well), then the accelerator
# is found, before anything imports Keras.

# %%
from nbkit import accel, params, staging
from nbkit.accel import cache
from nbkit.errors import ParameterError
from nbkit.inputs import account

params.check_parameters(
    globals(), EPOCHS=1, PER_REPLICA_BATCH=1, STEPS_PER_EXECUTION=1, FOLD=-1, TTA=range(1, 5),
    AUGMENT=("flips", "standard", "none"), CACHE=("auto", "memory", "none"), RESUME=("auto", "restart"),
)
if AUGMENT == "none" and TTA > 1:  # TTA's second view is the image mirrored (tta_view): not for digits or documents
    raise ParameterError(
        f"TTA={TTA} with AUGMENT='none': test-time augmentation's second view is the image mirrored, but "
        "AUGMENT='none' says a mirrored picture shows something else here (digits, documents). Use TTA=1, or "
        "AUGMENT='flips' if a mirrored picture keeps its class."
    )
if DATASET_ID != "auto":
    params.check_handle("DATASET_ID", DATASET_ID, example="alice/flowers-model", slug=account.DATASET_SLUG)
if MODEL_HANDLE != "none":
    params.check_handle("MODEL_HANDLE", MODEL_HANDLE, "owner/model/framework/variation", "alice/flowers/keras/default")
run_name = "train-on-tpu" if FOLD == -1 else f"train-on-tpu-fold{FOLD}"  # its folder, here and as a notebook output
outputs = staging.start(OUTPUT_DIR, default=run_name, data_root=DATA_ROOT)  # never inside DATA_ROOT
print(outputs.describe())

acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES, precision=PRECISION)
compile_cache = cache.use(outputs.folder / "compile-cache" if COMPILE_CACHE == "auto" else COMPILE_CACHE, acc)
print(compile_cache.describe())

# %% [markdown]
# ## Configuration
# The full profile fine-tunes a pretrained EfficientNetB0 with the starter notebooks' schedule. A CPU
# cannot, in reasonable time: there the smoke profile trains a small CNN from scratch, which takes a
# larger learning rate. The learning rate's peak grows with the replicas: a global batch N times
# larger takes N times larger steps.

# %%
from nbkit import backbones, models

LR_START, LR_MIN, LR_MAX_PER_REPLICA = 1e-5, 1e-5, 5e-5  # the flower starters' ramp-sustain-decay
LR_RAMP_EPOCHS, LR_SUSTAIN_EPOCHS, LR_DECAY = 5, 0, 0.8
backbones.check_name(MODEL)  # a misspelt MODEL stops here, before any data is read
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")
if SMOKE:  # small_cnn from scratch, at most 8 epochs: each value it replaces is said
    print(params.override(
        globals(), "smoke profile (PROFILE='full' keeps them)", MODEL="small_cnn", WEIGHTS="none", EPOCHS=min(EPOCHS, 8)
    ))
    LR_MAX_PER_REPLICA, LR_RAMP_EPOCHS = 2.5e-4, 2
GLOBAL_BATCH = PER_REPLICA_BATCH * acc.num_replicas
LR_MAX = LR_MAX_PER_REPLICA * acc.num_replicas
print(
    f"{'smoke' if SMOKE else 'full'}: {MODEL} (weights {WEIGHTS}), {EPOCHS} epochs, "
    f"global batch {GLOBAL_BATCH}, peak lr {LR_MAX:g}"
)

# %% [markdown]
# ## Data
# The dataset's description says its classes and the form of its submission. Every record is read
# and every image decoded once before training, so a damaged file, a label out of range, a repeated
# test id or an image of the wrong size stops here with the file and record, not halfway through
# training; so does a batch larger than a split (each epoch and validation pass needs a full one) or
# than the memory.

# %%
from nbkit.images import flowers

data = flowers.load_data(DATA_ROOT, IMAGE_SIZE, FOLD)  # FOLD k: fold k validates
print(data.describe())
data.check_batch(PER_REPLICA_BATCH, acc.num_replicas)
image_size, dataset = data.image_size, data.dataset

# Keras runs whole executions of STEPS_PER_EXECUTION steps: an epoch is cut to whole executions.
steps_per_epoch = min(data.train.count // GLOBAL_BATCH, STEPS_PER_EPOCH or data.train.count)
steps_per_execution = min(STEPS_PER_EXECUTION, steps_per_epoch, acc.max_steps_per_execution or STEPS_PER_EXECUTION)
steps_per_epoch -= steps_per_epoch % steps_per_execution
print(f"{steps_per_epoch} steps per epoch, {steps_per_execution} per execution")

# %% [markdown]
# ## Resume or start
# Whatever must not change between an interrupted run and its continuation is recorded with the
# checkpoint; a run with other settings stops and says which, instead of mixing two trainings.

# %% tags=["nbval-ignore-output"]
from pathlib import Path

from nbkit.handoff import resume, resume_from

checkpoints = outputs.folder / "checkpoints"
if RESUME_FROM != "none" and RESUME == "auto" and outputs.writes:  # on a pod slice, process 0 copies
    earlier = Path(resume_from.notebook_output(RESUME_FROM, f"{run_name}/checkpoints"))
    print(resume.copy_checkpoint(earlier, checkpoints))
    print(resume_from.copy_compile_cache(compile_cache, earlier.parent / "compile-cache"))  # before the model is built
settings = {
    "model": MODEL,
    "weights": WEIGHTS,
    "image_size": image_size,
    "global_batch": GLOBAL_BATCH,
    "steps_per_epoch": steps_per_epoch,
    "precision": acc.precision,
    "max_lr": LR_MAX,
    "seed": SEED,
    "augment": AUGMENT,
    "fold": FOLD,
    "data": resume_from.fingerprint(data.train.files + data.val.files),  # a resumed run must train on the same files
}
run = resume.TrainingRun(checkpoints, settings, restart=RESUME == "restart", hosts=acc.hosts)
print(run.describe(EPOCHS))

# %% [markdown]
# ## Input pipeline
# tf.data on the host CPU, as Kaggle's TPU starters do: read the records, decode the JPEGs, augment,
# batch. Images stay uint8 (a quarter of the bytes to send; the model rescales them). Augmenting here,
# in the input pipeline, keeps the accelerator busy with the model: Keras' preprocessing layers
# inside the model slow JAX/TPU training badly (keras #23229). Where the decoded training images fit in
# memory (`CACHE`), they are decoded once and kept: an epoch then only shuffles, augments and batches.
#
# Every random choice is drawn from `SEED` and the epoch with TensorFlow's stateless random ops, so
# epoch e sees the same images in the same order, augmented the same way, whether the run was
# interrupted or not (notebook 05 resumes on this), cached or not, and on a pod slice every host builds
# the same global batches, of which Keras gives each its rows.

# %%
import tensorflow as tf

AUTO = tf.data.AUTOTUNE
SHUFFLE_BUFFER = 2048


def decode(record, labeled):
    """A serialized record to (uint8 image [size, size, 3], class) or (image, id)."""
    key = "class" if labeled else "id"
    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        key: tf.io.FixedLenFeature([], tf.int64 if labeled else tf.string),
    }
    example = tf.io.parse_single_example(record, features)
    image = tf.io.decode_jpeg(example["image"], channels=3)
    return tf.reshape(image, [image_size, image_size, 3]), example[key]  # an explicit size: what TPUs need


def augment(image, seed):
    """One training image changed at random; `seed` (two integers) is its own, so nothing depends on threads."""
    if AUGMENT == "none":  # digits, documents, X-rays: a mirrored picture shows something else
        return image
    seeds = tf.random.experimental.stateless_split(seed, 6)
    image = tf.image.stateless_random_flip_left_right(image, seeds[0])
    if AUGMENT == "standard":  # zoom into a random part (80-100% of each side), then colour within 15%
        side = tf.cast(tf.random.stateless_uniform([], seeds[1], 0.8, 1.0) * image_size, tf.int32)
        image = tf.image.stateless_random_crop(image, [side, side, 3], seeds[2])
        image = tf.image.resize(tf.image.convert_image_dtype(image, tf.float32), [image_size, image_size])
        image = tf.image.stateless_random_brightness(image, 0.15, seeds[3])
        image = tf.image.stateless_random_contrast(image, 0.85, 1.15, seeds[4])
        image = tf.image.stateless_random_saturation(image, 0.85, 1.15, seeds[5])
        image = tf.image.convert_image_dtype(tf.clip_by_value(image, 0.0, 1.0), tf.uint8)
    return image


def get_dataset(split, training=False, first_epoch=0):
    """Training: batches of augmented (image, class), shuffled anew each epoch, from `first_epoch` on.
    Otherwise: every (image, class or id) in file order, not batched."""
    records = tf.data.TFRecordDataset(split.files, split.compression, num_parallel_reads=AUTO)
    images = records.map(lambda record: decode(record, split.labeled), num_parallel_calls=AUTO)
    if not training:
        return images
    cached = CACHE == "memory" or (CACHE == "auto" and data.fits_in_memory(split))
    if cached:  # decode every image once, now, and keep it: an epoch then only shuffles, augments and batches
        images = images.cache()
        images.reduce(0, lambda count, image_label: count + 1)  # one pass fills the cache

    def one_epoch(epoch):
        seed = SEED * 10_007 + epoch
        if cached:  # the same order as shuffling the records: a seeded shuffle's order ignores what it shuffles
            shuffled = images.shuffle(SHUFFLE_BUFFER, seed=seed)
        else:  # the records shuffled while small (serialized), then decoded
            shuffled = records.shuffle(SHUFFLE_BUFFER, seed=seed)
            shuffled = shuffled.map(lambda record: decode(record, True), num_parallel_calls=AUTO)
        augmented = shuffled.enumerate().map(  # each image's random choices seeded by (SEED, epoch, its position)
            lambda index, item: (augment(item[0], tf.stack([seed, index])), item[1]), num_parallel_calls=AUTO
        )
        return augmented.batch(GLOBAL_BATCH, drop_remainder=True).take(steps_per_epoch)

    return tf.data.Dataset.range(first_epoch, EPOCHS).flat_map(one_epoch).prefetch(AUTO)


# %% [markdown]
# ## Model
# A pretrained backbone without its classifier, global-average pooled, then dropout and a new dense
# layer for the dataset's classes. The model takes uint8 images and rescales them as its backbone
# wants; its logits stay float32 under mixed precision, where the softmax and the loss need the range.
# Built and compiled inside `acc.scope()`, so its variables live on every replica.

# %%
import keras
from keras import layers


def build_model():
    inputs = keras.Input([image_size, image_size, 3], dtype="uint8")
    if MODEL == "small_cnn":  # pooled to about 48x48, three conv blocks: trains in seconds on a CPU
        x = layers.Rescaling(1 / 255)(inputs)
        x = layers.AveragePooling2D(max(1, image_size // 48))(x)
        for width in (16, 32, 64):
            x = layers.MaxPooling2D()(layers.Conv2D(width, 3, padding="same", activation="relu")(x))
        x = layers.Dense(128, activation="relu")(layers.Flatten()(x))
    else:
        backbone = backbones.backbone(MODEL, [image_size, image_size, 3], WEIGHTS)  # attached weights work offline
        # EfficientNet and ConvNeXt rescale 0-255 pixels themselves; most other backbones want [-1, 1].
        rescales_itself = MODEL.startswith(("EfficientNet", "ConvNeXt"))
        x = inputs if rescales_itself else layers.Rescaling(1 / 127.5, offset=-1)(inputs)
        x = layers.Dropout(0.2)(backbone(x))
    outputs = layers.Dense(dataset.num_classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=MODEL.lower())


keras.utils.set_random_seed(SEED)  # the same initial weights on every run (and every pod host)
with acc.scope():
    model = build_model()
    models.check_outputs(model, dataset.num_classes)  # one logit per class, said before any training
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
        steps_per_execution=steps_per_execution,  # several steps per compiled call: fewer host round-trips
    )
run.restore(model, acc)  # the checkpoint's weights and optimizer state, when resuming
print(f"{model.name}: {model.count_params():,} parameters")

# %% [markdown]
# ## Learning-rate schedule
# A short linear ramp (large steps would wreck the pretrained weights at first), then an exponential
# decay towards `LR_MIN`.

# %%
from nbkit import plots


def lrfn(epoch):
    if epoch < LR_RAMP_EPOCHS:
        return LR_START + (LR_MAX - LR_START) * epoch / LR_RAMP_EPOCHS
    if epoch < LR_RAMP_EPOCHS + LR_SUSTAIN_EPOCHS:
        return LR_MAX
    return LR_MIN + (LR_MAX - LR_MIN) * LR_DECAY ** (epoch - LR_RAMP_EPOCHS - LR_SUSTAIN_EPOCHS)


figure = plots.learning_rate([lrfn(epoch) for epoch in range(EPOCHS)], path=outputs.staging / "learning_rate.png")

# %% [markdown]
# ## Train
# Epoch e's batches depend only on (SEED, e), so the data stream restarts where it stopped:
# `model.fit` from the first epoch not done yet, with a checkpoint after each (`run.checkpoint()`).

# %% tags=["nbval-ignore-output"]
if run.epochs_done < EPOCHS:
    model.fit(
        get_dataset(data.train, training=True, first_epoch=run.epochs_done),
        epochs=EPOCHS,
        initial_epoch=run.epochs_done,
        steps_per_epoch=steps_per_epoch,
        validation_data=get_dataset(data.val).batch(GLOBAL_BATCH, drop_remainder=True).cache(),
        validation_steps=data.val.count // GLOBAL_BATCH,  # tf.data cannot count TFRecords: Keras is told
        callbacks=[keras.callbacks.LearningRateScheduler(lrfn), run.checkpoint()],
        verbose=2,
    )
print(f"epochs done: {run.epochs_done}")
print(compile_cache.report())

# %%
figure = plots.training_curves(run.history, path=outputs.staging / "training_curves.png")

# %% [markdown]
# ## Evaluate and predict
# Scores on the validation set (with a `FOLD`, out of fold: `oof.csv`); `submission.csv` from this
# model, which notebook 06 must reproduce (with the same `TTA`), where the data has a test split.
# Test-time augmentation: predict each image as it is and in `TTA - 1` changed views (`tta_view`: the
# second is mirrored, so the first cell refuses TTA > 1 with `AUGMENT="none"`), and average the class
# probabilities.

# %%
import numpy as np


def tta_view(image, view):
    """View `view` of an image: 0 as it is, 1 flipped, 2 zoomed into its central 87.5%, 3 both."""
    if view >= 2:
        zoomed = tf.image.resize(tf.image.central_crop(image, 0.875), [image_size, image_size])
        image = tf.saturate_cast(tf.round(zoomed), tf.uint8)
    return tf.image.flip_left_right(image) if view % 2 else image


def predict_tta(split):
    """Class probabilities of each view of every image of `split` (in file order), and the labels or ids."""
    views = []
    for view in range(TTA):
        images = get_dataset(split).map(lambda image, key, view=view: (tta_view(image, view), key))
        logits, keys = models.predict(model, images, GLOBAL_BATCH)  # every row once, on any number of hosts
        views.append(keras.ops.convert_to_numpy(keras.ops.softmax(logits)))
    return views, keys


val_views, val_labels = predict_tta(data.val)
val_probabilities = np.mean(val_views, axis=0)
confusion, scores = data.score(val_labels, val_probabilities)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / dataset.num_classes}")
figure = plots.confusion(confusion, dataset.classes, scores, path=outputs.staging / "confusion_matrix.png")
if FOLD != -1:
    data.write_oof(val_labels, val_probabilities, outputs.staging / "oof.csv")

if data.test is None:  # the package is what counts: notebook 06 predicts when the test pictures are there
    print(
        "No submission.csv: the data has no test split (converted without --test; a code competition's "
        "test pictures appear only when Kaggle reruns notebook 06, which predicts with the package)."
    )
else:
    test_views, test_ids = predict_tta(data.test)
    written = data.write_submission(test_ids, np.mean(test_views, axis=0).argmax(1), outputs.staging / "submission.csv")
    print(f"wrote {len(test_ids)} rows to {written.name}")

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
    metrics=scores,
    training=training,
    dataset_id=dataset_id,
)
print(f"wrote the model package {folder.name}: {', '.join(sorted(p.name for p in folder.iterdir()))}")
if dataset_id.startswith(account.PLACEHOLDER_OWNER):
    print("No Kaggle user name here: set DATASET_ID='<you>/<slug>' (or KAGGLE_USERNAME) before uploading.")

# %% [markdown]
# The run ended well: its outputs replace the previous run's, all at once.

# %% tags=["nbval-ignore-output"]
print(
    f"validation {dataset.metric} {scores[dataset.metric]:.3f} (the competition's metric); "
    f"accuracy {scores['accuracy']:.3f}"
)
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
package_folder = outputs.folder / "model-package"  # published now
print(f"kaggle datasets create -p {package_folder.resolve()}")
if MODEL_HANDLE != "none":
    print(f"published to Kaggle Models: {package.publish_model(package_folder, MODEL_HANDLE)}")
