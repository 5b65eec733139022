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
# # Image classifier with PyTorch/XLA
#
# The classifier of notebook 02 (the flowers competition, or your converted data) in PyTorch, for the TPUs of Kaggle's image (torch 2.8 with
# torch_xla): the same competition TFRecords (read without TensorFlow), one process per TPU core
# started from the notebook, each training on its share of every batch, the gradients averaged over
# the cores, and the master saving the weights and writing `submission.csv` and `metrics.json`.
# Without torch_xla the same notebook trains on a GPU or the CPU and says so. CI runs it through
# torch_xla on the CPU (`PJRT_DEVICE=CPU`, one XLA device).
#
# `papermill notebooks/04_pytorch_xla.ipynb out/04.ipynb -p EPOCHS 12 -p PER_CORE_BATCH 32`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder holding tfrecords-jpeg-*/ (your converted data, or the flowers competition's); "auto": the flowers competition (Kaggle input, else a generated sample); "sample"
IMAGE_SIZE: int = 0  # size of the tfrecords-jpeg-<size>x<size> folder to read; 0: the smallest there (192 for flowers)
EPOCHS: int = 0  # training epochs; 0 means the profile's (smoke 8, full 12)
PER_CORE_BATCH: int = 16  # images per core per step (the global batch is this times the cores)
PROFILE: str = "auto"  # "auto" (smoke on CPU, full on TPU/GPU), "smoke" or "full"
DEVICE: str = "auto"  # "auto" (XLA if torch_xla imports, else CUDA, else CPU), "xla", "cuda" or "cpu"
SEED: int = 0  # seeds the weights, the shuffles and the augmentation
AUGMENT: str = "flips"  # training augmentation: "flips" or "standard" (+ zoom, rotation, colour), drawn as in notebook 02
TTA: int = 1  # test-time augmentation: views of each image averaged (1: none; 2: + flipped; 3: + zoomed; 4: + both)
PRECISION: str = "auto"  # "auto" (bfloat16 on a TPU, else float32), "float32" or "mixed_bfloat16" (torch.autocast)
OUTPUT_DIR: str = "auto"  # where plots, model.pt, metrics.json and submission.csv go; "auto": the working folder's classifier-torch/

# %% [markdown]
# ## Setup
# Parameters are checked first, then the device kind is chosen. The XLA runtime itself starts only
# in the worker processes: torch_xla refuses to start them once this process has used the device.

# %%
from nbkit import env, params, staging
from nbkit.images import augment
from nbkit.pytorch import runtime

params.check_parameters(globals())
params.check_choice("PROFILE", PROFILE, params.PROFILES)
for name, value in {"IMAGE_SIZE": IMAGE_SIZE, "EPOCHS": EPOCHS, "SEED": SEED}.items():
    params.check_int(name, value)
params.check_int("PER_CORE_BATCH", PER_CORE_BATCH, minimum=1)
params.check_choice("AUGMENT", AUGMENT, augment.SETS)
params.check_choice("TTA", TTA, range(1, 5))
working_dir = env.detect().working_dir
outputs = staging.start(working_dir / "classifier-torch" if OUTPUT_DIR == "auto" else OUTPUT_DIR)
print(outputs.describe())
acc = runtime.select(DEVICE)
print(acc.describe())
precision, line = runtime.precision(acc, PRECISION)
print(line)

# %% [markdown]
# ## Configuration
# The small CNN of notebook 02's smoke profile, trained from scratch. Each core takes
# `PER_CORE_BATCH` images per step, so the global batch and the peak learning rate grow with the
# number of cores (8 on a TPU v5e-8). Outputs are moved into `OUTPUT_DIR` only when the run ends.

# %%
from nbkit.images import recipe

profile = recipe.profile(PROFILE, acc.kind, "small_cnn", "none", EPOCHS)
print(
    f"profile={profile.name}: {profile.epochs} epochs, {PER_CORE_BATCH} images per core per step, "
    f"peak learning rate {profile.max_lr_per_replica:g} x cores"
)

# %% [markdown]
# ## Data
# The TFRecords and their description, read and checked as in notebook 02 (`nbkit.images.checks`
# needs no TensorFlow): every record once, here, so a corrupt file or an image of the wrong size
# stops now, with the file's name. Without the competition data, notebook 02's sample is generated.
# Training flips images exactly as notebook 02 does: the same images in the same epoch for the same seed.

# %%
from nbkit.competitions import flowers
from nbkit.images import checks, layout

data = flowers.locate_data(DATA_ROOT)
print(f"data: {data.reason}")
dataset = flowers.load_description(data.path)
print(f"dataset: {dataset.describe()}")
image_size = layout.choose_size(data.path, IMAGE_SIZE)
splits = checks.check_splits(layout.split_files(data.path, image_size), image_size, dataset.num_classes, keep_items=True)
print(f"{image_size}x{image_size} images: {checks.describe(splits)}")

# %%
import numpy as np

from nbkit.images import plots
from nbkit.pytorch import classifier

train_set = classifier.ImageRecords(splits["train"].items, image_size, recipe=AUGMENT, seed=SEED)
val_set = classifier.ImageRecords(splits["val"].items, image_size)
test_set = classifier.ImageRecords(splits["test"].items, image_size)
shown = np.stack([train_set.image(i) for i in range(20)])
figure = plots.batch(
    shown, [label for _, label in splits["train"].items[:20]], dataset.classes, path=outputs.staging / "batch.png"
)

# %% [markdown]
# ## Model
# Built once here; each core moves its own copy to its device, so all cores start from the same
# weights.

# %%
import torch

torch.manual_seed(SEED)
model = classifier.small_cnn(image_size, dataset.num_classes)
print(f"small_cnn: {sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## Train
# `train_on_core` runs once per core (`torch_xla.launch` with `start_method="fork"`, which can run a
# function defined in a notebook). Each core reads its share of the data (`DistributedSampler`),
# uploads it in the background (`MpDeviceLoader`), and steps with gradients averaged over the cores
# (`xm.optimizer_step`). The master prints one line per epoch, saves the weights, and hands back
# the history and the predictions.

# %% tags=["nbval-ignore-output"]
import copy


def train_on_core(index: int) -> dict:
    device = runtime.device(acc)
    runtime.master_print(acc, f"core {index} of {runtime.world_size(acc)}: {device}")
    core_model = copy.deepcopy(model).to(device)  # its own copy: on a TPU v3 two cores share a process
    history = classifier.fit(
        acc, core_model, train_set, val_set,
        profile=profile, per_core_batch=PER_CORE_BATCH, seed=SEED, precision=precision,
    )
    runtime.save(acc, core_model.state_dict(), outputs.staging / "model.pt")
    predict = lambda images, tag: classifier.predict_views(
        acc, core_model, images, views=TTA, batch_size=PER_CORE_BATCH, tag=tag, precision=precision
    )
    return {
        "history": history,
        "val_probabilities": predict(val_set, "val"),  # averaged over TTA views
        "test_probabilities": predict(test_set, "test"),
        "device": str(device),
        "cores": runtime.world_size(acc),
    }


result = runtime.launch(acc, train_on_core)

# %%
history = result["history"]
print(
    f"trained on {result['device']} x {result['cores']} core(s), global batch {result['cores'] * PER_CORE_BATCH}"
)
figure = plots.training_curves(history, path=outputs.staging / "training_curves.png")
figure = plots.learning_rate(history["learning_rate"], path=outputs.staging / "learning_rate.png")

# %% [markdown]
# ## Evaluate
# Confusion matrix, the competition's metric and macro F1 / precision / recall on the validation
# set (with `TTA` views averaged, as in notebook 02), and a batch titled OK or, in red, NO -> the true class.

# %%
from nbkit.images import metrics, submission

val_labels = np.array([label for _, label in splits["val"].items])
val_predictions = result["val_probabilities"].argmax(axis=1)
confusion, scores = metrics.of_predictions(val_labels, result["val_probabilities"], dataset.metric)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / dataset.num_classes}")
figure = plots.confusion(confusion, dataset.classes, scores, path=outputs.staging / "confusion_matrix.png")

# %%
shown = np.stack([val_set.image(i) for i in range(20)])
figure = plots.batch(shown, val_labels[:20], dataset.classes, val_predictions[:20], path=outputs.staging / "predictions.png")

# %% [markdown]
# ## The saved weights
# `model.pt` holds CPU tensors (the master moved them off the device), so it loads anywhere,
# here on this process's CPU, in the run's precision; it predicts what the cores predicted.

# %%
cpu_model = classifier.small_cnn(image_size, dataset.num_classes)
cpu_model.load_state_dict(runtime.load(outputs.staging / "model.pt"))
cpu_probabilities = classifier.predict_views(
    runtime.select("cpu"), cpu_model, val_set, views=TTA, batch_size=64, tag="check", precision=precision
)
same = classifier.same_outputs(cpu_probabilities, result["val_probabilities"], precision)
print(f"the saved weights predict the same on the CPU: {same}")

# %% [markdown]
# ## Predict and submit
# `submission.csv` has one row per test id, in the test files' order; `metrics.json` keeps the scores.

# %%
test_ids = [test_id for _, test_id in splits["test"].items]
written = submission.write(
    test_ids, result["test_probabilities"].argmax(axis=1), dataset, outputs.staging / "submission.csv"
)
metrics_file = metrics.write(
    {
        **scores,
        "epochs": profile.epochs,
        "per_core_batch": PER_CORE_BATCH,
        "cores": result["cores"],
        "global_batch": result["cores"] * PER_CORE_BATCH,
        "device": acc.runtime,
        "hardware": acc.hardware,
        "precision": precision,
        "model": "small_cnn",
        "image_size": image_size,
        "augment": AUGMENT,
        "tta": TTA,
        "test_rows": len(test_ids),
    },
    outputs.staging / "metrics.json",
)
print(f"wrote {len(test_ids)} rows to {written.name}, plus {metrics_file.name} and model.pt")

# %% tags=["nbval-ignore-output"]
print(metrics.describe(scores))
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
