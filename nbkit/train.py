"""Training helpers: the flower starter notebooks' learning-rate schedule, checkpoints, saving."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nbkit.params import check_int


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

    def describe(self, global_batch: int) -> str:
        return (f"profile={self.profile}: {self.model} (weights {self.weights}), {self.epochs} epochs, "
                f"global batch {global_batch}")


# "smoke" trains a small CNN from scratch on the sample in seconds; "full" fine-tunes a pretrained
# EfficientNetB0 with the starter notebooks' schedule (max 5e-5 x replicas).
FLOWER_PROFILES = {
    "smoke": FlowerConfig("smoke", "small_cnn", "none", 8, 16, 2.5e-4, 2),
    "full": FlowerConfig("full", "EfficientNetB0", "imagenet", 12, 16, 5e-5, 5),
}


def flower_config(profile: str, epochs: int = 0, per_replica_batch: int = 0, model: str = "auto",
                  weights: str = "auto") -> FlowerConfig:
    """A profile's settings with the notebook's overrides (0 or "auto" keep the profile's value)."""
    from dataclasses import replace

    from nbkit.params import pick

    base = FLOWER_PROFILES[profile]
    return replace(
        base,
        epochs=pick(epochs, base.epochs),
        per_replica_batch=pick(per_replica_batch, base.per_replica_batch),
        model=base.model if model == "auto" else model,
        weights=base.weights if weights == "auto" else weights,
    )


def compiled_classifier(acc: Any, config: FlowerConfig, image_size: int, num_classes: int,
                        steps_per_execution: int) -> Any:
    """The classifier built and compiled inside `acc.scope()` (its variables live on every replica).

    steps_per_execution: as planned by `epoch_plan` from `acc.steps_per_execution(...)`.
    """
    import keras

    from nbkit.models import build_classifier

    with acc.scope():
        model = build_classifier(config.model, image_size, num_classes, weights=config.weights)
        model.compile(
            optimizer=keras.optimizers.Adam(),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["sparse_categorical_accuracy"],
            steps_per_execution=steps_per_execution,
        )
    return model


def epoch_plan(num_items: int, global_batch: int, steps_per_execution: int) -> tuple[int, int]:
    """(steps per epoch, steps per execution), the first a whole multiple of the second.

    Keras 3 runs whole executions: an epoch of 52 steps with steps_per_execution=16 really runs
    64 steps (4 x 16), reading on into the next epoch's data. So an epoch is cut to whole
    executions: at most steps_per_execution - 1 batches are left out, different ones each epoch
    since every epoch is shuffled anew.
    """
    batches = max(1, num_items // global_batch)
    per_execution = max(1, min(steps_per_execution, batches))
    return batches // per_execution * per_execution, per_execution


def callbacks(schedule: Callable[[int], float], output_dir: str | Path | None = None) -> list[Any]:
    """The learning-rate schedule, plus a weights checkpoint after every epoch when `output_dir` is
    given (for training that resumes, see `nbkit.resume`)."""
    import keras

    scheduler = keras.callbacks.LearningRateScheduler(schedule, verbose=0)
    if output_dir is None:
        return [scheduler]
    checkpoint = Path(output_dir) / "checkpoint.weights.h5"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    return [scheduler, keras.callbacks.ModelCheckpoint(str(checkpoint), save_weights_only=True)]


def save_model(model: Any, path: str | Path) -> Path:
    """Save in the Keras 3 format (`.keras`), via a temporary file so a failed save loses nothing.

    Keras 3 writes the file from the host in Python (zip + h5), so the TPU-Node-era
    `experimental_io_device="/job:localhost"` of TF SavedModels is not needed here.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.stem + ".partial.keras")
    model.save(partial)
    partial.replace(path)
    return path


def load_model(path: str | Path, acc: Any = None) -> Any:
    """Load a `.keras` model, inside the accelerator's scope when given (variables on every replica)."""
    import contextlib

    import keras

    with acc.scope() if acc is not None else contextlib.nullcontext():
        return keras.models.load_model(Path(path))

