"""Push a kernel bundle with the kaggle CLI, run as `python -m kaggle` (imported, it prints a login help or
exits without credentials); its output passed on redacted. It exits 0 when Kaggle refuses a push or drops
a source: nbkit reports both as errors. The bundle on disk is never changed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from nbkit.errors import RunError
from nbkit.inputs.account import PLACEHOLDER_OWNER
from nbkit.publish import kernel_metadata, scan
from nbkit.publish.scan import redact

_TIMEOUT_S = 300
_NOT_LOGGED_IN = (
    "Not logged in to Kaggle: run `kaggle auth login`, or save an API token from kaggle.com -> Settings -> API "
    "as ~/.kaggle/kaggle.json (chmod 600), or set KAGGLE_USERNAME and KAGGLE_KEY."
)
_PUSHED = re.compile(r"Kernel version (\d+ )?successfully pushed\.\s+Please check progress at (\S+)")
_REJECTED = re.compile(r"The following are not valid (\w+) sources and could not be added to the kernel: (.*)")
FINISHED = ("complete", "error", "cancel_requested", "cancel_acknowledged")


@dataclass(frozen=True)
class _Pushed:
    kernel: str  # owner/slug
    url: str
    version: int | None
    status: str | None  # the session status right after the push, or why it is unknown; None: not asked
    messages: tuple[str, ...] = ()  # warnings (a retired accelerator) and lines nbkit does not know

    def describe(self) -> str:
        version = f" version {self.version}" if self.version else ""
        notes = "".join(f"\n{line}" for line in self.messages)
        state = f"\nstatus: {self.status}" if self.status else ""
        return f"pushed {self.kernel}{version}: {self.url}{state}{notes}"


def run_kaggle(*args: str) -> str:
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
    if not Path(folder).is_dir():
        raise RunError(
            f"{folder} is not a folder: give a bundle folder, which `python -m nbkit bundle <notebook>` writes as "
            "build/kernels/<slug>."
        )
    path = Path(folder) / "kernel-metadata.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise RunError(
            f"No readable {path} ({type(error).__name__}): build the bundle first, e.g. "
            "`python -m nbkit bundle notebooks/02_flowers_classifier.py --accelerator tpu-v5e-8`."
        ) from None


def session_status(kernel: str) -> tuple[str, str | None, list[str]]:
    """(state, failure message, other lines the CLI printed) of the kernel's latest session."""
    output = run_kaggle("kernels", "status", kernel)
    found = re.search(r'has status "([^"]*)"', output)
    if not found:
        raise RunError(f"Unexpected answer from `kaggle kernels status {kernel}`: {output}")
    state = found.group(1).rsplit(".", 1)[-1].lower()  # "KernelWorkerStatus.RUNNING" -> "running"
    failure = re.search(r'Failure message: "(.*)"', output)
    others = [line for line in output.splitlines() if line.strip() and "has status" not in line]
    return state, failure.group(1) if failure else None, [line for line in others if not line.startswith("Failure")]


def status(kernel: str) -> str:
    """The latest session's status ("running", "error: <message>"), then the CLI's other lines."""
    state, failure, others = session_status(kernel)
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


def push(folder: str | Path, check_status: bool = True, command: str = "bundle") -> _Pushed:
    """Scan the bundle for leaks, push it, report the URL and status. `command` (bundle, run) is for advice."""
    folder = Path(folder)
    metadata = read_metadata(folder)
    kernel = _check_owner(metadata, folder, command)
    scan.check([folder])
    warning = kernel_metadata.retired(metadata.get("machine_shape"))
    try:
        url, version, others = _read_push_output(run_kaggle("kernels", "push", "-p", str(folder)))
    except RunError as error:
        raise RunError(f"{error}\nThe bundle in {folder} is kept; fix the problem and push again.") from None
    try:
        state = status(kernel) if check_status else None
    except RunError as error:
        state = f"unknown ({error})"
    return _Pushed(kernel, url, version, state, tuple(([f"warning: {warning}"] if warning else []) + others))
