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
# The classifier of notebook 02 (the flowers competition, or your converted data) in plain PyTorch,
# for the TPUs of Kaggle's image (torch 2.8 with torch_xla): one process per TPU core, each training
# on its share of every batch, the gradients averaged over the cores. Without torch_xla the same
# notebook trains on a GPU or the CPU and says so.
#
# The machine learning is in this notebook, to edit: the dataset and `augment` (Data), `build_model`
# (Model), `lrfn` (Schedule), `train_on_core` (Train) and the test-time views (Evaluate).
# `nbkit` does the plumbing: the device, finding and checking the data, the outputs, the submission.
#
# `papermill notebooks/04_pytorch_xla.ipynb out/04.ipynb -p EPOCHS 12 -p PER_CORE_BATCH 32`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # folder of tfrecords-jpeg-*/; "auto": the flowers competition (Kaggle input, else "sample")
IMAGE_SIZE: int = 0  # size of the tfrecords-jpeg-<size>x<size> folder to read; 0: the smallest there (192 for flowers)
EPOCHS: int = 0  # training epochs; 0: the profile's (smoke 8, full 12)
PER_CORE_BATCH: int = 16  # images per core per step (the global batch is this times the cores)
PROFILE: str = "auto"  # "smoke" (seconds an epoch on a CPU), "full", or "auto": smoke on a CPU, full on a TPU or GPU
DEVICE: str = "auto"  # "auto" (XLA if torch_xla imports, else CUDA, else CPU), "xla", "cuda" or "cpu"
SEED: int = 0  # seeds the weights, the shuffles and the augmentation
AUGMENT: str = "flips"  # training augmentation: "none", "flips" (left-right) or "standard" (+ zoom, rotation, colour)
TTA: int = 1  # test-time views averaged (1: none; 2: + flipped; 3: + zoomed; 4: + both); 1 if AUGMENT "none"
PRECISION: str = "auto"  # "auto" (bfloat16 on a TPU or GPU of capability 8+, else float32), "float32", "mixed_bfloat16"
OUTPUT_DIR: str = "auto"  # plots, model.pt, metrics and submission.csv; "auto": the working folder's classifier-torch/

# %% [markdown]
# ## Setup
# The parameters are checked first, then the device is chosen. The XLA runtime itself starts only
# in the per-core processes: torch_xla refuses to start them once this process has used the device.

# %%
from nbkit import atomic, env, params, staging
from nbkit.errors import ParameterError
from nbkit.pytorch import runtime

params.check_parameters(globals(), PER_CORE_BATCH=1, AUGMENT=("none", "flips", "standard"), TTA=range(1, 5))
if AUGMENT == "none" and TTA > 1:  # TTA's second view is the image mirrored (VIEWS): not for digits or documents
    raise ParameterError(
        f"TTA={TTA} with AUGMENT='none': test-time augmentation's second view is the image mirrored, but "
        "AUGMENT='none' says a mirrored picture shows something else here (digits, documents). Use TTA=1, or "
        "AUGMENT='flips' if a mirrored picture keeps its class."
    )
working_dir = env.detect().working_dir
outputs = staging.start(working_dir / "classifier-torch" if OUTPUT_DIR == "auto" else OUTPUT_DIR)
print(outputs.describe())
acc = runtime.select(DEVICE)
print(acc.describe())
precision, line = runtime.precision(acc, PRECISION)
print(line)
profile = PROFILE if PROFILE != "auto" else ("smoke" if acc.kind == "cpu" else "full")

# %% [markdown]
# ## Configuration
# The smoke profile checks the whole notebook in seconds on a CPU; the full one trains longer, with the
# flower starters' gentler peak. The peak learning rate is per core: 8 cores take a global batch 8
# times larger, so steps 8 times larger (the usual linear scaling).

# %%
if profile == "smoke":
    EPOCHS, MAX_LR_PER_CORE, RAMP_EPOCHS = EPOCHS or 8, 2.5e-4, 2
else:
    EPOCHS, MAX_LR_PER_CORE, RAMP_EPOCHS = EPOCHS or 12, 5e-5, 5
print(
    f"profile={profile}: {EPOCHS} epochs, {PER_CORE_BATCH} images per core per step, "
    f"peak learning rate {MAX_LR_PER_CORE:g} x cores"
)

# %% [markdown]
# ## Data
# The TFRecords and their description are read and checked before anything trains: every record
# once, here, so a corrupt file or an image of the wrong size stops now, with the file's name.
# Without the competition data, notebook 02's sample is generated.

# %%
from nbkit.images import checks, flowers, layout

data = flowers.locate_data(DATA_ROOT)
print(f"data: {data.reason}")
dataset = flowers.load_description(data.path)
print(f"dataset: {dataset.describe()}")
image_size = layout.choose_size(data.path, IMAGE_SIZE)
splits = checks.check_splits(
    layout.split_files(data.path, image_size), image_size, dataset.num_classes, keep_items=True
)
print(f"{image_size}x{image_size} images: {checks.describe(splits)}")

# %% [markdown]
# ### Input pipeline
# Each split is a list of (JPEG bytes, class) pairs (for the test split, (JPEG bytes, id)). The
# dataset keeps only the compressed bytes and decodes an image when a batch needs it, so the data
# stays small in memory. Images stay uint8 on their way to the device (a quarter of the bytes of
# float32); the model scales them.
#
# `augment` changes each training image at random every time it is read. Flips suit flowers, whose
# left and right look alike; `"standard"` adds zoom, a small rotation and colour changes. Switch it off
# (`AUGMENT="none"`) where a flip changes the meaning: digits, letters, documents, X-rays.

# %%
import torch
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.transforms import v2

AUGMENTATIONS = {
    "none": [v2.Identity()],  # the images as they are
    "flips": [v2.RandomHorizontalFlip()],
    "standard": [
        v2.RandomHorizontalFlip(),
        v2.RandomResizedCrop(image_size, scale=(0.8, 1.0), antialias=True),  # zoom in on 80-100% of the image
        v2.RandomRotation(15),
        v2.ColorJitter(brightness=0.15, contrast=0.15, saturation=0.15),
    ],
}
augmentation = v2.Compose(AUGMENTATIONS[AUGMENT])


def augment(image):
    """One training image (uint8 [3, size, size]), changed at random."""
    return augmentation(image)


class TFRecordImages(torch.utils.data.Dataset):
    """(image, class) items, uint8 [3, size, size]; for the test split (image, position), the ids' order."""

    def __init__(self, items, transform=None):
        self.items, self.transform = items, transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        jpeg, key = self.items[index]
        image = decode_jpeg(torch.frombuffer(bytearray(jpeg), dtype=torch.uint8), mode=ImageReadMode.RGB)
        if self.transform:
            image = self.transform(image)
        return image, (key if isinstance(key, int) else index)


train_set = TFRecordImages(splits["train"].items, transform=augment)
val_set = TFRecordImages(splits["val"].items)
test_set = TFRecordImages(splits["test"].items)

# %%
import numpy as np

from nbkit import plots
from nbkit.images import grids

torch.manual_seed(SEED)
shown = np.stack([train_set[i][0].permute(1, 2, 0).numpy() for i in range(20)])  # as training sees them
figure = grids.batch(
    shown, [label for _, label in splits["train"].items[:20]], dataset.classes, path=outputs.staging / "batch.png"
)

# %% [markdown]
# ## Model
# A small CNN trained from scratch: it pools the images to about 48x48, then three convolution blocks
# (16, 32, 64 filters) and a dense head. Small enough for the smoke run on a CPU; for real scores
# swap in a pretrained backbone (e.g. `timm.create_model("efficientnet_b0", pretrained=True,
# num_classes=dataset.num_classes)`, in Kaggle's TPU image) and a lower learning rate.
#
# Built once here, with the seed: each core moves a copy to its device, so all start from the same weights.

# %%
from torch import nn


class Rescale(nn.Module):
    def forward(self, images):  # uint8 0-255 in, float 0-1 out
        return images.float() / 255.0


def build_model():
    downsample = max(1, image_size // 48)
    size = image_size // downsample // 8  # after three 2x2 max-pools
    return nn.Sequential(
        Rescale(),
        nn.AvgPool2d(downsample),
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        # the head: features -> class logits (the loss applies the softmax)
        nn.Flatten(), nn.Linear(64 * size * size, 128), nn.ReLU(), nn.Linear(128, dataset.num_classes),
    )


torch.manual_seed(SEED)
model = build_model()
runtime.check_outputs(model, val_set[0][0], dataset.num_classes)  # one logit per class, said before any training
print(f"build_model: {sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## Schedule
# The flower starters' learning-rate schedule, per epoch: a linear ramp from 1e-5 up to the peak
# (`MAX_LR_PER_CORE` x cores), which keeps the first steps of random weights from overshooting, then
# an exponential decay by 0.8 each epoch towards 1e-5. Plotted here for one core.

# %%
LR_START, LR_MIN, LR_DECAY = 1e-5, 1e-5, 0.8


def lrfn(epoch, cores=1):
    max_lr = MAX_LR_PER_CORE * cores
    if epoch < RAMP_EPOCHS:
        return LR_START + (max_lr - LR_START) * epoch / RAMP_EPOCHS
    return LR_MIN + (max_lr - LR_MIN) * LR_DECAY ** (epoch - RAMP_EPOCHS)


figure = plots.learning_rate([lrfn(epoch) for epoch in range(EPOCHS)])

# %% [markdown]
# ## Train
# `train_on_core` runs once per core (`torch_xla.launch` with `start_method="fork"`, which can run a
# function defined in a notebook). Each core reads its share of the data (`DistributedSampler`: a new
# shuffle each epoch, the same on every core), uploads it in the background (`pl.MpDeviceLoader` on
# XLA), and steps with the gradients averaged over the cores (`xm.optimizer_step`). Adam with
# cross-entropy; the loss in float32 whatever precision the layers compute in. The master prints one
# line per epoch, saves the weights, and hands back the history and the predictions.

# %% tags=["nbval-ignore-output"]
import copy
import os
import time

import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler

from nbkit.errors import ParameterError


def get_loader(dataset, shuffle=False, drop_last=False):
    """(sampler, batches on this core's device) of this core's share of `dataset`."""
    cores = runtime.world_size(acc)
    sampler = DistributedSampler(
        dataset, num_replicas=cores, rank=runtime.ordinal(acc), shuffle=shuffle, seed=SEED, drop_last=drop_last
    )
    # Decoding processes: the host's CPUs shared by the cores, up to 4 (none where the CPU itself trains).
    workers = 0 if acc.kind == "cpu" else max(0, min(4, os.cpu_count() // cores - 1))
    loader = DataLoader(dataset, batch_size=PER_CORE_BATCH, sampler=sampler, drop_last=drop_last, num_workers=workers)
    return sampler, runtime.device_loader(acc, loader, runtime.device(acc))  # pl.MpDeviceLoader on XLA


def train_one_epoch(core_model, batches, optimizer, epoch):
    """One pass over this core's batches; the loss and accuracy over every core's images."""
    core_model.train()
    losses, hits, seen = [], [], 0
    for images, labels in batches:
        optimizer.zero_grad()
        with runtime.autocast(acc, precision):
            logits = core_model(images).float()
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        runtime.optimizer_step(acc, optimizer)  # xm.optimizer_step on XLA: averages the gradients over the cores
        # Summed once per epoch: reading a number every step would wait for each XLA step.
        losses.append(loss.detach() * len(labels))
        hits.append((logits.argmax(1) == labels).sum())
        seen += len(labels)
    mine = (float(torch.stack(losses).sum()), int(torch.stack(hits).sum()), seen)
    loss_sum, correct, total = runtime.mesh_reduce(
        acc, f"train-{epoch}", mine, lambda rows: [sum(column) for column in zip(*rows)]
    )
    return loss_sum / total, correct / total


def predict(core_model, dataset, tag, view=lambda images: images):
    """Logits of every item of `dataset`, in its order, on every core (each predicts its share of `view(images)`)."""
    sampler, batches = get_loader(dataset)
    core_model.eval()
    with torch.no_grad(), runtime.autocast(acc, precision):
        logits = torch.cat([core_model(view(images)).float() for images, _ in batches]).cpu().numpy()
    ordered = np.zeros((len(dataset), logits.shape[1]), np.float32)
    for positions, values in runtime.mesh_reduce(acc, tag, (list(sampler), logits), list):
        ordered[positions] = values  # the sampler pads with repeats: they rewrite the same rows
    return ordered


def train_on_core(index):
    torch.manual_seed(SEED + index)  # each core draws its own augmentations
    device, cores = runtime.device(acc), runtime.world_size(acc)
    runtime.master_print(acc, f"core {index} of {cores}: {device}")
    if PER_CORE_BATCH * cores > len(train_set):
        raise ParameterError(
            f"PER_CORE_BATCH={PER_CORE_BATCH} x {cores} cores is more than the {len(train_set)} training images: "
            f"use PER_CORE_BATCH={len(train_set) // cores} or less."
        )
    core_model = copy.deepcopy(model).to(device)  # its own copy: on a TPU v3 two cores share a process
    optimizer = torch.optim.Adam(core_model.parameters(), lr=lrfn(0, cores))
    sampler, batches = get_loader(train_set, shuffle=True, drop_last=True)
    val_labels = torch.tensor([label for _, label in val_set.items])
    history = {name: [] for name in ("loss", "accuracy", "val_loss", "val_accuracy", "learning_rate")}
    for epoch in range(EPOCHS):
        start = time.perf_counter()
        sampler.set_epoch(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lrfn(epoch, cores)
        loss, accuracy = train_one_epoch(core_model, batches, optimizer, epoch)
        val_logits = torch.from_numpy(predict(core_model, val_set, f"val-{epoch}"))
        val_loss = float(F.cross_entropy(val_logits, val_labels))
        val_accuracy = float((val_logits.argmax(1) == val_labels).float().mean())
        for name, value in zip(history, (loss, accuracy, val_loss, val_accuracy, lrfn(epoch, cores))):
            history[name].append(value)
        summary = ", ".join(f"{name} {values[-1]:.3g}" for name, values in history.items())
        runtime.master_print(acc, f"epoch {epoch + 1}/{EPOCHS}: {summary} ({time.perf_counter() - start:.1f} s)")
    runtime.save(acc, core_model.state_dict(), outputs.staging / "model.pt")
    return {
        "history": history,
        "val_logits": val_logits.numpy(),  # the last epoch's, for the check of model.pt below
        "val_probabilities": predict_with_tta(core_model, val_set, "val"),
        "test_probabilities": predict_with_tta(core_model, test_set, "test"),
        "device": str(device),
        "cores": cores,
    }


# %% [markdown]
# ### Test-time augmentation
# Augment, predict, average: the class probabilities of the first `TTA` views of each image. A
# flipped flower is still the same flower, so averaging smooths out the model's quirks; drop the
# flipped views where a flip changes the class.


# %%
def zoomed(images):  # the central 87.5%, scaled back up
    size = images.shape[-1]
    margin = size // 16
    return F.interpolate(images[..., margin:-margin, margin:-margin].float(), size=(size, size), mode="bilinear")


VIEWS = [lambda images: images, lambda images: images.flip(-1), zoomed, lambda images: zoomed(images.flip(-1))]


def predict_with_tta(core_model, dataset, tag):
    views = [predict(core_model, dataset, f"{tag}-{i}", view) for i, view in enumerate(VIEWS[:TTA])]
    return np.mean([torch.softmax(torch.from_numpy(logits), dim=1).numpy() for logits in views], axis=0)


# %% tags=["nbval-ignore-output"]
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
# set (with `TTA` views averaged), and a batch titled OK or, in red, NO -> the true class.

# %%
from nbkit import metrics

val_labels = np.array([label for _, label in splits["val"].items])
val_predictions = result["val_probabilities"].argmax(axis=1)
confusion, scores = metrics.of_predictions(val_labels, result["val_probabilities"], dataset.metric)
print(f"learned (validation accuracy above 3x chance): {scores['accuracy'] > 3 / dataset.num_classes}")
figure = plots.confusion(confusion, dataset.classes, scores, path=outputs.staging / "confusion_matrix.png")

# %%
shown = np.stack([val_set[i][0].permute(1, 2, 0).numpy() for i in range(20)])
figure = grids.batch(
    shown, val_labels[:20], dataset.classes, val_predictions[:20], path=outputs.staging / "predictions.png"
)

# %% [markdown]
# ## The saved weights
# `model.pt` holds CPU tensors (the master moved them off the device), so it loads anywhere into
# `build_model()`: here on this process's CPU, in the run's precision. Its logits must match the
# cores' (to float32 round-off; in bfloat16, with 8 significant bits, within 5% of the largest).

# %%
cpu_model = build_model()
cpu_model.load_state_dict(runtime.load(outputs.staging / "model.pt"))
cpu_model.eval()
with torch.no_grad(), runtime.autocast(runtime.select("cpu"), precision):
    cpu_logits = torch.cat([cpu_model(images).float() for images, _ in DataLoader(val_set, batch_size=64)]).numpy()
tolerance = (5e-2 if precision == "mixed_bfloat16" else 1e-4) * max(1.0, float(np.abs(result["val_logits"]).max()))
same = bool(np.abs(cpu_logits - result["val_logits"]).max() <= tolerance)
print(f"the saved weights predict the same on the CPU: {same}")

# %% [markdown]
# ## Predict and submit
# `submission.csv` has one row per test id, in the test files' order; `metrics.json` keeps the scores.

# %%
test_ids = [test_id for _, test_id in splits["test"].items]
written = metrics.write_submission(
    test_ids, result["test_probabilities"].argmax(axis=1), dataset, outputs.staging / "submission.csv"
)
metrics_file = atomic.write_json(
    {
        **scores,
        "epochs": EPOCHS,
        "per_core_batch": PER_CORE_BATCH,
        "cores": result["cores"],
        "global_batch": result["cores"] * PER_CORE_BATCH,
        "device": acc.runtime,
        "hardware": acc.hardware,
        "precision": precision,
        "model": "small_cnn",
        "parameters": sum(p.numel() for p in model.parameters()),
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
