"""Run the test suites environment by environment, each reported by name with its versions, and a
table at the end: what `make test` runs. Exit status 1 if any environment has a failure.

    python tools/matrix.py current xla kaggle-tpu floor colab-gpu
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
SMOKE = ["tests/matrix/test_smoke_runs.py"]
# name -> (venv, pytest arguments, extra environment, what it is)
ENVIRONMENTS = {
    "current": (
        ".venv",
        [
            "tests",
            "notebooks",
            *NBVAL,
            "--ignore=tests/xla",
            "--ignore=tests/matrix",
            "--ignore=notebooks/04_pytorch_xla.ipynb",
        ],
        {},
        "envs/main.lock: the full suite",
    ),
    "xla": (
        ".venv-xla",
        ["tests/xla", "tests/test_import.py", "notebooks/04_pytorch_xla.ipynb", *NBVAL],
        {"PJRT_DEVICE": "CPU"},
        "envs/xla.lock: notebook 04 and nbkit.pytorch through torch_xla",
    ),
    "kaggle-tpu": (
        ".venv-kaggle-tpu",
        [*SMOKE, "tests/matrix/test_pytorch_xla.py"],
        {"PJRT_DEVICE": "CPU"},
        "Kaggle's TPU image: every notebook's smoke run",
    ),
    "floor": (
        ".venv-floor",
        [*SMOKE, "tests/matrix/test_pytorch_xla.py"],
        {"PJRT_DEVICE": "CPU"},
        "the oldest versions nbkit declares: every notebook's smoke run",
    ),
    "colab-gpu": (
        ".venv-colab-gpu",
        SMOKE,
        {},
        "Colab's runtime (Kaggle's GPU image): the Keras notebooks' smoke runs",
    ),
}
VERSIONS = """
import platform
from importlib import metadata
found = [f"Python {platform.python_version()}"]
for name in ("tensorflow", "tensorflow-cpu", "keras", "jax", "numpy", "torch", "torch_xla"):
    try:
        found.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
print(", ".join(found))
"""


def run(name: str) -> tuple[str, int, int, float]:
    """Run one environment's tests; (versions, tests, failures, seconds)."""
    venv, arguments, extra, what = ENVIRONMENTS[name]
    python = str(REPO / venv / "bin" / "python")
    versions = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, check=True).stdout.strip()
    print(f"\n=== environment {name}: {what}\n=== {versions}", flush=True)
    report = Path(tempfile.mkdtemp(prefix=f"nbkit-{name}-")) / "junit.xml"
    env = {**os.environ, **extra, "NBKIT_WORKING_DIR": tempfile.mkdtemp(prefix=f"nbkit-{name}-work-")}
    start = time.perf_counter()
    subprocess.run([python, "-m", "pytest", *arguments, f"--junitxml={report}"], cwd=REPO, env=env)
    seconds = time.perf_counter() - start
    if not report.exists():  # pytest could not even start
        return versions, 0, 1, seconds
    suites = ElementTree.parse(report).getroot().iter("testsuite")
    totals = [(int(s.get("tests", 0)), int(s.get("failures", 0)) + int(s.get("errors", 0))) for s in suites]
    return versions, sum(t for t, _ in totals), sum(f for _, f in totals), seconds


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in ENVIRONMENTS]
    if unknown or not names:
        sys.exit(f"environments: {', '.join(ENVIRONMENTS)} (unknown: {unknown})")
    results = {name: run(name) for name in names}
    print("\n| environment | versions | tests | failed | minutes |\n|---|---|---|---|---|")
    for name, (versions, tests, failed, seconds) in results.items():
        print(f"| {name} | {versions} | {tests} | {failed} | {seconds / 60:.1f} |")
    return 1 if any(failed or not tests for _, tests, failed, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
