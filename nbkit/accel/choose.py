"""`setup()`: pick the Keras backend (before Keras is imported), then let it find the devices."""

from __future__ import annotations

import importlib.util
import logging
import os
import warnings
from pathlib import Path

from nbkit import env as nbenv
from nbkit import hosts as nbhosts
from nbkit.accel import compile_cache as nbcompile_cache
from nbkit.accel import jax_devices, tf_devices
from nbkit.accel.accelerator import Accelerator
from nbkit.accel.compile_cache import CompileCache
from nbkit.errors import AcceleratorError
from nbkit.logs import quiet_native_logs
from nbkit.params import BACKENDS, check_choice, check_int

__all__ = ["setup"]


def setup(
    backend: str = "auto",
    *,
    tpu: str | None = None,
    simulate_devices: int = 0,
    compile_cache: str | Path | None = None,
    precision: str | None = None,
) -> Accelerator:
    """Pick the Keras backend ("auto": TensorFlow, or JAX on a TPU only JAX sees), find the devices.
    tpu: a TPUClusterResolver name or address; simulate_devices: split a CPU into that many replicas;
    compile_cache: a folder for JAX's persistent compilation cache ("none": none); precision: PRECISION,
    set now, and then setup prints what it set."""
    check_choice("backend", backend, BACKENDS)
    check_int("simulate_devices", simulate_devices, minimum=0)
    acc = _find(backend, tpu, simulate_devices)
    if compile_cache in (None, "none"):
        acc.compile_cache = CompileCache(off_reason="none was asked for" if compile_cache else "")
    elif acc.backend != "jax":
        acc.compile_cache = CompileCache(off_reason="JAX's; the TensorFlow backend compiles again in every session")
    else:
        acc.compile_cache = nbcompile_cache.use(compile_cache, acc.jax_devices)
    acc.changes = [f"{name}={os.environ[name]}" for name in _SET_HERE if os.environ.get(name)]
    acc.changes.append(f"Keras' warning {_SHUFFLE_WARNING!r} hidden")
    if precision is not None:
        said = acc.set_precision(precision)
        print(acc.describe(), said, sep="\n")
    return acc


# What setup() may set in this process's environment (describe() lists their values).
_SET_HERE = ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "XLA_FLAGS", "PJRT_NPROC")
# Workaround, Keras 3.10-3.15: every fit() on a tf.data dataset warns that shuffle=True is ignored, though the
# kit's datasets shuffle themselves. tests/test_accel_real.py::test_keras_still_warns_about_shuffle fails once it stops.
_SHUFFLE_WARNING = "`shuffle=True` was passed, but will be ignored"


def _find(backend: str, tpu: str | None, simulate_devices: int) -> Accelerator:
    tpu_vm = nbenv.is_tpu_vm()
    chosen, reason = _choose_backend(
        backend,
        loaded=_loaded_keras_backend(),
        env_backend=os.environ.get("KERAS_BACKEND"),
        tpu_vm=tpu_vm,
        tf_tpu_capable=bool(nbenv.installed_versions(["tensorflow-tpu"])),
        jax_installed=importlib.util.find_spec("jax") is not None,
    )
    os.environ["KERAS_BACKEND"] = chosen
    # TensorFlow's C++ INFO/WARNING lines (CUDA probing, CPU features) drown notebook output.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", message=_SHUFFLE_WARNING)
    hosts = nbhosts.from_environment()
    if chosen == "jax":
        return jax_devices.find_accelerator(simulate_devices, reason, hosts)
    if hosts.joins_runtime:
        raise AcceleratorError(
            f"This is {hosts.describe()}, a multi-host run, which nbkit runs through JAX's distributed runtime: "
            "use backend='jax' (or 'auto'). A TPU Pod driven by one TensorFlow process is named with tpu=... instead."
        )
    addresses = _tpu_addresses(tpu, nbenv.tpu_address(), tpu_vm, nbenv.platform())
    with quiet_native_logs():
        import tensorflow as tf

        tf.get_logger().setLevel(logging.WARNING)  # one INFO line per all-reduce otherwise
        acc = tf_devices.find_accelerator(
            tf, addresses, explicit_tpu=tpu is not None, simulate_devices=simulate_devices
        )
    acc.reason = f"{reason}; {acc.reason}"
    if tpu_vm and acc.kind != "tpu":
        acc.notes.append(
            "This is a TPU VM but TensorFlow cannot see its TPU (Kaggle ships tensorflow-cpu): "
            "restart the kernel and use backend='jax' (or 'auto') to train on the TPU."
        )
    return acc


def _loaded_keras_backend() -> str | None:
    import sys

    keras = sys.modules.get("keras")
    try:
        return keras.backend.backend() if keras is not None else None
    except AttributeError:  # imported half-way (e.g. an import error earlier)
        return None


def _choose_backend(
    requested: str,
    *,
    loaded: str | None,
    env_backend: str | None,
    tpu_vm: bool,
    tf_tpu_capable: bool,
    jax_installed: bool,
) -> tuple[str, str]:
    """Pick "tensorflow" or "jax" and say why; raise AcceleratorError when Keras already chose otherwise."""
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
        if requested == "jax" and not jax_installed:
            raise AcceleratorError(
                "backend='jax' needs JAX: `pip install jax` (on a TPU VM: `pip install 'jax[tpu]'`)."
            )
        return requested, f"backend={requested!r} was asked for"
    if loaded is not None:
        return loaded, f"Keras was already imported with the {loaded!r} backend"
    if env_backend in ("tensorflow", "jax"):
        return env_backend, f"KERAS_BACKEND={env_backend!r} is set"
    if tpu_vm and not tf_tpu_capable and jax_installed:
        return "jax", "a TPU VM whose TensorFlow cannot drive the TPU, so Keras runs on JAX"
    return "tensorflow", "the default backend"


def _tpu_addresses(tpu: str | None, advertised: str | None, tpu_vm: bool, platform: str) -> list[str]:
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
