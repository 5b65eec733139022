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
# # Infer on GPU: predict with a model package, internet off
#
# The second half of `05_train_on_tpu`: attach the dataset made from its model package, pick a GPU
# (or none) and run. The package's manifest is checked against the test data (image size, classes,
# label values, the submission's columns) and the loaded model against the outputs recorded when it
# was saved, so a wrong or damaged package stops with a message instead of a silently bad
# `submission.csv`. Nothing is downloaded. A model trained on a TPU with the JAX backend predicts
# here with TensorFlow on the GPU.
#
# `papermill notebooks/06_infer_on_gpu.ipynb out/06.ipynb -p PACKAGE out/train-on-tpu/model-package`

# %% tags=["parameters"]
PACKAGE: str = "auto"  # model package folder, or its Kaggle Models handle "owner/model/keras/variation"; "auto": the attached one, else 05's output
DATA_ROOT: str = "auto"  # folder holding tfrecords-jpeg-*/ (your converted data, or the flowers competition's); "auto": the flowers competition (Kaggle input, else a generated sample); "sample"
IMAGE_SIZE: int = 0  # image size of the test files to read; 0 means the model's (from its manifest)
PER_REPLICA_BATCH: int = 64  # images per replica per prediction step
BACKEND: str = "auto"  # Keras backend: "auto" (TensorFlow on a GPU or CPU), "tensorflow" or "jax"
OUTPUT_DIR: str = "auto"  # where submission.csv goes; "auto": the working folder (/kaggle/working on Kaggle)

# %% [markdown]
# ## Setup
# The GPU if there is one, else the CPU: `accel.setup` says which. The output folder is taken first,
# so one that cannot be written stops here, before anything is predicted.

# %%
from nbkit import accel, env, params, staging

params.check_parameters(globals())
params.check_choice("BACKEND", BACKEND, params.BACKENDS)
params.check_int("IMAGE_SIZE", IMAGE_SIZE)
params.check_int("PER_REPLICA_BATCH", PER_REPLICA_BATCH, minimum=1)

environment = env.detect()
outputs = staging.start(environment.working_dir if OUTPUT_DIR == "auto" else OUTPUT_DIR)
acc = accel.setup(BACKEND)
print(acc.describe())

# %% [markdown]
# ## The model package
# What the model was trained with, and on what.

# %% tags=["nbval-ignore-output"]
from nbkit.handoff import package

kaggle_input = environment.input_dir if environment.platform == "kaggle" else None
folder = package.find_package(PACKAGE, environment.working_dir / "train-on-tpu" / "model-package", kaggle_input)
manifest = package.read_manifest(folder)
trained, metric = manifest["trained_with"], manifest["dataset"]["metric"]
print(
    f"{folder}: {manifest['model_name']}, {manifest['image_size']}x{manifest['image_size']}, "
    f"{len(manifest['dataset']['classes'])} classes, trained with Keras {trained['keras']} on "
    f"{trained['keras_backend']}; validation {metric} {manifest['metrics'][metric]:.3f}"
)

# %% [markdown]
# ## Test data
# The test files are read once and checked against the manifest before anything is predicted.

# %%
from nbkit.competitions import flowers
from nbkit.images import checks, description

data = flowers.locate_data(DATA_ROOT, environment=environment)
print(f"data: {data.reason}")
dataset = description.load(data.path)
image_size = IMAGE_SIZE or manifest["image_size"]
package.check_compatible(manifest, image_size, dataset)
test = checks.check_splits(data.path, image_size, dataset.num_classes, names=["test"])["test"]
print(f"{test.count} test images in {len(test.files)} files")

# %% [markdown]
# ## Load and predict
# The model loads with this machine's Keras backend; its check images must give the logits
# recorded in the manifest.

# %%
from nbkit.images import predict

model, manifest = package.load_package(folder, acc)
print(f"loaded {model.name} and checked its outputs against the manifest")
test_logits, test_ids = predict.predict_in_order(
    model, test.files, image_size, labeled=False, global_batch=acc.global_batch(PER_REPLICA_BATCH)
)
test_predictions = test_logits.argmax(axis=1)

# %% [markdown]
# ## Submit
# `submission.csv` (in the dataset's form, one row per test image) in the working folder, where
# Kaggle looks for it, with a picture of some predictions; both replace an earlier run's only together.

# %%
from nbkit.images import pipeline, plots, submission

written = submission.write(test_ids, test_predictions, dataset, outputs.staging / "submission.csv")
print(f"wrote {len(test_ids)} rows to {written.name}")
shown = next(iter(pipeline.images_in_order(test.files, image_size, labeled=False, global_batch=20)[0])).numpy()
figure = plots.batch(shown, test_predictions[:20], dataset.classes, path=outputs.staging / "test_predictions.png")
print("published:", ", ".join(outputs.publish()))
