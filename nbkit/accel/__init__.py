"""The accelerator. `acc = accel.setup(BACKEND, ...)`, before anything imports keras: a TPU TensorFlow can
drive (TPUStrategy), else one only JAX sees (Kaggle's TPU VMs ship tensorflow-cpu: DataParallel on JAX),
else GPUs, else the CPU (`simulate_devices=N` splits it so CI runs a TPU v5e-8's 8-replica code). It returns
an `accelerator.Accelerator`; `cache` keeps JAX's compiled programs for a later session."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from nbkit import env
from nbkit import hosts as nbhosts
from nbkit.accel.accelerator import Accelerator
from nbkit.errors import AcceleratorError
from nbkit.logs import quiet_tensorflow
from nbkit.params import BACKENDS, check_choice, check_int

# Workaround, Keras 3.10-3.15: every fit() on a tf.data dataset warns that shuffle=True is ignored, though the
# kit's datasets shuffle themselves. tests/test_accel_real.py::test_keras_still_warns_about_shuffle fails once it stops.
_SHUFFLE_WARNING = "`shuffle=True` was passed, but will be ignored"
_SET_HERE = ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "XLA_FLAGS", "PJRT_NPROC")  # what setup() may set
# A TPU generation as TPU_ACCELERATOR_TYPE names it before its "-<cores>" ("v3-8"; v5e is "v5litepod-8") -> (JAX's
# device_kind, TensorCores per chip, JAX devices per chip, HBM GiB per chip). v4 and v5p join their two cores into
# one "megacore" device per chip.
_TPUS = {
    "v2": ("TPU v2", 2, 2, 16),
    "v3": ("TPU v3", 2, 2, 32),
    "v4": ("TPU v4", 2, 1, 32),
    "v5e": ("TPU v5 lite", 1, 1, 16),
    "v5p": ("TPU v5", 2, 1, 95),
    "v6e": ("TPU v6 lite", 1, 1, 32),
}


def setup(
    backend: str = "auto",
    *,
    simulate_devices: int = 0,
    precision: str | None = None,
    cpu_compile_level: int | None = 1,
) -> Accelerator:
    """Pick the Keras backend ("auto": TensorFlow, or JAX on a TPU only JAX sees), find the devices.
    simulate_devices: split a CPU into that many replicas (no TPU or GPU found); precision: PRECISION, set now
    and printed; cpu_compile_level: XLA's on a CPU (`_set_cpu_compile_level`)."""
    check_int("simulate_devices", simulate_devices, minimum=0)
    tpu_vm = env.is_tpu_vm()
    _refuse_a_tpu_node(tpu_vm)
    keras = sys.modules.get("keras")
    chosen, reason = _choose_backend(
        backend,
        loaded=getattr(getattr(keras, "backend", None), "backend", lambda: None)(),  # None: keras not (fully) imported
        env_backend=os.environ.get("KERAS_BACKEND"),
        tpu_vm=tpu_vm,
        tf_tpu_capable=bool(env.installed_versions(["tensorflow-tpu"])),
        jax_installed=importlib.util.find_spec("jax") is not None,
        tf_installed=importlib.util.find_spec("tensorflow") is not None,
    )
    os.environ["KERAS_BACKEND"] = chosen
    warnings.filterwarnings("ignore", message=_SHUFFLE_WARNING)
    where = nbhosts.from_environment()
    if chosen == "jax":
        _set_cpu_compile_level(cpu_compile_level, tpu_vm)
        acc = _jax_accelerator(simulate_devices, where)
    elif where.joins_runtime:
        raise AcceleratorError(
            f"This is {where.describe()}, a multi-host run, which nbkit runs through JAX's distributed runtime: "
            "use backend='jax' (or 'auto')."
        )
    else:
        with quiet_tensorflow():
            import tensorflow as tf

            tf.get_logger().setLevel(logging.WARNING)  # one INFO line per all-reduce otherwise
            acc = _tf_accelerator(tf, _tpu_addresses(tpu_vm, env.platform()), simulate_devices)
        if tpu_vm and acc.kind != "tpu":
            acc.notes.append(
                "This is a TPU VM but TensorFlow cannot see its TPU (Kaggle ships tensorflow-cpu): "
                "restart the kernel and use backend='jax' (or 'auto') to train on the TPU."
            )
    acc.reason = f"{reason}; {acc.reason}"
    changes = [f"{name}={os.environ[name]}" for name in _SET_HERE if os.environ.get(name)]
    acc.notes.append(f"For this process: {'; '.join(changes)}; Keras' warning {_SHUFFLE_WARNING!r} hidden.")
    if precision is not None:
        said = acc.set_precision(precision)
        print(acc.describe(), said, sep="\n")
    return acc


def _set_cpu_compile_level(level: int | None, tpu_vm: bool) -> None:
    """XLA's LLVM optimization level, for JAX on a CPU only (no TPU, no GPU device files), before JAX starts,
    unless XLA_FLAGS sets one already (None: XLA's default, 2). 1 compiled notebook 09's step in half the time and
    ran it as fast, and took 15-20% less CPU time for 02's smoke run and EfficientNetB0's first step; 0 ran 09's
    step 20 times slower (docs/limits.md)."""
    flags = os.environ.get("XLA_FLAGS", "")
    accelerated = tpu_vm or any(Path("/dev").glob("nvidia[0-9]*"))
    if level is None or "--xla_backend_optimization_level=" in flags or accelerated:
        return
    os.environ["XLA_FLAGS"] = f"{flags.strip()} --xla_backend_optimization_level={level}".strip()


def _refuse_a_tpu_node(tpu_vm: bool) -> None:
    remote = [f"{name}={os.environ[name]}" for name in ("COLAB_TPU_ADDR", "TPU_NAME") if os.environ.get(name)]
    if remote and not tpu_vm:
        raise AcceleratorError(
            f"This runtime advertises a remote TPU ({', '.join(remote)}: a legacy TPU Node), which nbkit does not "
            "drive: it trains on TPU VMs, whose TPU is attached to the notebook's machine. Choose a TPU VM runtime "
            "(Kaggle: TPU v5e-8; Colab: any of its TPU runtimes today), or unset the variable to train on the GPU/CPU "
            "here."
        )


def _choose_backend(
    requested: str,
    *,
    loaded: str | None,
    env_backend: str | None,
    tpu_vm: bool,
    tf_tpu_capable: bool,
    jax_installed: bool,
    tf_installed: bool,
) -> tuple[str, str]:
    """Pick "tensorflow" or "jax" and say why; raise AcceleratorError when Keras already chose otherwise or the
    backend cannot be imported here."""
    check_choice("backend", requested, BACKENDS)
    if loaded is not None and loaded not in ("tensorflow", "jax"):
        raise AcceleratorError(
            f"Keras was already imported with the {loaded!r} backend; nbkit supports 'tensorflow' and "
            "'jax'. Restart the kernel and run nbkit.accel.setup() before importing keras."
        )
    if requested != "auto":
        if loaded is not None and loaded != requested:
            raise AcceleratorError(
                f"Keras was already imported with the {loaded!r} backend, and a process cannot switch "
                f"to {requested!r}. Restart the kernel and call nbkit.accel.setup(backend={requested!r}) "
                "first, before anything imports keras or tensorflow (importing tensorflow imports keras)."
            )
        _check_installed(requested, jax_installed=jax_installed, tf_installed=tf_installed)
        return requested, f"backend={requested!r} was asked for"
    if loaded is not None:
        return loaded, f"Keras was already imported with the {loaded!r} backend"
    if env_backend in ("tensorflow", "jax"):
        _check_installed(env_backend, jax_installed=jax_installed, tf_installed=tf_installed)
        return env_backend, f"KERAS_BACKEND={env_backend!r} is set"
    if tpu_vm and not tf_tpu_capable and jax_installed:
        return "jax", "a TPU VM whose TensorFlow cannot drive the TPU, so Keras runs on JAX"
    if not tf_installed and jax_installed:  # e.g. a GPU image with JAX and Keras only
        return "jax", "TensorFlow is not installed here and JAX is"
    _check_installed("tensorflow", jax_installed=jax_installed, tf_installed=tf_installed)
    return "tensorflow", "the default backend"


def _check_installed(backend: str, *, jax_installed: bool, tf_installed: bool) -> None:
    """An AcceleratorError naming what to install when `backend` cannot be imported here."""
    if backend == "jax" and not jax_installed:
        raise AcceleratorError("backend='jax' needs JAX: `pip install jax` (on a TPU VM: `pip install 'jax[tpu]'`).")
    if backend == "tensorflow" and not tf_installed:
        instead = "or use backend='jax' (JAX is installed here)" if jax_installed else "or `pip install jax`"
        raise AcceleratorError(
            f"backend='tensorflow' needs TensorFlow, which is not installed here: `pip install tensorflow`, {instead}."
        )


def _tpu_addresses(tpu_vm: bool, platform: str) -> list[str]:
    """The TPUClusterResolver `tpu=` values worth trying (empty: look for no TPU)."""
    # Colab's resolver finds its own TPU; elsewhere it would ask the GCE metadata server: slow, and pointless.
    return ["local"] if tpu_vm else [""] if platform == "colab" else []


def _tpu(device_kind: str, devices: int) -> str:
    """The TPU slice `devices` JAX devices of `device_kind` make up, in words ("TPU" for an unknown kind)."""
    for generation, (kind, cores, per_chip, gib) in _TPUS.items():
        if kind == device_kind:
            chips = max(1, devices // per_chip)
            each = f"{cores} core{'s' if cores > 1 else ''}, {gib / cores:g} GiB of HBM per core"
            return f"TPU {generation}-{chips * cores}: {chips} chips x {each}"
    return "TPU"


def _tpu_type(accelerator_type: str | None) -> str:
    """`_tpu` for a TPU VM's TPU_ACCELERATOR_TYPE ("v3-8", "v5litepod-8"): TensorFlow cannot name its TPU."""
    version, _, cores = (accelerator_type or "").rpartition("-")
    kind, cores_per_chip, devices_per_chip, _ = _TPUS.get(
        version.replace("litepod", "e").replace("lite", "e"), ("", 1, 1, 0)
    )
    return _tpu(kind, int(cores) // cores_per_chip * devices_per_chip) if cores.isdigit() else "TPU"


def _tf_accelerator(tf: Any, addresses: list[str], simulate_devices: int) -> Accelerator:
    """TPUStrategy on the first of `addresses` that connects, as the TPU guide does it
    (resolve, connect Colab's, initialize); else MirroredStrategy over GPUs (one: the default strategy); else
    the CPU, split into `simulate_devices` logical CPUs under MirroredStrategy. `tf` may be a fake for tests."""
    notes: list[str] = []
    for address in addresses:
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
            if address != "local":
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            strategy = tf.distribute.TPUStrategy(resolver)
        except Exception as error:  # resolvers raise ValueError, initialization NotFound/InvalidArgument...
            summary = f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
            notes.append(f"No TPU found by TensorFlow at tpu={address!r} ({summary}).")
            continue
        names = [d.name for d in tf.config.list_logical_devices("TPU")]
        hardware = _tpu_type(os.environ.get("TPU_ACCELERATOR_TYPE"))
        acc = Accelerator("tpu", "tensorflow", strategy.num_replicas_in_sync, names, hardware, strategy, notes=notes)
        acc.reason = f"TPUClusterResolver(tpu={address!r}) found a TPU"
        return acc
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        strategy = tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
        notes += ["simulate_devices is ignored: real GPUs were found."] if simulate_devices > 1 else []
        names, hardware = [g.name for g in gpus], details.get("device_name", "GPU")
        acc = Accelerator("gpu", "tensorflow", strategy.num_replicas_in_sync, names, hardware, strategy, notes=notes)
        acc.compute_capability, acc.reason = details.get("compute_capability"), f"TensorFlow sees {len(gpus)} GPU(s)"
        return acc
    reason = "no TPU or GPU is visible"
    if simulate_devices <= 1:
        names = [tf.config.list_logical_devices("CPU")[0].name]
        return Accelerator(
            "cpu", "tensorflow", 1, names, "cpu", tf.distribute.get_strategy(), reason=reason, notes=notes
        )
    cpu = tf.config.list_physical_devices("CPU")[0]
    with contextlib.suppress(RuntimeError):  # TensorFlow's devices were already initialized: checked below
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * simulate_devices)
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    _check_split("TensorFlow", len(names), simulate_devices, "")
    acc = Accelerator("cpu", "tensorflow", len(names), names, "cpu", tf.distribute.MirroredStrategy(names), notes=notes)
    acc.max_steps_per_execution, acc.reason = 1, f"{reason}; simulate_devices={simulate_devices} split the CPU"
    return acc


def _check_split(library: str, found: int, wanted: int, backend: str) -> None:
    if found != wanted:
        raise AcceleratorError(
            f"{library} already started with {found} CPU device(s), so it cannot be split into {wanted}. Restart "
            f"the kernel and call nbkit.accel.setup({backend}simulate_devices={wanted}) before running any "
            f"{library} code."
        )


def _jax_accelerator(simulate_devices: int, where: nbhosts.Hosts) -> Accelerator:
    """JAX's devices, with Keras' DataParallel over several; on a pod slice (`where` joins the runtime) it joins
    JAX's distributed runtime first, and the replicas are every process's devices."""
    if simulate_devices > 1:  # XLA reads these when JAX starts its backends
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
        os.environ["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={simulate_devices}".strip()
        # Workaround, jaxlib 0.4.35-0.12: XLA:CPU's pool of max(cores, devices) threads deadlocked 8-device
        # all-reduces on small machines; twice the devices of all processes (so every simulated host sums as one
        # process holding all the devices) leaves room. docs/limits.md; bench/jax_deadlock.py measures it.
        os.environ["PJRT_NPROC"] = str(max(os.cpu_count() or 1, 2 * simulate_devices * where.count))
    with quiet_tensorflow():
        if where.joins_runtime:
            nbhosts.start_runtime(where)
        import jax

        # Ordered by process, so each host's replicas are one block of the global batch (its local rows,
        # read from its files); a TPU slice may number its devices across hosts.
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
        if where.joins_runtime:
            where = nbhosts.Hosts(jax.process_index(), jax.process_count(), where.coordinator)
        if devices[0].platform == "cpu" and simulate_devices > 1:  # refused before TensorFlow and Keras load
            local = sum(1 for d in devices if d.process_index == where.index)
            _check_split("JAX", local, simulate_devices, "backend='jax', ")
        if importlib.util.find_spec("tensorflow") is not None:  # tf.data still reads the input: without the GPU
            import tensorflow as tf

            tf.get_logger().setLevel(logging.WARNING)
            with contextlib.suppress(RuntimeError):  # already initialized: nothing left to change
                tf.config.set_visible_devices([], "GPU")  # whose memory JAX needs
        import keras
    platform = devices[0].platform
    kind = "tpu" if platform == "tpu" else "gpu" if platform in ("gpu", "cuda", "rocm") else "cpu"
    ignored = kind != "cpu" and simulate_devices > 1
    notes = [f"simulate_devices is ignored: real {kind.upper()} devices were found."] if ignored else []
    capability = None
    with contextlib.suppress(TypeError, ValueError, AttributeError):  # a GPU's, as "7.5"
        capability = tuple(int(p) for p in devices[0].compute_capability.split(".")[:2]) if kind == "gpu" else None
    distribution = None
    if len(devices) > 1:
        # With several processes (a pod slice) Keras shards a tf.data dataset of global batches itself:
        # each process feeds its rows of every batch (rebatch + shard), so the notebook's pipeline is the same.
        distribution = keras.distribution.DataParallel(devices=devices)
        keras.distribution.set_distribution(distribution)
    why = {"tpu": f"JAX sees {len(devices)} TPU core(s)", "gpu": f"JAX sees {len(devices)} GPU(s)"}.get(
        kind, f"simulate_devices={simulate_devices} split the CPU" if len(devices) > 1 else "no TPU or GPU is visible"
    )
    hardware = _tpu(devices[0].device_kind, len(devices)) if kind == "tpu" else getattr(devices[0], "device_kind", kind)
    acc = Accelerator(kind, "jax", len(devices), [str(d) for d in devices], hardware, distribution=distribution)
    acc.reason, acc.notes, acc.jax_devices = why, notes, devices
    acc.compute_capability, acc.hosts = capability, where
    return acc
