"""The Accelerator `accel.setup()` returns: what was found, how to distribute over it, and the Keras precision
policy the hardware allows."""

from __future__ import annotations

import contextlib
import textwrap
from dataclasses import dataclass, field
from typing import Any

from nbkit import hosts as nbhosts
from nbkit.errors import ParameterError
from nbkit.params import check_choice

# Workaround, TensorFlow 2.18-2.21 with Keras 3.10-3.15 (measured on 2 and 8 logical CPUs); building the
# optimizer first does not help (it does for a hand-written multi-step tf.function, notebook 01's custom loop).
# tests/test_accel_real.py::test_keras_bug_behind_the_steps_per_execution_cap_still_exists fails once it is fixed.
_MIRRORED_CPU_BUG = (
    "Keras fit under MirroredStrategy over logical CPU devices fails with "
    "'InvalidArgumentError: You must feed a value for placeholder tensor' when "
    "steps_per_execution > 1 (TensorFlow 2.18-2.21 / Keras 3.10-3.15)"
)
CHIP_GIB = {"TPU v5 lite": 15.75, "TPU v6 lite": 31.25, "TPU v4": 31.25, "TPU v3": 15.75}  # GiB XLA leaves a program
_PRECISIONS = {
    "float32": "everything in float32",
    "mixed_bfloat16": "layers compute in bfloat16, variables, logits and loss stay float32",
    "mixed_float16": "layers compute in float16 (the loss is scaled), variables, logits and loss stay float32",
}


@dataclass
class Accelerator:
    """What `setup()` found: the device kind, the Keras backend and how to distribute over it."""

    kind: str  # "tpu", "gpu" or "cpu"
    backend: str  # "tensorflow" or "jax"
    num_replicas: int
    device_names: list[str]
    hardware: str = ""  # the device model, e.g. "TPU v5e-8: 8 chips x 1 core, ...", "Tesla T4", "cpu"
    strategy: Any = None  # tf.distribute.Strategy on the TensorFlow backend
    distribution: Any = None  # keras.distribution.DataParallel on the JAX backend (None: one device)
    max_steps_per_execution: int | None = None  # None: no known limit
    reason: str = ""  # how this accelerator was chosen
    notes: list[str] = field(default_factory=list)
    jax_devices: list[Any] = field(default_factory=list, repr=False)
    compute_capability: tuple[int, int] | None = None  # a GPU's
    precision: str = "float32"  # the Keras dtype policy set by set_precision()
    hosts: nbhosts.Hosts = field(default_factory=nbhosts.Hosts)  # this process among the run's (a pod slice's hosts)

    @property
    def simulated(self) -> bool:
        """Replicas that are slices of one CPU, not real devices."""
        return self.kind == "cpu" and self.num_replicas > 1

    @property
    def recommended_precision(self) -> str:
        return _precision("auto", self.kind, self.compute_capability)[0]

    @property
    def distribution_name(self) -> str:
        if self.strategy is not None:
            return type(self.strategy).__name__
        if self.distribution is not None:
            return f"keras.distribution.{type(self.distribution).__name__}"
        return "a single device"

    def scope(self) -> contextlib.AbstractContextManager[Any]:
        """Create models and optimizers inside `with acc.scope():`."""
        distributed = self.strategy or self.distribution
        return distributed.scope() if distributed is not None else contextlib.nullcontext()

    def set_precision(self, requested: str = "auto") -> str:
        """Set the Keras dtype policy for PRECISION=`requested` before the model is built; a line saying which and
        why."""
        policy, why = _precision(requested, self.kind, self.compute_capability)
        import keras

        keras.mixed_precision.set_global_policy(policy)
        self.precision = policy
        return f"precision {policy} ({why}): {_PRECISIONS[policy]}"

    def describe(self) -> str:
        device = self.kind.upper()
        if self.hardware.lower() not in ("", "cpu", device.lower()):
            device = self.hardware if self.hardware.startswith("TPU ") else f"{device} ({self.hardware})"
        text = f"{device}, Keras backend {self.backend}, {self.num_replicas} replica(s)"
        if self.simulated:
            what = "logical CPU devices" if self.backend == "tensorflow" else "JAX host CPU devices"
            shape = ", as many as a TPU v5e-8 has cores" if self.num_replicas == 8 else ""
            text += f" (simulated: {self.num_replicas} {what}{shape})"
        if self.hosts.joins_runtime:
            local = sum(1 for d in self.jax_devices if d.process_index == self.hosts.index)
            text += (
                f", joined by JAX's distributed runtime: {self.hosts.describe()}, {local} local devices, "
                f"{self.num_replicas} global devices (each process feeds its own; process 0 writes the outputs)"
            )
        text += (
            f", distributed with {self.distribution_name}. Chosen because: {self.reason}. "
            f"Recommended precision policy: {self.recommended_precision}. "
            f"Global batch = {self.num_replicas} x per-replica batch."
        )
        if self.max_steps_per_execution is not None:
            text += f" steps_per_execution is capped at {self.max_steps_per_execution} here: {_MIRRORED_CPU_BUG}."
        return textwrap.fill(" ".join([text, *self.notes]), width=100)


def _precision(requested: str, kind: str, capability: tuple[int, int] | None) -> tuple[str, str]:
    """(policy, why) for PRECISION=`requested`: "auto" is bfloat16 on TPUs and on GPUs of compute capability >= 8.0
    (A100, L4, H100: no loss scaling), float16 on those >= 7.0 (T4, V100), float32 otherwise; one the hardware
    cannot do well is refused with what to ask for instead."""
    check_choice("PRECISION", requested, ("auto", *_PRECISIONS))
    said, capability = "unknown" if capability is None else ".".join(map(str, capability)), capability or (0, 0)
    if requested == "auto" and kind == "gpu":
        gpu = "mixed_bfloat16" if capability >= (8, 0) else "mixed_float16" if capability >= (7, 0) else "float32"
        return gpu, f"PRECISION='auto': the policy of a GPU of compute capability {said}"
    if requested == "auto":
        return {"tpu": "mixed_bfloat16"}.get(kind, "float32"), f"PRECISION='auto': the {kind.upper()}'s policy"
    if requested == "mixed_float16" and kind != "gpu":
        why = "TPUs compute in bfloat16" if kind == "tpu" else "a CPU emulates float16 (about 13x slower measured)"
        raise ParameterError(
            f"PRECISION='mixed_float16' on a {kind.upper()}: {why}. Use 'mixed_bfloat16' or 'float32'."
        )
    if requested == "mixed_float16" and capability < (7, 0):
        raise ParameterError(
            "PRECISION='mixed_float16' needs a GPU with tensor cores (compute capability 7.0 or more; "
            f"this one: {said}). Use 'float32'."
        )
    if requested == "mixed_bfloat16" and kind == "gpu" and capability < (8, 0):
        raise ParameterError(
            f"PRECISION='mixed_bfloat16' needs a GPU of compute capability 8.0 or more (this one: {said}, "
            "e.g. a T4 is 7.5). Use 'mixed_float16' or 'float32'."
        )
    return requested, f"PRECISION={requested!r} was asked for"
