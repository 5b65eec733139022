"""What JAX finds (TPU cores, GPUs, or N simulated CPU devices), with Keras' DataParallel over several."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
from typing import Any

from nbkit import hosts as nbhosts
from nbkit.accel import tpu
from nbkit.accel.accelerator import Accelerator
from nbkit.accel.precision import recommended
from nbkit.errors import AcceleratorError
from nbkit.logs import quiet_native_logs

_KINDS = {"tpu": "tpu", "gpu": "gpu", "cuda": "gpu", "rocm": "gpu"}  # JAX platform -> device kind


def _request_cpu_devices(count: int, processes: int = 1) -> None:
    """Ask XLA for `count` host devices (read when JAX starts its backends), and enough threads to run them."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = f"{flags.strip()} --xla_force_host_platform_device_count={count}".strip()
    # Workaround, jaxlib 0.4.35-0.12: XLA:CPU's pool of max(cores, devices) threads deadlocked 8-device
    # all-reduces on small machines; twice the devices of all `processes` (so every simulated host sums as one
    # process holding all the devices) leaves room. docs/limits.md; bench/jax_deadlock.py measures it.
    os.environ["PJRT_NPROC"] = str(max(os.cpu_count() or 1, 2 * count * processes))


def find_accelerator(simulate_devices: int, reason: str, hosts: nbhosts.Hosts | None = None) -> Accelerator:
    """JAX's devices as an Accelerator; on a pod slice (`hosts`) it joins JAX's distributed runtime first,
    and the replicas are every process's devices."""
    hosts = hosts or nbhosts.Hosts()
    if simulate_devices > 1:
        _request_cpu_devices(simulate_devices, hosts.count)
    devices, hosts = _devices(hosts)
    local = [d for d in devices if d.process_index == hosts.index]
    kind = _KINDS.get(devices[0].platform, "cpu")
    notes: list[str] = []
    if kind == "cpu" and simulate_devices > 1 and len(local) != simulate_devices:
        raise AcceleratorError(
            f"JAX already started with {len(local)} CPU device(s), so it cannot be split into "
            f"{simulate_devices}. Restart the kernel and call nbkit.accel.setup(backend='jax', "
            f"simulate_devices={simulate_devices}) before running any JAX code."
        )
    if kind != "cpu" and simulate_devices > 1:
        notes.append(f"simulate_devices is ignored: real {kind.upper()} devices were found.")
    capability = _parse_capability(getattr(devices[0], "compute_capability", None)) if kind == "gpu" else None
    with quiet_native_logs():
        _prepare_tensorflow_for_input()
        import keras

    distribution = None
    if len(devices) > 1:
        # With several processes (a pod slice) Keras shards a tf.data dataset of global batches itself:
        # each process feeds its rows of every batch (rebatch + shard), so the notebook's pipeline is the same.
        distribution = keras.distribution.DataParallel(devices=devices)
        keras.distribution.set_distribution(distribution)
    simulated = kind == "cpu" and len(devices) > 1
    why = {"tpu": f"JAX sees {len(devices)} TPU core(s)", "gpu": f"JAX sees {len(devices)} GPU(s)"}.get(
        kind, f"simulate_devices={simulate_devices} split the CPU" if simulated else "no TPU or GPU is visible"
    )
    return Accelerator(
        kind=kind,
        backend="jax",
        num_replicas=len(devices),
        device_names=[str(d) for d in devices],
        hardware=getattr(devices[0], "device_kind", kind),
        distribution=distribution,
        recommended_precision=recommended(kind, capability),
        compute_capability=capability,
        tpu=tpu.from_device_kind(devices[0].device_kind, len(devices)) if kind == "tpu" else None,
        simulated=simulated,
        reason=f"{reason}; {why}",
        notes=notes,
        jax_devices=list(devices),
        hosts=hosts,
        local_replicas=tuple(i for i, d in enumerate(devices) if d.process_index == hosts.index),
    )


def _devices(hosts: nbhosts.Hosts) -> tuple[list[Any], nbhosts.Hosts]:
    """Every process's devices, and `hosts` as JAX numbered them (a TPU VM's)."""
    with quiet_native_logs():
        if hosts.joins_runtime:
            nbhosts.start_runtime(hosts)
        import jax

        # Ordered by process, so each host's replicas are one block of the global batch (its local rows,
        # read from its files); a TPU slice may number its devices across hosts.
        devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
        if hosts.joins_runtime:
            hosts = nbhosts.Hosts(jax.process_index(), jax.process_count(), hosts.coordinator)
    return devices, hosts


def _parse_capability(value: Any) -> tuple[int, int] | None:
    """JAX gives compute capability as "7.5"; TensorFlow as (7, 5)."""
    try:
        major, minor = str(value).split(".")[:2]
        return int(major), int(minor)
    except (TypeError, ValueError):
        return None


def _prepare_tensorflow_for_input() -> None:
    """tf.data still reads the input on JAX: start TensorFlow now without the GPU, whose memory JAX needs."""
    if importlib.util.find_spec("tensorflow") is None:
        return
    import tensorflow as tf

    tf.get_logger().setLevel(logging.WARNING)
    with contextlib.suppress(RuntimeError):  # already initialized: nothing left to change
        tf.config.set_visible_devices([], "GPU")
