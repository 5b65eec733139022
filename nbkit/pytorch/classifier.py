"""The image classifier of notebook 02 in PyTorch: images from the kit's TFRecords, the smoke
profile's small CNN, and the training and prediction loops, written once for XLA, CUDA and the CPU
(see `nbkit.pytorch.runtime`).

The records come from `nbkit.images.checks` (no TensorFlow); JPEGs are decoded with Pillow when a
batch needs them, so only the compressed bytes stay in memory. Augmentation is notebook 02's:
`nbkit.images.augment.flips`, the same images flipped in the same epoch for the same seed.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from nbkit import batching
from nbkit.errors import DataError
from nbkit.images import augment
from nbkit.pytorch import runtime
from nbkit.pytorch.runtime import TorchAccelerator


class ImageRecords:
    """A map-style dataset of (uint8 image [3, size, size], class) items, or (image, position) for
    test items, from (JPEG bytes, class or id) pairs in file order. With a `recipe` (a key of
    `nbkit.images.augment.SETS`), each image augmented as notebook 02 augments it for (seed, epoch,
    its position)."""

    def __init__(
        self, items: Sequence[tuple[bytes, Any]], image_size: int, recipe: str | None = None, seed: int = 0
    ) -> None:
        self.items, self.image_size, self.recipe, self.seed = items, image_size, recipe, seed
        self.labeled = bool(items) and isinstance(items[0][1], int)
        self.epoch = 0
        self.view_index = 0  # a test-time view (`augment.VIEWS`) of unaugmented images

    def set_epoch(self, epoch: int) -> None:
        """Augment differently in each epoch (call it with the sampler's)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.items)

    def image(self, index: int) -> Any:
        """The decoded (and, if asked, augmented) uint8 [size, size, 3] array."""
        import numpy as np
        from PIL import Image

        jpeg = self.items[index][0]
        image = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
        if image.shape != (self.image_size, self.image_size, 3):
            raise DataError(
                f"item {index} is {image.shape[1]}x{image.shape[0]}, not {self.image_size}x{self.image_size}: "
                "every image in a size folder must have its size: convert the pictures again."
            )
        if self.recipe:
            return augment.apply(image, self.seed, self.epoch, index, self.recipe)
        return augment.view(image, self.view_index) if self.view_index else image

    def seen_as(self, view_index: int) -> ImageRecords:
        """The same items, as test-time view `view_index` of `augment.VIEWS`."""
        copy = ImageRecords(self.items, self.image_size)
        copy.view_index = view_index
        return copy

    def __getitem__(self, index: int) -> tuple[Any, int]:
        import torch

        image = torch.from_numpy(self.image(index).transpose(2, 0, 1).copy())  # channels first
        return image, (self.items[index][1] if self.labeled else index)


def small_cnn(image_size: int, num_classes: int, filters: Sequence[int] = (16, 32, 64), dense: int = 128) -> Any:
    """The smoke profile's CNN of the Keras notebooks in PyTorch: takes uint8 images [N, 3, H, W],
    pools them to about 48x48, conv-ReLU-pool blocks, a dense layer, logits."""
    from torch import nn

    class Rescale(nn.Module):  # uint8 in: a quarter of the bytes to send to the device
        def forward(self, images: Any) -> Any:
            return images.float() / 255.0

    downsample = max(1, image_size // 48)
    layers: list[Any] = [Rescale(), nn.AvgPool2d(downsample)]
    channels, size = 3, image_size // downsample
    for width in filters:
        layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        channels, size = width, size // 2
    layers += [nn.Flatten(), nn.Linear(channels * size * size, dense), nn.ReLU(), nn.Linear(dense, num_classes)]
    return nn.Sequential(*layers)


def batches(
    acc: TorchAccelerator,
    dataset: Any,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    drop_last: bool = False,
    workers: int = 0,
) -> tuple[Any, Any]:
    """(sampler, device loader): this replica's share of `dataset` in batches of `batch_size`, on the device."""
    from torch.utils.data import DataLoader

    sampler = runtime.sampler(acc, dataset, shuffle=shuffle, seed=seed, drop_last=drop_last)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, num_workers=workers)
    return sampler, runtime.device_loader(acc, loader, runtime.device(acc))


def train_epoch(
    acc: TorchAccelerator, model: Any, device_batches: Any, optimizer: Any, epoch: int, precision: str = "float32"
) -> dict[str, float]:
    """One pass over `device_batches` (`precision`: see `runtime.precision`); returns loss and accuracy
    over all replicas' images."""
    import torch
    import torch.nn.functional as F

    model.train()
    losses, hits, count = [], [], 0
    for images, labels in device_batches:
        optimizer.zero_grad()
        with runtime.autocast(acc, precision):
            logits = model(images).float()  # the loss in float32, whatever the layers computed in
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        runtime.optimizer_step(acc, optimizer)
        # Kept on the device and summed once per epoch: reading a number every step would wait for
        # each XLA step, and a running sum would make the first step's graph differ from the others.
        losses.append(loss.detach() * len(labels))
        hits.append((logits.argmax(1) == labels).sum())
        count += len(labels)
    local = (float(torch.stack(losses).sum()), int(torch.stack(hits).sum()), count) if losses else (0.0, 0, 0)
    total_loss, total_correct, total = runtime.mesh_reduce(acc, f"train-{epoch}", local, _sum_columns)
    return {"loss": total_loss / max(1, total), "accuracy": total_correct / max(1, total)}


def fit(
    acc: TorchAccelerator,
    model: Any,
    train_set: ImageRecords,
    val_set: ImageRecords,
    *,
    profile: Any,
    per_core_batch: int,
    seed: int = 0,
    precision: str = "float32",
) -> dict[str, list[float]]:
    """Train `model` (already on `runtime.device(acc)`) for `profile.epochs` (a `recipe.Profile`) with Adam and
    the profile's schedule, its maximum scaled by the number of cores, in `precision` (see
    `runtime.precision`); the master prints one line per epoch. Returns the history: loss, accuracy,
    val_loss, val_accuracy, learning_rate."""
    import time

    import numpy as np
    import torch

    cores = runtime.world_size(acc)
    counts = {"train": len(train_set), "val": len(val_set)}
    item_bytes = train_set.image_size**2 * 3
    batching.check_batch(per_core_batch, cores, item_bytes, counts, parameter="PER_CORE_BATCH")
    schedule = profile.schedule(cores)
    workers = loader_workers(acc)
    sampler, train_batches = batches(
        acc, train_set, per_core_batch, shuffle=True, seed=seed, drop_last=True, workers=workers
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=schedule(0))
    val_labels = np.array([label for _, label in val_set.items])
    history: dict[str, list[float]] = {k: [] for k in ("loss", "accuracy", "val_loss", "val_accuracy", "learning_rate")}
    for epoch in range(profile.epochs):
        start = time.perf_counter()
        sampler.set_epoch(epoch)  # a new shuffle, the same on every core
        train_set.set_epoch(epoch)
        for group in optimizer.param_groups:
            group["lr"] = schedule(epoch)
        scores = train_epoch(acc, model, train_batches, optimizer, epoch, precision)
        tag = f"val-{epoch}"
        val_logits = predict(
            acc, model, val_set, batch_size=per_core_batch, tag=tag, workers=workers, precision=precision
        )
        val_loss = float(torch.nn.functional.cross_entropy(torch.from_numpy(val_logits), torch.from_numpy(val_labels)))
        for name, value in (
            *scores.items(),
            ("val_loss", val_loss),
            ("val_accuracy", float((val_logits.argmax(1) == val_labels).mean())),
            ("learning_rate", schedule(epoch)),
        ):
            history[name].append(value)
        runtime.master_print(
            acc,
            f"epoch {epoch + 1}/{profile.epochs}: "
            + ", ".join(f"{name} {values[-1]:.3g}" for name, values in history.items())
            + f" ({time.perf_counter() - start:.1f} s)",
        )
    return history


def predict(
    acc: TorchAccelerator,
    model: Any,
    dataset: Any,
    *,
    batch_size: int,
    tag: str,
    workers: int = 0,
    precision: str = "float32",
) -> Any:
    """Logits for every item of `dataset`, in its order, on every replica (each predicts its share)."""
    import numpy as np
    import torch

    sampler, device_batches = batches(acc, dataset, batch_size, shuffle=False, workers=workers)
    model.eval()
    outputs = []
    with torch.no_grad(), runtime.autocast(acc, precision):
        for images, _ in device_batches:
            outputs.append(model(images).float())
    runtime.sync(acc)
    logits = torch.cat(outputs).cpu().numpy() if outputs else np.zeros((0, 0), np.float32)
    parts = runtime.mesh_reduce(acc, tag, (list(sampler), logits), list)
    ordered = np.zeros((len(dataset), max(p[1].shape[1] for p in parts)), np.float32)
    for positions, values in parts:  # the sampler pads with repeats; they rewrite the same rows
        ordered[positions] = values
    return ordered


def predict_views(
    acc: TorchAccelerator,
    model: Any,
    dataset: ImageRecords,
    *,
    views: int,
    batch_size: int,
    tag: str,
    precision: str = "float32",
) -> Any:
    """Class probabilities for every item of `dataset`, in its order, averaged over its first `views`
    test-time views (`augment.VIEWS`; 1: the images as they are), as notebook 02 averages them."""
    from nbkit.images.metrics import softmax

    each = [
        softmax(
            predict(
                acc,
                model,
                dataset.seen_as(index),
                batch_size=batch_size,
                tag=f"{tag}-{index}",
                precision=precision,
            )
        )
        for index in range(views)
    ]
    return sum(each) / views


def same_outputs(outputs: Any, reference: Any, precision: str) -> bool:
    """Whether two predictions (logits or probabilities) of the same images agree: to float32
    round-off, or, in bfloat16 (8 significant bits, computed on other hardware), to within 5% of the
    largest value (at least 1)."""
    import numpy as np

    scale = max(1.0, float(np.abs(reference).max()))
    tolerance = (5e-2 if precision == "mixed_bfloat16" else 1e-4) * scale
    return bool(np.abs(np.asarray(outputs) - np.asarray(reference)).max() <= tolerance)


def _sum_columns(rows: list[tuple[float, int, int]]) -> tuple[float, int, int]:
    return tuple(sum(column) for column in zip(*rows))  # type: ignore[return-value]


def loader_workers(acc: TorchAccelerator, cpus: int | None = None) -> int:
    """DataLoader processes for this replica (call it inside a worker): none where the CPU is the
    device (they would compete with training), else the host's cores shared by the replicas, up to 4."""
    import os

    if acc.kind == "cpu":
        return 0
    return max(0, min(4, (cpus or os.cpu_count() or 1) // runtime.world_size(acc) - 1))
