"""`python -m nbkit launch`: a notebook run as P local processes joined like the hosts of a pod slice.

Each process is a papermill run of the notebook with D simulated CPU devices (`SIMULATE_DEVICES`) and
the variables `keras.distribution.initialize` reads, so `accel.setup()` joins JAX's distributed runtime
on 127.0.0.1 exactly as on a slice. Their output is streamed with a `[p<i>] ` prefix. The run fails as
a whole: when one process fails, or the run passes its timeout, every process and its Jupyter kernel is
stopped, and a RunError names the process that failed and shows its last lines.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from nbkit.errors import ParameterError, RunError
from nbkit.hosts import ADDRESSES, NUM_PROCESSES, PROCESS_ID
from nbkit.publish.scan import known_secrets, redact

_GRACE_S = 10  # a stopped process's time to end on SIGTERM before SIGKILL
_SETTLE_S = 5  # after a first failure, time for the others to end on their own (a dead host is named first)
_TAIL_LINES = 20
_SET_BY_LAUNCH = ("BACKEND", "SIMULATE_DEVICES")  # parameters every launched notebook must take
_DEAD_KERNEL = ("DeadKernelError", "Kernel died")  # what papermill (nbclient) says when a kernel vanishes


@dataclass
class _Process:
    """One papermill run of the launch: its index, executed notebook, last lines and end."""

    index: int
    popen: subprocess.Popen[str]
    notebook: Path
    started: float
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))
    kernel_died: bool = False
    ended: float | None = None

    def describe_failure(self) -> str:
        why = "its kernel died" if self.kernel_died else f"exit code {self.popen.returncode}"
        lines = "\n".join(f"    {line}" for line in self.tail)
        return f"process {self.index} failed ({why}); its executed notebook: {self.notebook}. Its last lines:\n{lines}"


def launch(
    notebook: str | Path,
    processes: int,
    devices_per_process: int,
    parameters: list[tuple[str, str]] | None = None,
    out: str | Path = "out/launch",
    timeout_s: float = 3600,
) -> list[_Process]:
    """Run `notebook` as `processes` papermill processes of `devices_per_process` devices each, with
    papermill `parameters` (name, value) for all; return them once all ended well (RunError else)."""
    source = _executable_notebook(notebook)
    arguments = _papermill_parameters(parameters or [], processes, devices_per_process)
    if not timeout_s > 0:
        raise ParameterError(f"--timeout {timeout_s:g}: give the seconds the run may take, more than 0 (default 3600).")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ParameterError(
            f"--out {out}: no folder for the executed notebooks there ({error.strerror}); give another."
        ) from None
    address = f"127.0.0.1:{coordinator_port()}"
    printing = threading.Lock()
    secrets = known_secrets()  # kept out of the streamed lines, as out of every log
    started: list[_Process] = []
    readers: list[threading.Thread] = []
    try:
        for index in range(processes):
            executed = out / f"{source.stem}.p{index}.ipynb"
            # papermill's command line, its kernel on socket files: P kernels start together, no ports to race for
            command = [sys.executable, "-m", "nbkit.publish.engine", str(source), str(executed), "--cwd", os.getcwd()]
            command += ["--no-progress-bar", "--log-output", *arguments]  # the cells' output, as it comes
            env = {**os.environ, ADDRESSES: address, NUM_PROCESSES: str(processes), PROCESS_ID: str(index)}
            popen = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )
            process = _Process(index, popen, executed, time.monotonic())
            started.append(process)
            readers.append(threading.Thread(target=_relay, args=(process, printing, secrets), daemon=True))
            readers[-1].start()
        _wait_for_all(started, timeout_s)
    except BaseException:  # a failure, the timeout, or Ctrl-C: nothing of the run may outlive it
        _stop(started)
        raise
    finally:
        for reader in readers:
            reader.join(timeout=_GRACE_S)
    return started


def _executable_notebook(notebook: str | Path) -> Path:
    path = Path(notebook)
    if path.suffix == ".py":  # a jupytext source: papermill runs its paired .ipynb
        path = path.with_suffix(".ipynb")
    if not path.is_file():
        raise ParameterError(f"No notebook {path}: give notebooks/NN_name.py (with its .ipynb beside it) or a .ipynb.")
    import papermill

    declared = papermill.inspect_notebook(str(path))  # its parameters cell, read as papermill reads it
    missing = [name for name in _SET_BY_LAUNCH if name not in declared]
    if missing:
        raise ParameterError(
            f"{path.name} cannot run as several processes: it has no {' or '.join(missing)} parameter, which launch "
            "sets (notebooks that train on a pod slice take both: 01, 02, 05). Run it alone, with papermill."
        )
    return path


def _papermill_parameters(parameters: list[tuple[str, str]], processes: int, devices: int) -> list[str]:
    """papermill's `-p NAME VALUE` arguments: the user's, plus the JAX backend and the devices per process."""
    if processes < 1 or devices < 1:
        raise ParameterError(
            f"--processes {processes} --devices-per-process {devices}: both must be at least 1 (a pod slice in "
            "miniature: e.g. --processes 2 --devices-per-process 4, as 8 devices)."
        )
    given, launched = dict(parameters), {"BACKEND": "jax", "SIMULATE_DEVICES": str(devices)}
    for name, value in launched.items():
        if given.setdefault(name, value) != value:
            raise ParameterError(
                f"-p {name} {given[name]}: launch sets it to {value} (JAX's runtime, --devices-per-process); "
                "leave it out."
            )
    return [item for name, value in given.items() for item in ("-p", name, value)]


def coordinator_port() -> int:
    """A free port for JAX's coordinator, below Linux's ephemeral range (32768 and up): between this
    check and process 0 binding it seconds later, no other process's port 0 or connection can take it."""
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # in use: another
                continue
            return port


def _relay(process: _Process, printing: threading.Lock, secrets: dict[str, str]) -> None:
    """Copy one process's output, line by line, prefixed, keeping its last lines."""
    assert process.popen.stdout is not None
    for line in process.popen.stdout:
        line = redact(line.rstrip("\n"), secrets)
        process.tail.append(line)
        process.kernel_died |= any(sign in line for sign in _DEAD_KERNEL)
        with printing:
            print(f"[p{process.index}] {line}", flush=True)


def _wait_for_all(started: list[_Process], timeout_s: float) -> None:
    """Return when every process ended well; RunError at the first failure or at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        for process in started:
            if process.ended is None and process.popen.poll() is not None:
                process.ended = time.monotonic()
        failed = [p for p in started if p.ended is not None and p.popen.returncode != 0]
        if failed:
            settle = time.monotonic() + _SETTLE_S  # a host that died first is the one to name
            while time.monotonic() < settle and any(p.popen.poll() is None for p in started):
                time.sleep(0.2)
            time.sleep(0.5)  # the relays read the last lines
            ended = [p for p in started if p.popen.poll() is not None and p.popen.returncode != 0]
            first = min(ended, key=lambda p: (not p.kernel_died, p.ended or time.monotonic()))
            raise RunError(f"{first.describe_failure()}\nEvery other process of the run was stopped.")
        if all(p.ended is not None for p in started):
            return
        if time.monotonic() > deadline:
            running = ", ".join(str(p.index) for p in started if p.ended is None)
            raise RunError(
                f"The run passed its timeout of {timeout_s:g} s with process(es) {running} still running (a hang: "
                "e.g. one waiting for the others in a collective); every process was stopped."
            )
        time.sleep(0.2)


def _stop(started: list[_Process]) -> None:
    """Stop every process of the run and everything it started (the kernels run in sessions of their own)."""
    import psutil

    tree: list[psutil.Process] = []
    for process in started:
        if process.popen.poll() is None:  # not one that ended and was reaped: its pid may be another program's now
            with contextlib.suppress(psutil.NoSuchProcess):
                parent = psutil.Process(process.popen.pid)
                tree += [parent, *parent.children(recursive=True)]  # before the parent ends and its kernel is orphaned
    for member in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _, alive = psutil.wait_procs(tree, timeout=_GRACE_S)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=_GRACE_S)
    for process in started:
        process.popen.wait()


def describe(started: list[_Process]) -> str:
    """What ended well: each process's executed notebook and seconds."""
    return "\n".join(f"process {p.index}: {p.notebook} ({(p.ended or p.started) - p.started:.0f} s)" for p in started)
