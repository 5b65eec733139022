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
# # Flowers classifier with PyTorch/XLA
#
# The flowers classifier of notebook 02 in PyTorch, for the TPUs of Kaggle's image (torch 2.8 with
# torch_xla): the same competition TFRecords (read without TensorFlow), one process per TPU core
# started from the notebook, each training on its share of every batch, the gradients averaged over
# the cores, and the master saving the weights and writing `submission.csv` and `metrics.json`.
# Without torch_xla the same notebook trains on a GPU or the CPU and says so. CI runs it through
# torch_xla on the CPU (`PJRT_DEVICE=CPU`, one XLA device).
#
# `papermill notebooks/04_pytorch_xla.ipynb out/04.ipynb -p EPOCHS 12 -p PER_CORE_BATCH 32`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder holding tfrecords-jpeg-*/; "auto" (Kaggle input, else a generated sample) or "sample"
IMAGE_SIZE: int = 192  # image size of the folder to read: 192, 224, 331 or 512
EPOCHS: int = 0  # training epochs; 0 means the profile's default (smoke 8, full 12)
PER_CORE_BATCH: int = 0  # images per core per step; 0 means the profile's default (16)
PROFILE: str = "auto"  # "auto" (smoke on CPU, full on TPU/GPU), "smoke" or "full"
DEVICE: str = "auto"  # "auto" (XLA if torch_xla imports, else CUDA, else CPU), "xla", "cuda" or "cpu"
SEED: int = 0  # seeds the weights, the shuffles and the augmentation
PRECISION: str = "auto"  # "auto" (bfloat16 on a TPU, else float32), "float32" or "mixed_bfloat16" (torch.autocast)
OUTPUT_DIR: str = "auto"  # where plots, model.pt, metrics.json and submission.csv go; "auto": the working folder

# %% [markdown]
# ## Setup
# Parameters are checked first, then the device kind is chosen. The XLA runtime itself starts only
# in the worker processes: torch_xla refuses to start them once this process has used the device.

# %%
from nbkit import params
from nbkit.flowers import layout
from nbkit.pytorch import runtime

params.check_names(globals())
params.check_choice("PROFILE", PROFILE, params.PROFILES)
params.check_choice("IMAGE_SIZE", IMAGE_SIZE, layout.IMAGE_SIZES)
for name, value in {"EPOCHS": EPOCHS, "PER_CORE_BATCH": PER_CORE_BATCH, "SEED": SEED}.items():
    params.check_int(name, value)
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
from nbkit import atomic, env
from nbkit.flowers import recipe

config = recipe.profile(params.resolve_profile(PROFILE, acc.kind), EPOCHS, PER_CORE_BATCH, "small_cnn", "none")
working_dir = env.detect().working_dir
outputs = atomic.RunOutputs(working_dir / "flowers-torch" if OUTPUT_DIR == "auto" else OUTPUT_DIR)
print(outputs.describe())
print(
    f"profile={config.profile}: {config.epochs} epochs, {config.per_replica_batch} images per core per step, "
    f"peak learning rate {config.max_lr_per_replica:g} x cores"
)

# %% [markdown]
# ## Data
# The competition's TFRecords, read and checked as in notebook 02 (`nbkit.flowers.checks` needs no
# TensorFlow): every record once, here, so a corrupt file or the wrong `IMAGE_SIZE` stops now, with
# the file's name. Without the competition data, notebook 02's sample is generated. Training flips
# images exactly as notebook 02 does: the same images in the same epoch for the same seed.

# %%
from nbkit.flowers import checks, source

data = source.locate_data(DATA_ROOT)
print(f"data: {data.reason}")
splits = checks.checked_splits(data.path, IMAGE_SIZE, keep_items=True)
print(checks.describe(splits))

# %%
import numpy as np

from nbkit.flowers import plots
from nbkit.pytorch import flowers as torch_flowers

train_set = torch_flowers.FlowerImages(splits["train"].items, IMAGE_SIZE, augment=True, seed=SEED)
val_set = torch_flowers.FlowerImages(splits["val"].items, IMAGE_SIZE)
test_set = torch_flowers.FlowerImages(splits["test"].items, IMAGE_SIZE)
shown = np.stack([train_set.image(i) for i in range(20)])
figure = plots.batch(
    shown, [label for _, label in splits["train"].items[:20]], layout.CLASSES, path=outputs / "batch.png"
)

# %% [markdown]
# ## Model
# Built once here; each core moves its own copy to its device, so all cores start from the same
# weights.

# %%
import torch

torch.manual_seed(SEED)
model = torch_flowers.small_cnn(IMAGE_SIZE, len(layout.CLASSES))
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
    history = torch_flowers.fit(acc, core_model, train_set, val_set, config, device, seed=SEED, precision=precision)
    runtime.save(acc, core_model.state_dict(), outputs / "model.pt")
    predict = lambda dataset, tag: torch_flowers.predict(
        acc, core_model, dataset, config.per_replica_batch, device, tag, precision=precision
    )
    return {
        "history": history,
        "val_logits": predict(val_set, "val"),
        "test_logits": predict(test_set, "test"),
        "device": str(device),
        "cores": runtime.world_size(acc),
    }


result = runtime.launch(acc, train_on_core)

# %%
history = result["history"]
print(
    f"trained on {result['device']} x {result['cores']} core(s), global batch {result['cores'] * config.per_replica_batch}"
)
figure = plots.training_curves(history, path=outputs / "training_curves.png")
figure = plots.learning_rate(history["learning_rate"], path=outputs / "learning_rate.png")

# %% [markdown]
# ## Evaluate
# Confusion matrix and macro F1 / precision / recall on the validation set, and a batch titled OK
# or, in red, NO -> the true class.

# %%
from nbkit.flowers import evaluate

val_labels = np.array([label for _, label in splits["val"].items])
val_predictions = result["val_logits"].argmax(axis=1)
confusion = evaluate.confusion_matrix(val_labels, val_predictions, len(layout.CLASSES))
scores = evaluate.scores(confusion)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / len(layout.CLASSES)}")
figure = plots.confusion(confusion, layout.CLASSES, scores, path=outputs / "confusion_matrix.png")

# %%
shown = np.stack([val_set.image(i) for i in range(20)])
figure = plots.batch(shown, val_labels[:20], layout.CLASSES, val_predictions[:20], path=outputs / "predictions.png")

# %% [markdown]
# ## The saved weights
# `model.pt` holds CPU tensors (the master moved them off the device), so it loads anywhere,
# here on this process's CPU, in the run's precision; it predicts what the cores predicted.

# %%
cpu_model = torch_flowers.small_cnn(IMAGE_SIZE, len(layout.CLASSES))
cpu_model.load_state_dict(runtime.load(outputs / "model.pt"))
cpu_logits = torch_flowers.predict(
    runtime.select("cpu"), cpu_model, val_set, 64, torch.device("cpu"), "check", precision=precision
)
same = torch_flowers.same_logits(cpu_logits, result["val_logits"], precision)
print(f"the saved weights predict the same on the CPU: {same}")

# %% [markdown]
# ## Predict and submit
# `submission.csv` has one row per test id, in the test files' order; `metrics.json` keeps the scores.

# %%
test_ids = [test_id for _, test_id in splits["test"].items]
submission = evaluate.write_submission(test_ids, result["test_logits"].argmax(axis=1), outputs / "submission.csv")
metrics = evaluate.write_metrics(
    {
        **scores,
        "epochs": config.epochs,
        "per_core_batch": config.per_replica_batch,
        "cores": result["cores"],
        "global_batch": result["cores"] * config.per_replica_batch,
        "device": acc.runtime,
        "hardware": acc.device_kind,
        "precision": precision,
        "model": "small_cnn",
        "image_size": IMAGE_SIZE,
        "test_rows": len(test_ids),
    },
    outputs / "metrics.json",
)
print(f"wrote {len(test_ids)} rows to {submission.name}, plus {metrics.name} and model.pt")

# %% tags=["nbval-ignore-output"]
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
