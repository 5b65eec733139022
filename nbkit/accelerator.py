"""The Accelerator `accel.setup()` returns: what was found, how to distribute over it, the Keras precision
policy it allows and JAX's persistent compilation cache.

The cache is a folder a later session gets back, so a resumed run loads its compiled step. One subfolder per
runtime (`jax-<version>-<device kind>-x<devices>`): another runtime's entries are only reported; a damaged
entry is JAX's warning and a fresh compile, never a wrong result."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit import atomic
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
_PRECISIONS = {
    "float32": "everything in float32",
    "mixed_bfloat16": "layers compute in bfloat16, variables, logits and loss stay float32",
    "mixed_float16": "layers compute in float16 (the loss is scaled), variables, logits and loss stay float32",
}

# JAX's events (jax._src.compiler, the same names in JAX 0.5-0.10) that say what the cache did.
_HIT = "/jax/compilation_cache/cache_hits"
_SAVED = "/jax/compilation_cache/compile_time_saved_sec"
# Store every compiled program, not only those over JAX's default 1 s: the ~200 small programs Keras runs
# to build and initialise EfficientNetB0 cost 15 s cold and 3.6 s loaded (bench/compile_cache.py), in 3 MB.
_MIN_COMPILE_SECONDS = 0.0


@dataclass
class CompileCache:
    """The cache folder this process uses (None: none, `off_reason` says why), what it held, what it served."""

    folder: Path | None = None  # the subfolder for this runtime
    off_reason: str = ""
    entries_found: int = 0
    other_runtimes: list[str] = field(default_factory=list)
    hits: int = 0
    seconds_saved: float = 0.0

    def describe(self) -> str:
        """What the cache holds, in one line ("" where none was asked about)."""
        if self.folder is None:
            return f"compile cache: off ({self.off_reason})" if self.off_reason else ""
        held = "empty, so this run compiles and stores its programs there"
        held = f"{self.entries_found} compiled program(s) from earlier runs" if self.entries_found else held
        text = f"compile cache {self.folder}: {held}"
        if self.other_runtimes:
            text += f"; ignored: the entries of {', '.join(self.other_runtimes)}, which this runtime cannot use"
        return text

    def report(self) -> str:
        if self.folder is None:
            return self.describe()
        if not self.hits:
            return f"compile cache: nothing loaded; what this run compiled is stored in {self.folder}"
        return f"compile cache: {self.hits} compiled program(s) loaded, {self.seconds_saved:.0f} s of compiling saved"

    def copy_from(self, earlier: str | Path) -> str:
        """Add this runtime's entries from an earlier run's cache folder, before the model is built; one line."""
        if self.folder is None:
            return self.describe()
        source = Path(earlier).expanduser() / self.folder.name
        if not source.is_dir():
            there = sorted(p.name for p in Path(earlier).expanduser().glob("jax-*") if p.is_dir())
            held = f"it holds {', '.join(there)} only" if there else "it holds none"
            return f"compile cache: nothing to copy from {earlier} for {self.folder.name} ({held})"
        self.folder.mkdir(parents=True, exist_ok=True)
        missing = [entry for entry in sorted(source.glob("*-cache")) if not (self.folder / entry.name).exists()]
        for entry in missing:
            with atomic.replacing(self.folder / entry.name) as partial:  # never half an entry
                shutil.copyfile(entry, partial)
        self.entries_found += len(missing)
        return f"compile cache: {len(missing)} compiled program(s) copied from {source}"

    def _on_event(self, event: str, *args: Any, **kwargs: Any) -> None:
        if event == _HIT:
            self.hits += 1

    def _on_duration(self, event: str, seconds: float, *args: Any, **kwargs: Any) -> None:
        if event == _SAVED:
            self.seconds_saved += max(seconds, 0.0)

    @classmethod
    def use(cls, folder: str | Path, devices: list[Any]) -> CompileCache:
        """Point JAX's persistent cache at `folder`'s subfolder for this runtime (before anything compiles)."""
        import jax
        from jax import monitoring

        root = Path(folder).expanduser()
        name = _runtime_name(jax.__version__, devices[0].device_kind, len(devices))
        # JAX makes the folder when it first compiles (after the data checks); whether it can is checked now.
        existing = next(p for p in (root, *root.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise ParameterError(
                f"COMPILE_CACHE={str(folder)!r} cannot be written ({existing} is not a writable folder): give a "
                "writable folder, or 'none' to compile without a cache."
            )
        cache = cls(
            folder=root / name,
            entries_found=sum(1 for _ in (root / name).glob("*-cache")),  # JAX's files: <key>-cache, <key>-atime
            other_runtimes=sorted(p.name for p in root.glob("jax-*") if p.is_dir() and p.name != name),
        )
        jax.config.update("jax_compilation_cache_dir", str(cache.folder))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", _MIN_COMPILE_SECONDS)
        monitoring.register_event_listener(cache._on_event)
        monitoring.register_event_duration_secs_listener(cache._on_duration)
        return cache


def _runtime_name(jax_version: str, device_kind: str, device_count: int) -> str:
    kind = re.sub(r"[^a-z0-9.]+", "-", device_kind.lower()).strip("-") or "unknown"
    return f"jax-{jax_version}-{kind}-x{device_count}"


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
    compile_cache: CompileCache = field(default_factory=CompileCache)  # JAX's persistent cache (off by default)
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
        """Set the Keras dtype policy for PRECISION=`requested` before the model is built; a line saying which and why."""
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
        text = textwrap.fill(" ".join([text, *self.notes]), width=100)
        return "\n".join(filter(None, [text, self.compile_cache.describe()]))


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
