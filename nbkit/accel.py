"""Find the best accelerator and return one object the notebook uses for the rest of the run.

Search order:
1. a TPU TensorFlow can drive (TPU VM with tensorflow-tpu, Colab, a named or legacy TPU): TPUStrategy;
2. a TPU only JAX can see (today's Kaggle TPU VMs ship tensorflow-cpu): Keras 3 on the JAX
   backend with `keras.distribution.DataParallel` over every core;
3. several GPUs: MirroredStrategy (TF) or DataParallel (JAX);
4. one GPU or the CPU: the default strategy. `simulate_devices=N` splits the CPU into N
   replicas so CI runs the same 8-replica code a TPU v3-8 or v5e-8 runs.

The Keras backend is fixed when `keras` is first imported (and importing TensorFlow imports
Keras), so `setup()` must run before either; it says so if it did not.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
import tempfile
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator

from nbkit import env as nbenv
from nbkit.errors import AcceleratorError, BackendError
from nbkit.params import BACKENDS, check_choice, check_int

# Measured with TF 2.21 / Keras 3.15 on 2 and 8 logical CPUs; building the optimizer first
# does not help (it does for a hand-written multi-step tf.function, see nbkit.custom_loop).
MIRRORED_CPU_BUG = (
    "Keras fit under MirroredStrategy over logical CPU devices fails with "
    "'InvalidArgumentError: You must feed a value for placeholder tensor' when "
    "steps_per_execution > 1 (TensorFlow 2.21 / Keras 3.15)"
)

REPLICAS_OF_A_TPU = "the replica count of a TPU v3-8 or v5e-8"


@dataclass
class Accelerator:
    """What `setup()` found: the device kind, the Keras backend and how to distribute over it."""

    kind: str  # "tpu", "gpu" or "cpu"
    backend: str  # "tensorflow" or "jax"
    num_replicas: int
    device_names: list[str]
    device_kind: str = ""  # e.g. "TPU v5 lite", "Tesla T4", "cpu"
    strategy: Any = None  # tf.distribute.Strategy on the TensorFlow backend
    distribution: Any = None  # keras.distribution.DataParallel on the JAX backend (None: one device)
    mixed_precision: str = "float32"  # the recommended Keras dtype policy
    max_steps_per_execution: int | None = None  # None: no known limit
    simulated: bool = False  # replicas are slices of one CPU, not real devices
    remote_tpu: bool = False  # a TPU Node / named Cloud TPU: it reads input files itself, so from GCS
    reason: str = ""  # how this accelerator was chosen
    notes: list[str] = field(default_factory=list)
    jax_devices: list[Any] = field(default_factory=list, repr=False)

    @property
    def distribution_name(self) -> str:
        """The name of what spreads the work over the replicas."""
        if self.strategy is not None:
            return type(self.strategy).__name__
        if self.distribution is not None:
            return f"keras.distribution.{type(self.distribution).__name__}"
        return "a single device"

    def scope(self) -> ContextManager[Any]:
        """Create models and optimizers inside `with acc.scope():` on either backend."""
        if self.strategy is not None:
            return self.strategy.scope()
        if self.distribution is not None:
            return self.distribution.scope()
        return contextlib.nullcontext()

    def global_batch(self, per_replica_batch: int) -> int:
        """The batch a dataset must yield so each replica gets `per_replica_batch` items."""
        check_int("per_replica_batch", per_replica_batch, minimum=1)
        return per_replica_batch * self.num_replicas

    def steps_per_execution(self, requested: int) -> int:
        """A `steps_per_execution` that works here; says so when it must lower the request."""
        check_int("steps_per_execution", requested, minimum=1)
        limit = self.max_steps_per_execution
        if limit is not None and requested > limit:
            print(
                f"steps_per_execution={requested} lowered to {limit}: {MIRRORED_CPU_BUG}. "
                "Real TPUs and GPUs keep the requested value."
            )
            return limit
        return requested

    def device(self, index: int = 0) -> ContextManager[Any]:
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

    def use_mixed_precision(self) -> str:
        """Set the recommended Keras dtype policy globally and return its name."""
        import keras

        keras.mixed_precision.set_global_policy(self.mixed_precision)
        return self.mixed_precision

    def run(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """Run `fn(*args)` once on every replica (compiled) and return each replica's result as NumPy."""
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
        """A readable paragraph about what was found and what follows from it."""
        device = {"tpu": "TPU", "gpu": "GPU", "cpu": "CPU"}[self.kind]
        if self.device_kind and self.device_kind.lower() not in ("cpu", device.lower()):
            device += f" ({self.device_kind})"
        text = f"{device}, Keras backend {self.backend}, {self.num_replicas} replica(s)"
        if self.simulated:
            what = "logical CPU devices" if self.backend == "tensorflow" else "JAX host CPU devices"
            text += f" (simulated: {self.num_replicas} {what}, {REPLICAS_OF_A_TPU})"
        text += (
            f", distributed with {self.distribution_name}. Chosen because: {self.reason}. "
            f"Recommended precision policy: {self.mixed_precision}. "
            f"Global batch = {self.num_replicas} x per-replica batch."
        )
        if self.max_steps_per_execution is not None:
            text += f" steps_per_execution is capped at {self.max_steps_per_execution} here: {MIRRORED_CPU_BUG}."
        for note in self.notes:
            text += " " + note
        return textwrap.fill(text, width=100)

    def __str__(self) -> str:
        return self.describe()


def setup(backend: str = "auto", *, tpu: str | None = None, simulate_devices: int = 0) -> Accelerator:
    """Find the best accelerator, pick the Keras backend and return an `Accelerator`.

    backend: "auto" (TensorFlow, or JAX on a TPU only JAX can see), "tensorflow" or "jax".
    tpu: a TPU name or address for TPUClusterResolver (default: what the environment advertises).
    simulate_devices: on a CPU only, split it into this many replicas (0 or 1: no split).
    """
    check_choice("backend", backend, BACKENDS)
    check_int("simulate_devices", simulate_devices, minimum=0)
    tpu_vm = nbenv.is_tpu_vm()
    chosen, reason = choose_backend(
        backend,
        loaded=loaded_keras_backend(),
        env_backend=os.environ.get("KERAS_BACKEND"),
        tpu_vm=tpu_vm,
        tf_tpu_capable=_installed("tensorflow-tpu"),
        jax_installed=importlib.util.find_spec("jax") is not None,
    )
    os.environ["KERAS_BACKEND"] = chosen
    # TensorFlow's C++ INFO/WARNING lines (CUDA probing, CPU features) drown notebook output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Keras 3.15 warns on every fit() with a tf.data dataset, though our datasets shuffle themselves.
    warnings.filterwarnings("ignore", message="`shuffle=True` was passed, but will be ignored")
    if chosen == "jax":
        return _setup_jax(simulate_devices, reason)
    addresses = tpu_addresses(tpu, nbenv.tpu_address(), tpu_vm, nbenv.platform())
    with quiet_native_logs():
        import tensorflow as tf

        tf.get_logger().setLevel(logging.WARNING)  # one INFO line per all-reduce otherwise
        acc = _setup_tensorflow(tf, addresses, explicit_tpu=tpu is not None, simulate_devices=simulate_devices)
    acc.reason = f"{reason}; {acc.reason}"
    if tpu_vm and acc.kind != "tpu":
        acc.notes.append(
            "This is a TPU VM but TensorFlow cannot see its TPU (Kaggle ships tensorflow-cpu): "
            "restart the kernel and use backend='jax' (or 'auto') to train on the TPU."
        )
    return acc


# Native log lines TensorFlow prints on every machine without a GPU; anything else is kept.
HARMLESS_NATIVE_LOGS = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|cudart_stub\.cc.*Could not find cuda drivers"
    r"|failed call to cuInit"
    r"|This TensorFlow binary is optimized to use available CPU instructions"
    r"|To enable the following instructions: .* rebuild TensorFlow"
)


@contextlib.contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Drop TensorFlow's known-harmless C++ start-up lines (no CUDA driver, ...) and pass on the rest.

    They are written by C++ straight to file descriptor 2, before TF_CPP_MIN_LOG_LEVEL applies,
    so only a redirect of the descriptor itself catches them.
    """
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (some embedded interpreters): nothing to filter
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [
                line
                for line in captured.read().decode(errors="replace").splitlines(keepends=True)
                if not HARMLESS_NATIVE_LOGS.search(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def loaded_keras_backend() -> str | None:
    """The backend of an already-imported Keras, or None if Keras is not imported yet."""
    keras = sys.modules.get("keras")
    try:
        return keras.backend.backend() if keras is not None else None
    except AttributeError:  # imported half-way (e.g. an import error earlier)
        return None


def choose_backend(
    requested: str,
    *,
    loaded: str | None,
    env_backend: str | None,
    tpu_vm: bool,
    tf_tpu_capable: bool,
    jax_installed: bool,
) -> tuple[str, str]:
    """Pick "tensorflow" or "jax" and say why; raise BackendError when Keras already chose otherwise."""
    check_choice("backend", requested, BACKENDS)
    if loaded is not None and loaded not in ("tensorflow", "jax"):
        raise BackendError(
            f"Keras was already imported with the {loaded!r} backend; nbkit supports 'tensorflow' and "
            "'jax'. Restart the kernel and run nbkit.accel.setup() before importing keras."
        )
    if requested != "auto":
        if loaded is not None and loaded != requested:
            raise BackendError(
                f"Keras was already imported with the {loaded!r} backend, and a process cannot switch "
                f"to {requested!r}. Restart the kernel and call nbkit.accel.setup(backend={requested!r}) "
                "first, before anything imports keras or tensorflow (importing tensorflow imports keras)."
            )
        if requested == "jax" and not jax_installed:
            raise BackendError("backend='jax' needs JAX: `pip install jax` (on a TPU VM: `pip install 'jax[tpu]'`).")
        return requested, f"backend={requested!r} was asked for"
    if loaded is not None:
        return loaded, f"Keras was already imported with the {loaded!r} backend"
    if env_backend in ("tensorflow", "jax"):
        return env_backend, f"KERAS_BACKEND={env_backend!r} is set"
    if tpu_vm and not tf_tpu_capable and jax_installed:
        return "jax", "a TPU VM whose TensorFlow cannot drive the TPU, so Keras runs on JAX"
    return "tensorflow", "the default backend"


def tpu_addresses(tpu: str | None, advertised: str | None, tpu_vm: bool, platform: str) -> list[str]:
    """The TPUClusterResolver `tpu=` values worth trying, best first (empty: look for no TPU)."""
    if tpu is not None:
        return [tpu]
    if advertised:  # legacy Colab TPU Node (grpc://...) or a named Cloud TPU
        return [advertised]
    if tpu_vm:
        return ["local"]
    if platform == "colab":
        return [""]
    # Elsewhere TPUClusterResolver would ask the GCE metadata server: slow, and pointless.
    return []


def mixed_precision_policy(kind: str, compute_capability: tuple[int, int] | None = None) -> str:
    """bfloat16 on TPUs, float16 on GPUs with compute capability >= 7.0, float32 otherwise."""
    if kind == "tpu":
        return "mixed_bfloat16"
    if kind == "gpu" and compute_capability is not None and compute_capability >= (7, 0):
        return "mixed_float16"
    return "float32"


def _setup_tensorflow(tf: Any, addresses: list[str], *, explicit_tpu: bool, simulate_devices: int) -> Accelerator:
    notes: list[str] = []
    for address in addresses:
        try:
            strategy = _connect_tpu(tf, address)
        except Exception as error:  # resolvers raise ValueError, initialization NotFound/InvalidArgument...
            summary = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            if explicit_tpu:
                raise AcceleratorError(
                    f"Could not connect to the TPU tpu={address!r} ({summary}). Check the TPU name and that "
                    "the notebook's accelerator is a TPU, or call setup() without tpu= to use what is visible."
                ) from error
            notes.append(f"No TPU found by TensorFlow at tpu={address!r} ({summary}).")
            continue
        return Accelerator(
            kind="tpu",
            backend="tensorflow",
            num_replicas=strategy.num_replicas_in_sync,
            device_names=[d.name for d in tf.config.list_logical_devices("TPU")],
            device_kind="TPU",
            strategy=strategy,
            mixed_precision=mixed_precision_policy("tpu"),
            reason=f"TPUClusterResolver(tpu={address!r}) found a TPU",
            remote_tpu=address != "local",
            notes=notes,
        )

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        # Several GPUs (Kaggle's 2x T4): mirror variables on each; one GPU: nothing to distribute.
        strategy = tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
        if simulate_devices > 1:
            notes.append("simulate_devices is ignored: real GPUs were found.")
        return Accelerator(
            kind="gpu",
            backend="tensorflow",
            num_replicas=strategy.num_replicas_in_sync,
            device_names=[g.name for g in gpus],
            device_kind=details.get("device_name", "GPU"),
            strategy=strategy,
            mixed_precision=mixed_precision_policy("gpu", details.get("compute_capability")),
            reason=f"TensorFlow sees {len(gpus)} GPU(s)",
            notes=notes,
        )

    if simulate_devices > 1:
        names = _split_cpu(tf, simulate_devices)
        return Accelerator(
            kind="cpu",
            backend="tensorflow",
            num_replicas=len(names),
            device_names=names,
            device_kind="cpu",
            strategy=tf.distribute.MirroredStrategy(names),
            max_steps_per_execution=1,
            simulated=True,
            reason=f"no TPU or GPU is visible; simulate_devices={simulate_devices} split the CPU",
            notes=notes,
        )
    return Accelerator(
        kind="cpu",
        backend="tensorflow",
        num_replicas=1,
        device_names=[d.name for d in tf.config.list_logical_devices("CPU")][:1],
        device_kind="cpu",
        strategy=tf.distribute.get_strategy(),
        reason="no TPU or GPU is visible",
        notes=notes,
    )


def _connect_tpu(tf: Any, address: str) -> Any:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
    if address != "local":  # a remote TPU (Node / Colab / named): the TPU guide's connect step
        tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _split_cpu(tf: Any, count: int) -> list[str]:
    """Split the first CPU into `count` logical devices and return their names."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:  # TensorFlow's devices were already initialized
        existing = tf.config.list_logical_devices("CPU")
        if len(existing) != count:
            raise BackendError(
                f"TensorFlow already started with {len(existing)} CPU device(s), so it cannot be split into "
                f"{count}. Restart the kernel and call nbkit.accel.setup(simulate_devices={count}) before "
                "running any TensorFlow code."
            ) from error
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def _request_jax_cpu_devices(count: int) -> None:
    """Ask XLA for `count` host devices; read when JAX starts its backends."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={count}".strip()


def _setup_jax(simulate_devices: int, reason: str) -> Accelerator:
    if simulate_devices > 1:
        _request_jax_cpu_devices(simulate_devices)
    with quiet_native_logs():
        import jax

        devices = jax.devices()  # JAX's default platform: TPU, else GPU, else CPU
    kind = {"tpu": "tpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu"}.get(devices[0].platform, "cpu")
    notes: list[str] = []
    simulated = kind == "cpu" and len(devices) > 1
    if kind == "cpu" and simulate_devices > 1 and len(devices) != simulate_devices:
        raise BackendError(
            f"JAX already started with {len(devices)} CPU device(s), so it cannot be split into "
            f"{simulate_devices}. Restart the kernel and call nbkit.accel.setup(backend='jax', "
            f"simulate_devices={simulate_devices}) before running any JAX code."
        )
    if kind != "cpu" and simulate_devices > 1:
        notes.append(f"simulate_devices is ignored: real {kind.upper()} devices were found.")
    compute_capability = None
    if kind == "gpu":
        compute_capability = _parse_capability(getattr(devices[0], "compute_capability", None))
    with quiet_native_logs():
        _prepare_tensorflow_for_input()
        import keras

    distribution = None
    if len(devices) > 1:
        distribution = keras.distribution.DataParallel(devices=devices)
        keras.distribution.set_distribution(distribution)
    why = {"tpu": f"JAX sees {len(devices)} TPU core(s)", "gpu": f"JAX sees {len(devices)} GPU(s)"}.get(
        kind, f"simulate_devices={simulate_devices} split the CPU" if simulated else "no TPU or GPU is visible"
    )
    return Accelerator(
        kind=kind,
        backend="jax",
        num_replicas=len(devices),
        device_names=[str(d) for d in devices],
        device_kind=getattr(devices[0], "device_kind", kind),
        distribution=distribution,
        mixed_precision=mixed_precision_policy(kind, compute_capability),
        simulated=simulated,
        reason=f"{reason}; {why}",
        notes=notes,
        jax_devices=list(devices),
    )


def _parse_capability(value: Any) -> tuple[int, int] | None:
    """JAX gives compute capability as "7.5"; TensorFlow as (7, 5)."""
    try:
        major, minor = str(value).split(".")[:2]
        return int(major), int(minor)
    except (TypeError, ValueError):
        return None


def _prepare_tensorflow_for_input() -> None:
    """On the JAX backend tf.data still reads the input: start TensorFlow now, with no GPU.

    A GPU build of TensorFlow would otherwise take GPU memory that JAX needs.
    """
    if importlib.util.find_spec("tensorflow") is None:
        return
    import tensorflow as tf

    tf.get_logger().setLevel(logging.WARNING)
    with contextlib.suppress(RuntimeError):  # already initialized: nothing left to change
        tf.config.set_visible_devices([], "GPU")


def _shard_map() -> Callable[..., Any]:
    import jax

    if hasattr(jax, "shard_map"):  # JAX >= 0.7
        return jax.shard_map
    from jax.experimental.shard_map import shard_map  # older JAX, e.g. on a pinned Kaggle image

    return shard_map


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
