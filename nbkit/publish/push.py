"""Push a kernel bundle with the real kaggle CLI (`kaggle kernels push -p`, `kaggle kernels status`).

The CLI runs as a subprocess of this interpreter (`python -m kaggle`): importing `kaggle` in-process
prints a login help text, or exits, when no credentials are set up. Its output is passed on with
every known secret value redacted. The bundle on disk is never changed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from nbkit.errors import PushError
from nbkit.publish import scan
from nbkit.publish.scan import redact

TIMEOUT_S = 300
NOT_LOGGED_IN = (
    "Not logged in to Kaggle: run `kaggle auth login`, or save an API token from kaggle.com -> Settings -> API "
    "as ~/.kaggle/kaggle.json (chmod 600), or set KAGGLE_USERNAME and KAGGLE_KEY."
)


@dataclass(frozen=True)
class Pushed:
    """What the server answered to a push."""

    kernel: str  # owner/slug
    url: str
    version: int | None
    status: str  # the session status right after the push, or why it is unknown

    def describe(self) -> str:
        version = f" version {self.version}" if self.version else ""
        return f"pushed {self.kernel}{version}: {self.url}\nstatus: {self.status}"


def run_kaggle(*args: str) -> str:
    """Run `kaggle <args>`; its stdout+stderr, redacted. A PushError if it fails or is not logged in."""
    command = [sys.executable, "-m", "kaggle", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PushError(
            f"`kaggle {' '.join(args)}` did not answer within {TIMEOUT_S} s; is kaggle.com reachable?"
        ) from None
    output = redact(done.stdout + done.stderr).strip()
    if "Authentication required" in output:  # the CLI's own login help, printed before it exits
        raise PushError(NOT_LOGGED_IN)
    if done.returncode != 0:
        raise PushError(f"`kaggle {' '.join(args)}` failed: {output or f'exit code {done.returncode}'}")
    return output


def read_metadata(folder: str | Path) -> dict:
    """The bundle's kernel-metadata.json, or a PushError saying how to make one."""
    path = Path(folder) / "kernel-metadata.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PushError(
            f"No readable {path} ({type(error).__name__}): build the bundle first, e.g. "
            "`python -m nbkit bundle notebooks/02_flowers_classifier.py --accelerator tpu-v5e-8`."
        ) from None


def status(kernel: str) -> str:
    """The status of the kernel's latest session (e.g. queued, running, complete, error + message)."""
    output = run_kaggle("kernels", "status", kernel)
    found = re.search(r'has status "([^"]*)"', output)
    if not found:
        raise PushError(f"Unexpected answer from `kaggle kernels status {kernel}`: {output}")
    state = found.group(1).rsplit(".", 1)[-1].lower()  # "KernelWorkerStatus.RUNNING" -> "running"
    failure = re.search(r'Failure message: "(.*)"', output)
    return f"{state}: {failure.group(1)}" if failure else state


def push(folder: str | Path, check_status: bool = True) -> Pushed:
    """Scan the bundle for leaks, push it, and report the kernel's URL and status (or the server's error)."""
    folder = Path(folder)
    kernel = read_metadata(folder).get("id", "?")
    scan.check([folder])
    try:
        output = run_kaggle("kernels", "push", "-p", str(folder))
        pushed = re.search(r"successfully pushed.*?(https?://\S+)", output, re.DOTALL)
        if "Kernel push error" in output or not pushed:  # the CLI exits 0 on some server-side errors
            raise PushError(f"`kaggle kernels push` failed: {output}")
    except PushError as error:
        raise PushError(f"{error}\nThe bundle in {folder} is kept; fix the problem and push again.") from None
    version = re.search(r"Kernel version (\d+)", output)
    try:
        state = status(kernel) if check_status else "not asked"
    except PushError as error:
        state = f"unknown ({error})"
    return Pushed(kernel, pushed.group(1), int(version.group(1)) if version else None, state)
