"""What a run trains: the profiles (model, weights, epochs, learning rate) and the flower starter
notebooks' learning-rate schedule. Framework-free: the Keras and the PyTorch notebooks use the same
recipe. (How the run steps through its data is `nbkit.plan`.)"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nbkit.params import check_int, resolve_profile


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


@dataclass(frozen=True)
class Profile:
    """What a notebook trains: model, weights, epochs, and the schedule's peak learning rate."""

    name: str
    model: str
    weights: str
    epochs: int
    max_lr_per_replica: float  # the schedule's peak is this times the replicas
    ramp_epochs: int

    def schedule(self, replicas: int) -> RampSchedule:
        """The learning-rate schedule for `replicas` replicas: start = min = 1e-5, up to
        max_lr_per_replica x replicas (a global batch N times larger takes N times larger steps)."""
        check_int("replicas", replicas, minimum=1)
        return RampSchedule(max_lr=self.max_lr_per_replica * replicas, ramp_epochs=self.ramp_epochs)

    def describe(self) -> str:
        return f"profile={self.name}: {self.model} (weights {self.weights}), {self.epochs} epochs"


# "smoke" trains a small CNN from scratch in seconds on a CPU; "full" fine-tunes a pretrained
# EfficientNetB0 with the flower starter notebooks' schedule (max 5e-5 x replicas, ramp 5 epochs).
PROFILES = {
    "smoke": Profile(
        name="smoke", model="small_cnn", weights="none", epochs=8, max_lr_per_replica=2.5e-4, ramp_epochs=2
    ),
    "full": Profile(
        name="full", model="EfficientNetB0", weights="imagenet", epochs=12, max_lr_per_replica=5e-5, ramp_epochs=5
    ),
}


def profile(name: str, accelerator_kind: str, model: str = "auto", weights: str = "auto", epochs: int = 0) -> Profile:
    """PROFILE `name` ("auto": smoke on a CPU, full on a TPU or GPU) with the notebook's MODEL, WEIGHTS
    and EPOCHS where they are given ("auto" and 0 keep the profile's)."""
    base = PROFILES[resolve_profile(name, accelerator_kind)]
    return replace(
        base,
        model=base.model if model == "auto" else model,
        weights=base.weights if weights == "auto" else weights,
        epochs=epochs or base.epochs,
    )
