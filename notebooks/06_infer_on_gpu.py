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
# # Infer on GPU: predict with model packages, internet off
#
# The second half of `05_train_on_tpu`: attach the datasets (or Kaggle Models) made from its model
# packages, pick a GPU (or none) and run. Several packages (the K folds of a cross-validation, or
# different models) are averaged: each predicts class probabilities (over `TTA` views of each image),
# and the mean decides. Every manifest is checked against the test data (image size, classes, label
# values, the submission's columns) and against the others before anything is predicted, and each
# loaded model against the outputs recorded when it was saved, so a wrong or damaged package stops
# with a message instead of a silently bad `submission.csv`. Nothing is downloaded. A model trained on
# a TPU with the JAX backend predicts here with TensorFlow on the GPU.
#
# `papermill notebooks/06_infer_on_gpu.ipynb out/06.ipynb -p PACKAGES out/train-on-tpu/model-package`

# %% tags=["parameters"]
PACKAGES: str = "auto"  # packages to average: folders or Models handles, by commas; "auto": all attached, else 05's
DATA_ROOT: str = "auto"  # folder of tfrecords-jpeg-*/; "auto": the flowers competition (Kaggle input, else "sample")
IMAGE_SIZE: int = 0  # image size of the test files to read; 0 means the models' (from their manifests)
PER_REPLICA_BATCH: int = 64  # images per replica per prediction step
TTA: int = 1  # test-time views averaged (1: none; 2: + flipped; 3: + zoomed; 4: + both); 1 for AUGMENT "none" models
BACKEND: str = "auto"  # Keras backend: "auto" (TensorFlow on a GPU or CPU), "tensorflow" or "jax"
OUTPUT_DIR: str = "auto"  # where submission.csv goes; "auto": the working folder (/kaggle/working on Kaggle)

# %% [markdown]
# ## Setup
# The GPU if there is one, else the CPU: `accel.setup` says which. The output folder is taken first,
# so one that cannot be written stops here, before anything is predicted.

# %%
from nbkit import accel, env, params, staging

params.check_parameters(globals(), PER_REPLICA_BATCH=1, TTA=range(1, 5))  # and BACKEND, and every int >= 0

environment = env.detect()
outputs = staging.start(environment.working_dir if OUTPUT_DIR == "auto" else OUTPUT_DIR)
acc = accel.setup(BACKEND)
print(acc.describe())

# %% [markdown]
# ## The model packages
# What each model was trained with, and on what; models averaged together must agree on the image
# size, the classes, their label values and the submission's columns.

# %% tags=["nbval-ignore-output"]
from nbkit.errors import ParameterError
from nbkit.handoff import ensemble, package

kaggle_input = environment.input_dir if environment.platform == "kaggle" else None
folders = ensemble.find_packages(PACKAGES, environment.working_dir / "train-on-tpu" / "model-package", kaggle_input)
manifests = [package.read_manifest(folder) for folder in folders]
ensemble.check_same(manifests, [str(folder) for folder in folders])
for folder, manifest in zip(folders, manifests):
    print(f"{folder}: {package.describe(manifest)}")
unmirrored = [str(f) for f, m in zip(folders, manifests) if m["training"].get("augment") == "none"]
if TTA > 1 and unmirrored:  # TTA's second view is the image mirrored (tta_view), as in 02 and 05
    raise ParameterError(
        f"TTA={TTA}: {', '.join(unmirrored)} trained with AUGMENT='none' (a mirrored picture shows something else "
        "there), and test-time augmentation's second view is the image mirrored. Use TTA=1."
    )

# %% [markdown]
# ## Test data
# The test files are read once and checked against every manifest before anything is predicted.

# %%
from nbkit.images import flowers

found = flowers.locate_data(DATA_ROOT, environment=environment)
print(f"data: {found.reason}")
dataset = flowers.load_description(found.path)
image_size = IMAGE_SIZE or manifests[0]["image_size"]
for folder, manifest in zip(folders, manifests):
    ensemble.check_compatible(manifest, image_size, dataset, folder.name)
test = flowers.load_data(found.path, image_size, names=["test"]).test
print(f"{test.count} test images in {len(test.files)} files, {len(folders)} model(s) to average")

# %% [markdown]
# ## Load and predict
# Each model loads with this machine's Keras backend and its check images must give the logits
# recorded in its manifest, all of them before any predicts; then each predicts class probabilities
# for every test image, and the ensemble is their mean.

# %%
import keras
import numpy as np
import tensorflow as tf

from nbkit import models

AUTO = tf.data.AUTOTUNE
GLOBAL_BATCH = PER_REPLICA_BATCH * acc.num_replicas


def decode(record):
    """A serialized test record to (uint8 image [size, size, 3], id), as notebook 05 reads it."""
    features = {"image": tf.io.FixedLenFeature([], tf.string), "id": tf.io.FixedLenFeature([], tf.string)}
    example = tf.io.parse_single_example(record, features)
    image = tf.io.decode_jpeg(example["image"], channels=3)
    return tf.reshape(image, [image_size, image_size, 3]), example["id"]


def tta_view(image, view):
    """View `view` of an image, as in notebook 05: 0 as it is, 1 flipped, 2 zoomed into its central 87.5%, 3 both."""
    if view >= 2:
        zoomed = tf.image.resize(tf.image.central_crop(image, 0.875), [image_size, image_size])
        image = tf.saturate_cast(tf.round(zoomed), tf.uint8)
    return tf.image.flip_left_right(image) if view % 2 else image


def predict_tta(model, split):
    """Class probabilities of every image of `split` (in file order) averaged over TTA views, and the ids."""
    records = tf.data.TFRecordDataset(split.files, split.compression, num_parallel_reads=AUTO)
    views = []
    for view in range(TTA):
        decoded = records.map(decode, num_parallel_calls=AUTO)
        images = decoded.map(lambda image, key, view=view: (tta_view(image, view), key))
        logits, ids = models.predict(model, images, GLOBAL_BATCH)  # every row once, on any number of hosts
        views.append(keras.ops.convert_to_numpy(keras.ops.softmax(logits)))
    return np.mean(views, axis=0), ids


loaded = []  # every model loaded and checked before any predicts: a damaged last package stops here
for folder in folders:
    model, _ = ensemble.load_package(folder, acc)
    loaded.append(model)
    print(f"loaded {model.name} from {folder}, checked its outputs against the manifest")
members = []
for folder, model in zip(folders, loaded):
    probabilities, test_ids = predict_tta(model, test)
    members.append(probabilities)
    print(f"predicted with {folder}")
probabilities = np.mean(members, axis=0)  # the ensemble
test_predictions = probabilities.argmax(axis=1)

# %% [markdown]
# ## Submit
# `submission.csv` (in the dataset's form, one row per test image) in the working folder, where
# Kaggle looks for it, the probabilities (each model's and the mean) and a picture of some
# predictions; they replace an earlier run's only together.

# %%
from nbkit import metrics
from nbkit.images import grids

written = metrics.write_submission(test_ids, test_predictions, dataset, outputs.staging / "submission.csv")
np.savez(
    outputs.staging / "test_probabilities.npz",
    ids=test_ids,
    members=np.stack(members),
    ensemble=probabilities,
)
print(f"wrote {len(test_ids)} rows to {written.name}, and test_probabilities.npz")
shown = next(iter(tf.data.TFRecordDataset(test.files, test.compression).map(decode).batch(20)))[0].numpy()
figure = grids.batch(shown, test_predictions[:20], dataset.classes, path=outputs.staging / "test_predictions.png")
print("published:", ", ".join(outputs.publish()))
