"""Start-up costs a notebook user pays: `import nbkit`, `accel.setup()` per backend and replica
count, and the wall time of each notebook's smoke run. Prints a table; asserts nothing.

    .venv/bin/python bench/bench_setup.py [--skip-notebooks]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV_CLEAR = ("KERAS_BACKEND", "XLA_FLAGS")


def python_seconds(code: str) -> float:
    """Run `code` in a fresh interpreter; it prints the seconds it measured on its last line."""
    import os

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
        papermill = str(Path(sys.executable).with_name("papermill"))
        for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
            for backend in ("tensorflow", "jax"):
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.perf_counter()
                    run = subprocess.run([papermill, str(notebook), f"{tmp}/out.ipynb", "--cwd", str(REPO),
                                          "-p", "BACKEND", backend], capture_output=True, text=True)
                    seconds = time.perf_counter() - start
                    if run.returncode != 0:
                        print(f"{notebook.name} BACKEND={backend} failed ({run.returncode}):\n{run.stderr[-2000:]}")
                        seconds = float("nan")
                    rows.append((f"{notebook.name} smoke run, BACKEND={backend}", seconds))
    width = max(len(name) for name, _ in rows)
    print(f"{'what'.ljust(width)}  seconds")
    print(f"{'-' * width}  -------")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:7.3f}")


if __name__ == "__main__":
    main()
