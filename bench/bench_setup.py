"""Start-up costs a notebook user pays: `import nbkit`, `accel.setup()` per backend and replica
count, and the wall time of each notebook's smoke run (04, PyTorch/XLA, in .venv-xla with
PJRT_DEVICE=CPU). Prints a table and writes out/bench/startup.{md,json}; asserts nothing.

    .venv/bin/python bench/bench_setup.py [--skip-notebooks]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

REPO = report.REPO
XLA_NOTEBOOK = "04_pytorch_xla.ipynb"
ENV_CLEAR = ("KERAS_BACKEND", "XLA_FLAGS")


def python_seconds(code: str) -> float:
    """Run `code` in a fresh interpreter; it prints the seconds it measured on its last line."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_CLEAR}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def timed(code: str) -> str:
    return f"import time; t = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"


def main() -> None:
    rows = [("import nbkit", python_seconds(timed("import nbkit")))]
    for backend in ("tensorflow", "jax"):
        for devices in (0, 8):
            code = timed(f"from nbkit import accel; accel.setup({backend!r}, simulate_devices={devices})")
            rows.append((f"accel.setup({backend!r}, simulate_devices={devices})", python_seconds(code)))
    if "--skip-notebooks" not in sys.argv:
        # One working folder per backend, notebooks in name order: 06 predicts with the package 05
        # wrote, and 05 and 06 reuse the sample 02 generated (so their times leave that out).
        with tempfile.TemporaryDirectory() as tf_work, tempfile.TemporaryDirectory() as jax_work:
            working = {"tensorflow": tf_work, "jax": jax_work}
            for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
                if notebook.name == XLA_NOTEBOOK:
                    with tempfile.TemporaryDirectory() as work:
                        seconds = smoke_seconds(notebook, REPO / ".venv-xla/bin/papermill", {}, work)
                    rows.append((f"{notebook.name} smoke run, torch_xla on CPU", seconds))
                    continue
                for backend in ("tensorflow", "jax"):
                    papermill = Path(sys.executable).with_name("papermill")
                    seconds = smoke_seconds(notebook, papermill, {"BACKEND": backend}, working[backend])
                    rows.append((f"{notebook.name} smoke run, BACKEND={backend}", seconds))
    report.save(
        "startup",
        "Start-up and notebook smoke runs",
        ["what", "seconds"],
        rows,
        f"{os.cpu_count()} CPU cores; each in a fresh process; notebooks with papermill, smoke profile.",
    )


def smoke_seconds(notebook: Path, papermill: Path, params: dict[str, str], working_dir: str) -> float:
    """Wall time of one papermill run with `working_dir` as its working folder; NaN (and the error) when it fails."""
    if not papermill.exists():
        print(f"{notebook.name}: {papermill} is missing (make venv-xla); skipped")
        return float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        args = [str(papermill), str(notebook), f"{tmp}/out.ipynb", "--cwd", str(REPO)]
        for name, value in params.items():
            args += ["-p", name, value]
        env = {**os.environ, "NBKIT_WORKING_DIR": working_dir, "PJRT_DEVICE": "CPU"}
        start = time.perf_counter()
        run = subprocess.run(args, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(f"{notebook.name} {params} failed ({run.returncode}):\n{run.stderr[-2000:]}")
        return float("nan")
    return seconds


if __name__ == "__main__":
    main()
