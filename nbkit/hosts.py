"""Which host of a pod slice this process is. On a Cloud TPU pod slice (several TPU VMs) one copy of
the notebook runs on every host, all joined by JAX's distributed runtime: each host feeds only its own
devices, every host runs the same computations in the same order, and only process 0 writes outputs.

The slice is told by the variables `keras.distribution.initialize` reads (KERAS_DISTRIBUTION_JOB_ADDRESSES,
..._NUM_PROCESSES, ..._PROCESS_ID: what `python -m nbkit launch` sets for local processes), or by a TPU
VM whose TPU_WORKER_HOSTNAMES names several hosts (JAX then finds the rest itself). Read from the
environment alone, so `staging` knows before anything starts JAX whether this process writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nbkit.errors import AcceleratorError

ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"


@dataclass(frozen=True)
class Hosts:
    """This process's place among the processes of one run: `index` of `count`."""

    index: int = 0
    count: int = 1
    coordinator: str = ""  # host:port of process 0's runtime service; "": JAX finds it (TPU VM) or one process

    @property
    def several(self) -> bool:
        return self.count > 1

    @property
    def joins_runtime(self) -> bool:
        """Whether this process joins JAX's distributed runtime: on several hosts, or when the
        variables name a coordinator (`nbkit launch --processes 1`: one host, Gloo's collectives)."""
        return self.several or bool(self.coordinator)

    @property
    def writes_outputs(self) -> bool:
        """Only process 0 writes plots, checkpoints, packages, metrics and submissions."""
        return self.index == 0

    def describe(self) -> str:
        """`process 1 of 2`, or `one process`."""
        return f"process {self.index} of {self.count}" if self.joins_runtime else "one process"


def from_environment(environ: Mapping[str, str] | None = None) -> Hosts:
    """The processes the environment describes (one, where it describes none); a malformed value
    is an AcceleratorError naming the variable."""
    environ = os.environ if environ is None else environ
    if NUM_PROCESSES in environ or PROCESS_ID in environ or ADDRESSES in environ:
        missing = [name for name in (ADDRESSES, NUM_PROCESSES, PROCESS_ID) if not environ.get(name)]
        if missing:
            raise AcceleratorError(
                f"{', '.join(missing)} not set, though other KERAS_DISTRIBUTION_* variables are: set all three "
                f"on every host ({ADDRESSES}=<host 0>:<port>, {NUM_PROCESSES}=<hosts>, {PROCESS_ID}=<0, 1, ...>), "
                "or none for one process."
            )
        count = _whole(environ, NUM_PROCESSES, 1)
        index = _whole(environ, PROCESS_ID, 0)
        if index >= count:
            raise AcceleratorError(
                f"{PROCESS_ID}={index} is not below {NUM_PROCESSES}={count}: number the hosts 0 to {count - 1}."
            )
        return Hosts(index, count, environ[ADDRESSES].split(",")[0].strip())
    workers = [h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    if len(workers) > 1:
        return Hosts(_whole(environ, "TPU_WORKER_ID", 0) if environ.get("TPU_WORKER_ID") else 0, len(workers))
    return Hosts()


def _whole(environ: Mapping[str, str], name: str, minimum: int) -> int:
    value = environ[name]
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise AcceleratorError(f"{name}={value!r} is not a whole number of at least {minimum}.")
    return number


def start_runtime(hosts: Hosts) -> None:
    """Join JAX's distributed runtime (before anything asks JAX for devices); every process must."""
    import keras

    if hosts.coordinator:
        keras.distribution.initialize(hosts.coordinator, hosts.count, hosts.index)
    else:  # a TPU VM: JAX reads the slice's hosts from the TPU's metadata
        keras.distribution.initialize()


def every_process(value: Any) -> Any:
    """`value` (a NumPy array, the same shape everywhere) from every process, stacked in process order."""
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(value)


def wait_for_all(name: str) -> None:
    """A barrier: return once every process has reached the same `name` (JAX's runtime joined)."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
