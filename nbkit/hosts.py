"""Which host of a pod slice this process is: one copy of the notebook runs on every host, joined by JAX's
distributed runtime; each feeds its own devices and only process 0 writes outputs. Told by the variables
`keras.distribution.initialize` reads (what `nbkit launch` sets) or a TPU VM's TPU_WORKER_HOSTNAMES: the
environment alone, so `staging` knows whether this process writes before anything starts JAX."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

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
        """On several hosts, or where a coordinator is named (`nbkit launch --processes 1`)."""
        return self.several or bool(self.coordinator)

    @property
    def writes_outputs(self) -> bool:
        return self.index == 0

    def describe(self) -> str:
        return f"process {self.index} of {self.count}" if self.joins_runtime else "one process"


def from_environment(environ: Mapping[str, str] | None = None) -> Hosts:
    """The processes the environment describes (one, where it describes none)."""
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
    if not value.strip().isdigit() or int(value) < minimum:
        raise AcceleratorError(f"{name}={value!r} is not a whole number of at least {minimum}.")
    return int(value)


def start_runtime(hosts: Hosts) -> None:
    """Join JAX's distributed runtime, before anything asks JAX for devices; every process must."""
    import keras

    if hosts.coordinator:
        keras.distribution.initialize(hosts.coordinator, hosts.count, hosts.index)
    else:  # a TPU VM: JAX reads the slice's hosts from the TPU's metadata
        keras.distribution.initialize()
