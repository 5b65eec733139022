"""What TensorFlow finds: a TPU, GPUs or the CPU (split when simulating replicas). Each function takes
the `tensorflow` module, so tests can hand in a fake one with TPUs or GPUs."""

from __future__ import annotations

import os
from typing import Any

from nbkit.accel import tpu
from nbkit.accel.accelerator import Accelerator
from nbkit.accel.precision import recommended
from nbkit.errors import AcceleratorError


def find_accelerator(tf: Any, addresses: list[str], *, explicit_tpu: bool, simulate_devices: int) -> Accelerator:
    """A TPU at one of `addresses`, else GPUs, else the CPU; notes say what was tried."""
    notes: list[str] = []
    return (
        _tpu_accelerator(tf, addresses, explicit_tpu, notes)
        or _gpu_accelerator(tf, simulate_devices, notes)
        or _cpu_accelerator(tf, simulate_devices, notes)
    )


def _tpu_accelerator(tf: Any, addresses: list[str], explicit_tpu: bool, notes: list[str]) -> Accelerator | None:
    """TPUStrategy on the first address that connects (None if none does; an error if one was named), as
    the TPU guide does it: resolve, connect (a remote TPU only), initialize."""
    for address in addresses:
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
            if address != "local":
                tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            strategy = tf.distribute.TPUStrategy(resolver)
        except Exception as error:  # resolvers raise ValueError, initialization NotFound/InvalidArgument...
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            summary = f"{type(error).__name__}: {first_line}"
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
            hardware="TPU",
            strategy=strategy,
            recommended_precision=recommended("tpu"),
            tpu=tpu.from_accelerator_type(os.environ.get("TPU_ACCELERATOR_TYPE")),
            reason=f"TPUClusterResolver(tpu={address!r}) found a TPU",
            remote_tpu=address != "local",
            notes=notes,
        )
    return None


def _gpu_accelerator(tf: Any, simulate_devices: int, notes: list[str]) -> Accelerator | None:
    """MirroredStrategy over several GPUs (Kaggle's 2x T4), the default strategy on one; None without GPUs."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    details = tf.config.experimental.get_device_details(gpus[0])
    strategy = tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()
    if simulate_devices > 1:
        notes.append("simulate_devices is ignored: real GPUs were found.")
    return Accelerator(
        kind="gpu",
        backend="tensorflow",
        num_replicas=strategy.num_replicas_in_sync,
        device_names=[g.name for g in gpus],
        hardware=details.get("device_name", "GPU"),
        strategy=strategy,
        recommended_precision=recommended("gpu", details.get("compute_capability")),
        compute_capability=details.get("compute_capability"),
        reason=f"TensorFlow sees {len(gpus)} GPU(s)",
        notes=notes,
    )


def _cpu_accelerator(tf: Any, simulate_devices: int, notes: list[str]) -> Accelerator:
    """The CPU: one replica, or `simulate_devices` logical CPUs under MirroredStrategy."""
    simulated = simulate_devices > 1
    names = _split_cpu(tf, simulate_devices) if simulated else [tf.config.list_logical_devices("CPU")[0].name]
    return Accelerator(
        kind="cpu",
        backend="tensorflow",
        num_replicas=len(names),
        device_names=names,
        hardware="cpu",
        strategy=tf.distribute.MirroredStrategy(names) if simulated else tf.distribute.get_strategy(),
        max_steps_per_execution=1 if simulated else None,
        simulated=simulated,
        reason="no TPU or GPU is visible"
        + (f"; simulate_devices={simulate_devices} split the CPU" if simulated else ""),
        notes=notes,
    )


def _split_cpu(tf: Any, count: int) -> list[str]:
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:  # TensorFlow's devices were already initialized
        existing = tf.config.list_logical_devices("CPU")
        if len(existing) != count:
            raise AcceleratorError(
                f"TensorFlow already started with {len(existing)} CPU device(s), so it cannot be split into "
                f"{count}. Restart the kernel and call nbkit.accel.setup(simulate_devices={count}) before "
                "running any TensorFlow code."
            ) from error
    return [d.name for d in tf.config.list_logical_devices("CPU")]
