"""A kernel bundle on Kaggle through the kaggle CLI, run as `python -m kaggle` (imported, it prints a login
help or exits without credentials), its output passed on redacted: push (the CLI exits 0 when Kaggle
refuses a push or drops a source: nbkit reports both as errors), status, and a run followed to its end
(status polled, log lines as they come) with its outputs fetched. A failed, cancelled or timed-out
session, or a missing expected output, is a RunError ending with the log's last lines. The bundle on
disk is never changed."""

from __future__ import annotations

import collections
import functools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import RunError
from nbkit.inputs.account import PLACEHOLDER_OWNER
from nbkit.publish import bundle, scan
from nbkit.publish.scan import redact

_TIMEOUT_S = 300
_NOT_LOGGED_IN = (
    "Not logged in to Kaggle: run `kaggle auth login`, or save an API token from kaggle.com -> Settings -> API "
    "as ~/.kaggle/kaggle.json (chmod 600), or set KAGGLE_USERNAME and KAGGLE_KEY."
)
_PUSHED = re.compile(r"Kernel version (\d+ )?successfully pushed\.\s+Please check progress at (\S+)")
_REJECTED = re.compile(r"The following are not valid (\w+) sources and could not be added to the kernel: (.*)")
_FINISHED = ("complete", "error", "cancel_requested", "cancel_acknowledged")


def _run_kaggle(*args: str) -> str:
    """`kaggle <args>`'s output, redacted; a RunError if it fails or is not logged in."""
    command = [sys.executable, "-m", "kaggle", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RunError(
            f"`kaggle {' '.join(args)}` did not answer within {_TIMEOUT_S} s; is kaggle.com reachable?"
        ) from None
    output = redact(done.stdout + done.stderr).strip()
    if "Authentication required" in output:  # the CLI's own login help, printed before it exits
        raise RunError(_NOT_LOGGED_IN)
    if done.returncode != 0:
        raise RunError(f"`kaggle {' '.join(args)}` failed: {output or f'exit code {done.returncode}'}")
    return output


def read_metadata(folder: str | Path) -> dict:
    path = Path(folder) / "kernel-metadata.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RunError(
            f"No readable {path} ({type(error).__name__}): give a bundle folder, which `python -m nbkit bundle "
            "<notebook>` writes as build/kernels/<slug>."
        ) from None


def _session_status(kernel: str) -> tuple[str, str | None, list[str]]:
    """(state, failure message, other lines the CLI printed) of the kernel's latest session."""
    output = _run_kaggle("kernels", "status", kernel)
    found = re.search(r'has status "([^"]*)"', output)
    if not found:
        raise RunError(f"Unexpected answer from `kaggle kernels status {kernel}`: {output}")
    state = found.group(1).rsplit(".", 1)[-1].lower()  # "KernelWorkerStatus.RUNNING" -> "running"
    failure = re.search(r'Failure message: "(.*)"', output)
    others = [line for line in output.splitlines() if line.strip() and "has status" not in line]
    return state, failure.group(1) if failure else None, [line for line in others if not line.startswith("Failure")]


def status(kernel: str) -> str:
    """The latest session's status ("running", "error: <message>"), then the CLI's other lines."""
    state, failure, others = _session_status(kernel)
    return "\n".join([f"{state}: {failure}" if failure else state, *others])


def _check_owner(metadata: dict, folder: Path, command: str) -> str:
    kernel = metadata.get("id", "?")
    if kernel.split("/")[0] == PLACEHOLDER_OWNER:
        then = "then push again" if command == "bundle" else f"then {command} again"
        raise RunError(
            f"{folder}/kernel-metadata.json has no owner yet (id {kernel}): a kernel id needs your Kaggle user "
            f"name to push. Log in (kaggle.json or KAGGLE_USERNAME) or pass --owner <you> to "
            f"`python -m nbkit {command}`, {then}."
        )
    return kernel


def _read_push_output(output: str) -> tuple[str, int | None, list[str]]:
    """(kernel URL, version, other lines) of `kaggle kernels push`; a RunError when Kaggle refused or dropped."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    rejected = [found.groups() for found in map(_REJECTED.match, lines) if found]
    pushed = next((found for found in map(_PUSHED.search, lines) if found), None)
    if rejected:
        where = f" Kaggle made a version anyway ({pushed.group(2)}), which runs without them." if pushed else ""
        dropped = "; ".join(f"{kind} {names}" for kind, names in rejected)
        raise RunError(
            f"Kaggle did not attach these sources: {dropped}.{where} Check each name as in its kaggle.com URL, "
            f"accept the competition's rules on its page, and push again.\nThe CLI said:\n{output}"
        )
    if pushed is None or any(line.startswith("Kernel push error") for line in lines):
        raise RunError(f"`kaggle kernels push` failed: {output}")
    others = [line for line in lines if not _PUSHED.search(line)]
    return pushed.group(2), int(pushed.group(1)) if pushed.group(1) else None, others


def push(folder: str | Path, check_status: bool = True, command: str = "bundle") -> str:
    """Scan the bundle for leaks, push it; what to print: the URL, status and warnings. `command` (bundle, run)
    is for advice."""
    folder = Path(folder)
    metadata = read_metadata(folder)
    kernel = _check_owner(metadata, folder, command)
    scan.check([folder])
    warning = bundle.retired(metadata.get("machine_shape")) if command != "run" else None  # `run` warned first
    try:
        url, version, others = _read_push_output(_run_kaggle("kernels", "push", "-p", str(folder)))
    except RunError as error:
        raise RunError(f"{error}\nThe bundle in {folder} is kept; fix the problem and push again.") from None
    lines = [f"pushed {kernel}{f' version {version}' if version else ''}: {url}"]
    try:
        lines += [f"status: {status(kernel)}"] if check_status else []
    except RunError as error:
        lines += [f"status: unknown ({error})"]
    return "\n".join(lines + ([f"warning: {warning}"] if warning else []) + others)


# ---- a pushed kernel followed to its end, its outputs fetched --------------------------------------

_TAIL_LINES = 20
_STREAM_GRACE_S = 10  # once the session ends (or time is up), how long its log stream may take to end by itself
_Echo = Callable[[str], None]
_echo_line: _Echo = functools.partial(print, flush=True)


@dataclass(frozen=True)
class _Session:
    state: str  # complete, error, ..., or "timed out"
    failure: str | None
    tail: tuple[str, ...]


class _LogStream:
    """`kaggle kernels logs <kernel> --follow` in the background: each line echoed (redacted) as it comes."""

    def __init__(self, kernel: str, echo: _Echo) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kaggle", "kernels", "logs", kernel, "--follow"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # lines as they are printed, not per 8 KB block
        )
        self.thread = threading.Thread(target=self._read, args=(echo,), daemon=True)
        self.thread.start()

    def _read(self, echo: _Echo) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            line = redact(line.rstrip("\n"))
            self.tail.append(line)
            echo(line)

    def stop(self, wait_s: float) -> None:
        self.thread.join(wait_s)
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        self.thread.join(1)


def _follow(kernel: str, timeout_s: float, interval_s: float = 30, echo: _Echo = _echo_line) -> _Session:
    """Poll the status until the session ends or `timeout_s` pass; echo each new status and its log lines."""
    deadline = time.monotonic() + timeout_s
    stream, last, said = None, None, set()
    try:
        while True:
            state, failure, others = _session_status(kernel)
            for line in set(others) - said:  # a CLI warning once, not at every poll
                echo(line)
            said |= set(others)
            if stream is None and state != "queued":
                stream = _LogStream(kernel, echo)
            over = time.monotonic() >= deadline
            if stream and (state in _FINISHED or over):
                stream.stop(_STREAM_GRACE_S)  # the log's last lines before the final status
            if state != last:
                echo(f"status: {state}" + (f" ({failure})" if failure else ""))
                last = state
            tail = tuple(stream.tail if stream else ())
            if state in _FINISHED or over:
                return _Session(state, failure, tail) if state in _FINISHED else _Session("timed out", None, tail)
            time.sleep(interval_s)
    finally:
        if stream:
            stream.stop(wait_s=0)


def _log_tail(folder: Path, lines: int = _TAIL_LINES) -> list[str]:
    """The last lines of <slug>.log, which `kaggle kernels output` saves (a JSON list of {"data", ...}, or text)."""
    logs = sorted(folder.glob("*.log"))
    if not logs:
        return []
    text = logs[0].read_text(encoding="utf-8", errors="replace")
    try:
        text = "".join(entry.get("data", "") for entry in json.loads(text))
    except (ValueError, AttributeError, TypeError):
        pass
    return redact(text).splitlines()[-lines:]


def _tail_text(lines: Sequence[str]) -> str:
    return "\n".join(["The log's last lines:", *lines]) if lines else "The session left no log."


def _check_outputs(session: _Session, folder: Path, expect: Sequence[str], kernel: str) -> None:
    tail = _log_tail(folder) or list(session.tail)
    if session.state != "complete":
        why = f": {session.failure}" if session.failure else ""
        raise RunError(
            f"{kernel} ended with status {session.state}{why}. Outputs so far: {folder}.\n{_tail_text(tail)}"
        )
    names = {p.name for p in folder.rglob("*") if p.is_file()} | {str(p.relative_to(folder)) for p in folder.rglob("*")}
    missing = [name for name in expect if name not in names]
    if missing:
        raise RunError(
            f"{kernel} completed but its outputs in {folder} lack {', '.join(missing)}: did the notebook write "
            f"them under /kaggle/working?\n{_tail_text(tail)}"
        )


def follow_and_fetch(
    kernel: str,
    outputs_dir: str | Path = "out/kaggle",
    expect: Sequence[str] = (),
    timeout_s: float = 10 * 3600,
    interval_s: float = 30,
    echo: _Echo = _echo_line,
) -> Path:
    """Follow `kernel`'s session, download its outputs into outputs_dir/<slug>/ and check them."""
    try:
        session = _follow(kernel, timeout_s, interval_s, echo)
    except RunError as error:  # e.g. the connection dropped: the session itself goes on
        raise RunError(
            f"Lost track of {kernel}: {error}\nFollow it again with `python -m nbkit follow {kernel}`."
        ) from None
    if session.state == "timed out":
        raise RunError(
            f"{kernel} had not finished after {timeout_s:g} s; it goes on on Kaggle. Follow it again with "
            f"`python -m nbkit follow {kernel}`.\n{_tail_text(session.tail)}"
        )
    folder = Path(outputs_dir) / kernel.split("/")[1]
    try:
        with atomic.staged_dir(folder) as staging:  # an earlier fetch is replaced only once this one is complete
            output = _run_kaggle("kernels", "output", kernel, "-p", str(staging), "-q")
            for line in output.splitlines():  # quiet: only what the CLI prints besides progress (warnings)
                echo(line)
    except RunError as error:
        failed = f"{kernel} ended with status {session.state}; " if session.state != "complete" else ""
        raise RunError(f"{failed}its outputs could not be downloaded: {error}\n{_tail_text(session.tail)}") from None
    _check_outputs(session, folder, expect, kernel)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    echo(f"outputs in {folder}: {', '.join(files) or 'none'}")
    for path in sorted(folder.rglob("metrics.json")):
        try:
            values = json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=2)
        except ValueError:
            values = "(not valid JSON)"
        echo(f"{path.relative_to(folder)}:\n{values}")
    return folder


def run(
    notebook: str | Path,
    bundle_options: dict[str, Any],
    kernels_dir: str | Path = "build/kernels",
    **follow_options: Any,
) -> Path:
    """Bundle, push, follow and fetch `notebook`; `bundle_options` go to `bundle.write`, `follow_options` to
    `follow_and_fetch`."""
    echo = follow_options.get("echo", _echo_line)
    folder = bundle.write(notebook, kernels_dir, **bundle_options)
    echo(f"bundled {folder}")
    echo(push(folder, check_status=False, command="run"))  # its errors say the bundle is kept
    try:
        return follow_and_fetch(read_metadata(folder)["id"], **follow_options)
    except RunError as error:
        raise RunError(
            f"{error}\nThe bundle in {folder} is kept: `python -m nbkit push {folder}` pushes it again."
        ) from None
