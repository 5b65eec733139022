"""A notebook run on Kaggle through the kaggle CLI: bundle, push, follow (status polled, log lines as they
come), fetch the outputs. A failed, cancelled or timed-out session, or a missing expected output, is a
RunError ending with the log's last lines; the local bundle is always kept."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.errors import RunError
from nbkit.publish import push
from nbkit.publish.scan import redact

_TAIL_LINES = 20
_STREAM_GRACE_S = 10  # once the session ends (or time is up), how long its log stream may take to end by itself
_Echo = Callable[[str], None]


def _echo_line(line: str) -> None:
    print(line, flush=True)


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
            state, failure, others = push.session_status(kernel)
            for line in set(others) - said:  # a CLI warning once, not at every poll
                echo(line)
            said |= set(others)
            if stream is None and state != "queued":
                stream = _LogStream(kernel, echo)
            if state in push.FINISHED and stream:
                stream.stop(_STREAM_GRACE_S)  # the log's last lines before the final status
            if state != last:
                echo(f"status: {state}" + (f" ({failure})" if failure else ""))
                last = state
            if state in push.FINISHED:
                return _Session(state, failure, tuple(stream.tail if stream else ()))
            if time.monotonic() >= deadline:
                if stream:
                    stream.stop(_STREAM_GRACE_S)
                return _Session("timed out", None, tuple(stream.tail if stream else ()))
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


def _fetch(kernel: str, folder: str | Path, echo: _Echo = _echo_line) -> Path:
    """Download the session's outputs and log into `folder`, replacing an earlier fetch only once complete."""
    from nbkit import atomic

    folder = Path(folder)
    with atomic.staged_dir(folder) as staging:
        output = push.run_kaggle("kernels", "output", kernel, "-p", str(staging), "-q")
        for line in output.splitlines():  # quiet: only what the CLI prints besides progress (warnings)
            echo(line)
    return folder


def _metrics(folder: Path) -> dict[str, Any]:
    found = {}
    for path in sorted(folder.rglob("metrics.json")):
        try:
            found[str(path.relative_to(folder))] = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            found[str(path.relative_to(folder))] = "(not valid JSON)"
    return found


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
        _fetch(kernel, folder, echo)
    except RunError as error:
        failed = f"{kernel} ended with status {session.state}; " if session.state != "complete" else ""
        raise RunError(f"{failed}its outputs could not be downloaded: {error}\n{_tail_text(session.tail)}") from None
    _check_outputs(session, folder, expect, kernel)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    echo(f"outputs in {folder}: {', '.join(files) or 'none'}")
    for name, values in _metrics(folder).items():
        echo(f"{name}:\n{json.dumps(values, indent=2)}")
    return folder


def run(
    notebook: str | Path,
    bundle_options: dict[str, Any],
    kernels_dir: str | Path = "build/kernels",
    **follow_options: Any,
) -> Path:
    """Bundle, push, follow and fetch `notebook`; `bundle_options` go to `bundle.write`, `follow_options` to
    `follow_and_fetch`."""
    from nbkit.publish import bundle

    echo = follow_options.get("echo", _echo_line)
    folder = bundle.write(notebook, kernels_dir, **bundle_options)
    echo(f"bundled {folder}")
    pushed = push.push(folder, check_status=False, command="run")  # its errors say the bundle is kept
    echo(pushed.describe())
    try:
        return follow_and_fetch(pushed.kernel, **follow_options)
    except RunError as error:
        raise RunError(
            f"{error}\nThe bundle in {folder} is kept: `python -m nbkit push {folder}` pushes it again."
        ) from None
