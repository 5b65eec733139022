"""Run the test suites environment by environment, each reported by name with its versions, and a
table at the end: what `make test` runs. Exit status 1 if any environment has a failure.

    python tools/matrix.py [--jobs N] current current-nbval xla kaggle-tpu floor colab-gpu

With --jobs 2 (make test's default) two environments run at a time, the longest first: one suite
leaves a 2-core machine's second core idle for much of its time (kernel start-ups, imports, file
checks). Each environment's output goes to out/test-logs/<name>.log and is printed whole when it ends.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "out" / "test-logs"
PRINTING = threading.Lock()  # one environment's log at a time
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
SMOKE = ["tests/matrix/test_smoke_runs.py"]
# name -> (venv, pytest arguments, extra environment, what it is)
ENVIRONMENTS = {
    "current": (
        ".venv",
        ["tests", "--ignore=tests/xla", "--ignore=tests/matrix", "--ignore=tests/test_import.py"],
        {},
        "envs/main.lock: the unit and notebook tests",
    ),
    # The same environment's nbval runs as an environment of their own, so that two lanes share the work evenly
    # (tests/test_import.py brings tests/conftest.py: nbval's kernels on socket files, its output comparison).
    "current-nbval": (
        ".venv",
        ["tests/test_import.py", "notebooks", *NBVAL, "--ignore=notebooks/04_pytorch_xla.ipynb"],
        {},
        "envs/main.lock: every committed notebook (but 04) executed and compared by nbval",
    ),
    "xla": (
        ".venv-xla",
        ["tests/xla", "tests/test_import.py", "notebooks/04_pytorch_xla.ipynb", *NBVAL],
        {"PJRT_DEVICE": "CPU"},
        "envs/xla.lock: notebook 04 and nbkit.pytorch through torch_xla",
    ),
    "kaggle-tpu": (
        ".venv-kaggle-tpu",
        # 05 -> 06 from JAX on 8 devices to TensorFlow: the full profile's run, in bfloat16, checks what the
        # smoke's would.
        [
            *SMOKE,
            "tests/matrix/test_pytorch_xla.py",
            "tests/matrix/test_full_profile.py",
            "-k",
            "not jax8-to-tensorflow",
        ],
        {"PJRT_DEVICE": "CPU"},
        "Kaggle's TPU image: every notebook's smoke run, 04 on torch_xla, the full profile in bfloat16",
    ),
    "floor": (
        ".venv-floor",
        # KerasHub needs Keras 3.15 and Tunix JAX 0.10: 08's, 10's, 11's and 12's floor is the current versions,
        # and so is the hand-off's to transformers (torch, Tunix)
        [*SMOKE, "-k", "not 08_text and not 10_llm and not 11_grpo and not 12_answers and not in_transformers"],
        {},
        "the oldest versions nbkit declares: the Keras notebooks' smoke runs but 08's, 10's, 11's, 12's and the "
        "hand-off to transformers (torch_xla's floor is Kaggle's)",
    ),
    "colab-gpu": (
        ".venv-colab-gpu",
        # What a GPU runs there: notebook 02, and 06 predicting with a package trained on 8 devices.
        [*SMOKE, "-k", "02_flowers or jax8-to-tensorflow"],
        {},
        "Colab's runtime (Kaggle's GPU image): 02, and 05 -> 06 as on a GPU",
    ),
}
# Minutes each took alone on the 2-core machine (before the environments had bytecode; the order still holds):
# the longest start first, so the two lanes end together.
MINUTES = {"current": 12, "kaggle-tpu": 8, "current-nbval": 4, "xla": 3.5, "floor": 2, "colab-gpu": 1.5}
VERSIONS = """
import platform
from nbkit.env import installed_versions
names = ("tensorflow", "tensorflow-cpu", "keras", "keras-hub", "jax", "numpy", "torch", "torch_xla")
print(", ".join([f"Python {platform.python_version()}", *(f"{n} {v}" for n, v in installed_versions(names).items())]))
"""


def run(name: str, jax_cache: str, jobs: int) -> tuple[str, int, int, float]:
    """Run one environment's tests, print its log when done; (versions, tests, failures, seconds)."""
    venv, arguments, extra, what = ENVIRONMENTS[name]
    python = str(REPO / venv / "bin" / "python")
    versions = subprocess.run([python, "-c", VERSIONS], capture_output=True, text=True, check=True).stdout.strip()
    report = Path(tempfile.mkdtemp(prefix=f"nbkit-{name}-")) / "junit.xml"
    env = {**os.environ, **extra, "NBKIT_WORKING_DIR": tempfile.mkdtemp(prefix=f"nbkit-{name}-work-")}
    # One JAX compilation cache for every process of the run, as ccache for a build: a notebook run again by another
    # test or environment (nbval's run, a test's, Kaggle's bundled run on the same jaxlib) loads its programs instead
    # of compiling them. JAX keys an entry by the program, jaxlib's version, the XLA flags and the devices, so
    # environments with another JAX never load each other's. A notebook's own COMPILE_CACHE, set before anything
    # compiles, takes its place there; a fresh folder each time.
    env["JAX_COMPILATION_CACHE_DIR"] = jax_cache
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # Keras' ~200 small programs to build a model too
    # Each environment its share of the cores for PyTorch's (OpenMP's) threads: a pool sized for the whole machine
    # spins against the other environment's (2 cores: notebook 04's plain-torch test 102 s -> 63 s in the lane).
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    log = LOGS / f"{name}.log"
    with PRINTING:
        print(f"=== environment {name} started: {what} (log: {log.relative_to(REPO)})", flush=True)
    start = time.perf_counter()
    with log.open("w") as out:
        command = [python, "-m", "pytest", *arguments, f"--junitxml={report}"]
        subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    with PRINTING:
        print(f"\n=== environment {name}: {what}\n=== {versions}\n{log.read_text()}", flush=True)
    if not report.exists():  # pytest could not even start
        return versions, 0, 1, seconds
    suites = ElementTree.parse(report).getroot().iter("testsuite")
    totals = [(int(s.get("tests", 0)), int(s.get("failures", 0)) + int(s.get("errors", 0))) for s in suites]
    return versions, sum(t for t, _ in totals), sum(f for _, f in totals), seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="environments run at a time")
    parser.add_argument("names", nargs="+", choices=list(ENVIRONMENTS), metavar="environment")
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    longest_first = sorted(args.names, key=lambda n: -MINUTES[n])
    jax_cache = tempfile.mkdtemp(prefix="nbkit-jax-cache-")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {name: pool.submit(run, name, jax_cache, min(args.jobs, len(args.names))) for name in longest_first}
    results = {name: futures[name].result() for name in args.names}
    print("\n| environment | versions | tests | failed | minutes |\n|---|---|---|---|---|")
    for name, (versions, tests, failed, seconds) in results.items():
        print(f"| {name} | {versions} | {tests} | {failed} | {seconds / 60:.1f} |")
    return 1 if any(failed or not tests for _, tests, failed, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
