"""The Accelerator `setup()` returns: what was found, and what notebooks do with it on either backend."""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nbkit.accel import precision
from nbkit.accel.compile_cache import CompileCache
from nbkit.accel.tpu import TpuInfo
from nbkit.hosts import Hosts
from nbkit.params import check_int

# Workaround, TensorFlow 2.18-2.21 with Keras 3.10-3.15 (measured on 2 and 8 logical CPUs); building the
# optimizer first does not help (it does for a hand-written multi-step tf.function, notebook 01's custom loop).
# tests/test_accel_real.py::test_keras_bug_behind_the_steps_per_execution_cap_still_exists fails once it is fixed.
_MIRRORED_CPU_BUG = (
    "Keras fit under MirroredStrategy over logical CPU devices fails with "
    "'InvalidArgumentError: You must feed a value for placeholder tensor' when "
    "steps_per_execution > 1 (TensorFlow 2.18-2.21 / Keras 3.10-3.15)"
)
_TPU_SHAPED = 8  # a TPU v5e-8 (8 chips x 1 core) or v3-8 (4 chips x 2 cores): 8 replicas either way


@dataclass
class Accelerator:
    """What `setup()` found: the device kind, the Keras backend and how to distribute over it."""

    kind: str  # "tpu", "gpu" or "cpu"
    backend: str  # "tensorflow" or "jax"
    num_replicas: int
    device_names: list[str]
    hardware: str = ""  # the device model, e.g. "TPU v5 lite", "Tesla T4", "cpu"
    strategy: Any = None  # tf.distribute.Strategy on the TensorFlow backend
    distribution: Any = None  # keras.distribution.DataParallel on the JAX backend (None: one device)
    recommended_precision: str = "float32"  # the Keras dtype policy this hardware does best (PRECISION="auto")
    max_steps_per_execution: int | None = None  # None: no known limit
    simulated: bool = False  # replicas are slices of one CPU, not real devices
    remote_tpu: bool = False  # a TPU Node / named Cloud TPU: it reads input files itself, so from GCS
    reason: str = ""  # how this accelerator was chosen
    notes: list[str] = field(default_factory=list)
    jax_devices: list[Any] = field(default_factory=list, repr=False)
    compute_capability: tuple[int, int] | None = None  # a GPU's
    tpu: TpuInfo | None = None  # which TPU, where it can be told
    precision: str = "float32"  # the Keras dtype policy set by set_precision()
    changes: list[str] = field(default_factory=list)  # what setup() sets for this process (environment, warnings)
    compile_cache: CompileCache = field(default_factory=CompileCache)  # JAX's persistent cache (off by default)
    hosts: Hosts = field(default_factory=Hosts)  # this process among the run's processes (a pod slice's hosts)
    local_replicas: tuple[int, ...] = ()  # the replicas whose devices this process feeds; (): all of them

    def __post_init__(self) -> None:
        if not self.local_replicas:
            self.local_replicas = tuple(range(self.num_replicas))

    @property
    def distribution_name(self) -> str:
        if self.strategy is not None:
            return type(self.strategy).__name__
        if self.distribution is not None:
            return f"keras.distribution.{type(self.distribution).__name__}"
        return "a single device"

    def scope(self) -> contextlib.AbstractContextManager[Any]:
        """Create models and optimizers inside `with acc.scope():`."""
        if self.strategy is not None:
            return self.strategy.scope()
        if self.distribution is not None:
            return self.distribution.scope()
        return contextlib.nullcontext()

    def global_batch(self, per_replica_batch: int) -> int:
        """The batch a dataset must yield so each replica gets `per_replica_batch` items."""
        check_int("per_replica_batch", per_replica_batch, minimum=1)
        return per_replica_batch * self.num_replicas

    def device(self, index: int = 0) -> contextlib.AbstractContextManager[Any]:
        """Manual placement: ops inside `with acc.device(i):` run on replica i's device."""
        if self.backend == "tensorflow":
            import tensorflow as tf

            return tf.device(self.device_names[index])
        import jax

        return jax.default_device(self.jax_devices[index] if self.jax_devices else jax.devices()[index])

    def placement(self, tensor: Any) -> str:
        """The device a tensor lives on, as text."""
        if self.backend == "tensorflow":
            return str(tensor.device)
        return ", ".join(str(d) for d in tensor.devices())

    def set_precision(self, requested: str = "auto") -> str:
        """Set the Keras dtype policy for PRECISION=`requested` before the model is built; a line saying which and why."""
        import keras

        policy, why = precision.choose(requested, self.kind, self.compute_capability)
        keras.mixed_precision.set_global_policy(policy)
        self.precision = policy
        return f"precision {policy} ({why}): {precision.EXPLAINED[policy]}"

    def run(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """`fn(*args)` run (compiled) on every replica: each replica's result as NumPy."""
        import numpy as np

        if self.backend == "tensorflow":
            import tensorflow as tf

            strategy = self.strategy

            @tf.function  # an eager strategy.run is slow and warns about it
            def replicated(*inputs: Any) -> Any:
                return strategy.run(fn, args=inputs)

            return [np.asarray(t) for t in strategy.experimental_local_results(replicated(*args))]

        import jax

        if len(self.jax_devices) <= 1:
            return [np.asarray(jax.jit(fn)(*args))]
        from jax.sharding import Mesh, PartitionSpec

        mesh = Mesh(np.array(self.jax_devices), ("replica",))
        stacked = jax.jit(
            _shard_map()(
                lambda *inputs: fn(*inputs)[None],
                mesh=mesh,
                in_specs=tuple(PartitionSpec() for _ in args),  # every replica gets all inputs
                out_specs=PartitionSpec("replica"),  # one output slice per replica
            )
        )(*args)
        return list(np.asarray(stacked))

    def describe(self) -> str:
        device = {"tpu": "TPU", "gpu": "GPU", "cpu": "CPU"}[self.kind]
        if self.tpu is not None:
            device = self.tpu.describe()
        elif self.hardware and self.hardware.lower() not in ("cpu", device.lower()):
            device += f" ({self.hardware})"
        text = f"{device}, Keras backend {self.backend}, {self.num_replicas} replica(s)"
        if self.simulated:
            what = "logical CPU devices" if self.backend == "tensorflow" else "JAX host CPU devices"
            shape = ", as many as a TPU v5e-8 has cores" if self.num_replicas == _TPU_SHAPED else ""
            text += f" (simulated: {self.num_replicas} {what}{shape})"
        if self.hosts.joins_runtime:
            text += (
                f", joined by JAX's distributed runtime: {self.hosts.describe()}, {len(self.local_replicas)} local "
                f"devices, {self.num_replicas} global devices (each process feeds its own; process 0 writes the outputs)"
            )
        text += (
            f", distributed with {self.distribution_name}. Chosen because: {self.reason}. "
            f"Recommended precision policy: {self.recommended_precision}. "
            f"Global batch = {self.num_replicas} x per-replica batch."
        )
        if self.max_steps_per_execution is not None:
            text += f" steps_per_execution is capped at {self.max_steps_per_execution} here: {_MIRRORED_CPU_BUG}."
        for note in self.notes:
            text += " " + note
        if self.changes:
            text += " For this process: " + "; ".join(self.changes) + "."
        text = textwrap.fill(text, width=100)
        return f"{text}\n{self.compile_cache.describe()}" if self.compile_cache.asked else text

    def __str__(self) -> str:
        return self.describe()


def _shard_map() -> Callable[..., Any]:
    import jax

    if hasattr(jax, "shard_map"):  # JAX >= 0.7
        return jax.shard_map
    from jax.experimental.shard_map import shard_map  # older JAX, e.g. on a pinned Kaggle image

    return shard_map
