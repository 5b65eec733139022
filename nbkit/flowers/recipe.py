"""What a flowers run trains: the profiles (model, weights, epochs, batch, learning rate), the
starter notebooks' learning-rate schedule, and the epoch plan. Framework-free: the Keras and the
PyTorch notebooks use the same recipe."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nbkit.errors import ParameterError
from nbkit.params import check_int, or_default


@dataclass(frozen=True)
class RampSchedule:
    """Ramp up linearly, sustain, then decay exponentially towards `min_lr` (per epoch).

    `max_lr` scales with the replicas: a global batch N times larger takes N times larger steps.
    """

    max_lr: float
    start_lr: float = 1e-5
    min_lr: float = 1e-5
    ramp_epochs: int = 5
    sustain_epochs: int = 0
    decay: float = 0.8

    def __call__(self, epoch: int, lr: float | None = None) -> float:
        if epoch < self.ramp_epochs:
            return self.start_lr + (self.max_lr - self.start_lr) * epoch / self.ramp_epochs
        if epoch < self.ramp_epochs + self.sustain_epochs:
            return self.max_lr
        decayed = epoch - self.ramp_epochs - self.sustain_epochs
        return self.min_lr + (self.max_lr - self.min_lr) * self.decay**decayed

    def values(self, epochs: int) -> list[float]:
        """The rate of each epoch, for plotting."""
        return [self(epoch) for epoch in range(epochs)]


def flower_schedule(replicas: int, max_lr_per_replica: float = 5e-5, **overrides: Any) -> RampSchedule:
    """The starter notebooks' defaults: start = min = 1e-5, max = 5e-5 x replicas, ramp 5, sustain 0, decay 0.8."""
    check_int("replicas", replicas, minimum=1)
    return RampSchedule(max_lr=max_lr_per_replica * replicas, **overrides)


@dataclass(frozen=True)
class FlowerConfig:
    """What the flowers notebooks train: model, weights, epochs, batch and schedule of a profile."""

    profile: str
    model: str
    weights: str
    epochs: int
    per_replica_batch: int
    max_lr_per_replica: float
    ramp_epochs: int

    def schedule(self, replicas: int) -> RampSchedule:
        """The learning-rate schedule for `replicas` replicas (the maximum grows with them)."""
        return flower_schedule(replicas, self.max_lr_per_replica, ramp_epochs=self.ramp_epochs)

    def describe(self, global_batch: int) -> str:
        return (
            f"profile={self.profile}: {self.model} (weights {self.weights}), {self.epochs} epochs, "
            f"global batch {global_batch}"
        )


# "smoke" trains a small CNN from scratch on the sample in seconds; "full" fine-tunes a pretrained
# EfficientNetB0 with the starter notebooks' schedule (max 5e-5 x replicas).
PROFILES = {
    "smoke": FlowerConfig("smoke", "small_cnn", "none", 8, 16, 2.5e-4, 2),
    "full": FlowerConfig("full", "EfficientNetB0", "imagenet", 12, 16, 5e-5, 5),
}


def profile(
    name: str, epochs: int = 0, per_replica_batch: int = 0, model: str = "auto", weights: str = "auto"
) -> FlowerConfig:
    """Profile `name`'s settings with the notebook's overrides (0 or "auto" keep the profile's value)."""
    base = PROFILES[name]
    return replace(
        base,
        epochs=or_default(epochs, base.epochs),
        per_replica_batch=or_default(per_replica_batch, base.per_replica_batch),
        model=base.model if model == "auto" else model,
        weights=base.weights if weights == "auto" else weights,
    )


def epoch_plan(num_items: int, global_batch: int, steps_per_execution: int, max_steps: int = 0) -> tuple[int, int]:
    """(steps per epoch, steps per execution), the first a whole multiple of the second.

    An epoch is one pass over the items (at most `max_steps` steps when given: a short run).
    Keras 3 runs whole executions: an epoch of 52 steps with steps_per_execution=16 really runs
    64 steps (4 x 16), reading on into the next epoch's data. So an epoch is cut to whole
    executions: at most steps_per_execution - 1 batches are left out, different ones each epoch
    since every epoch is shuffled anew.
    """
    batches = max(1, num_items // global_batch)
    if max_steps:
        batches = min(batches, max_steps)
    per_execution = max(1, min(steps_per_execution, batches))
    return batches // per_execution * per_execution, per_execution


BATCH_MEMORY_SHARE = 0.5  # of the memory available: the rest is for the model, the cache, the notebook


def batch_bytes(global_batch: int, image_size: int) -> int:
    """Host memory one global batch takes: its uint8 images, and the float32 copy the model's first layer makes."""
    return global_batch * image_size * image_size * 3 * (1 + 4)


def check_batch(
    per_replica_batch: int,
    replicas: int,
    image_size: int,
    counts: Mapping[str, int] | None = None,
    available_bytes: int | None = None,
    parameter: str = "PER_REPLICA_BATCH",
) -> int:
    """The global batch, once it is known to work: no larger than the training or validation split
    in `counts` (an epoch and a validation pass each need a full batch), and small enough for the
    memory available (default: what this machine has free now). A ParameterError says what to pass
    as `parameter` instead."""
    from nbkit.env import available_memory

    global_batch = per_replica_batch * replicas
    what = f"{parameter}={per_replica_batch} x {replicas} replica(s) = a global batch of {global_batch}"
    sizes = [(count, split) for split, count in (counts or {}).items() if split in ("train", "val")]
    if sizes and global_batch > min(sizes)[0]:
        smallest, split = min(sizes)
        fits = smallest // replicas
        instead = f"{parameter}={fits} or less" if fits else f"at most {smallest} replicas"
        raise ParameterError(
            f"{what}, more than the {smallest} images of the {split} split: every step and every "
            f"validation pass needs a full batch. Use {instead}."
        )
    available_bytes = available_memory() if available_bytes is None else available_bytes
    needed = batch_bytes(global_batch, image_size)
    if available_bytes is not None and needed > BATCH_MEMORY_SHARE * available_bytes:
        fits = int(BATCH_MEMORY_SHARE * available_bytes // batch_bytes(replicas, image_size))
        raise ParameterError(
            f"{what} of {image_size}x{image_size} images needs about {needed / 2**30:.1f} GiB of memory "
            f"per step; {available_bytes / 2**30:.1f} GiB are free here. Use {parameter}={fits} or less."
        )
    return global_batch
