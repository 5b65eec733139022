"""Warm restarts: time to the first training step of the full profile (EfficientNetB0, mixed bfloat16,
Keras on JAX over 8 simulated devices, global batch 16 at 192 px as in `make test`), in a fresh process each time as a
new Kaggle session would start: without a cache (what every session pays without nbkit), with an
empty `nbkit.accel.cache.use(...)` folder (cold), then twice more with the folder it filled (warm), and once
with a copy of it in another folder (as RESUME_FROM copies an earlier session's cache).

    .venv/bin/python bench/compile_cache.py [--image-size 192] [--per-replica-batch 2]

"To the first step" runs from `accel.setup()` returning to the end of the first training step: building
the model, Keras' tracing, JAX's compile (or cache load) and the step. A second `fit` times one compiled
step alone; the wait before the first step is the difference (on 2 CPU cores one step of this model
takes seconds; on a TPU, milliseconds). Writes out/bench/compile_cache.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402


def session(cache: str, image_size: int, per_replica_batch: int) -> dict[str, float]:
    """One fresh process's timings (seconds) up to the end of its first training step."""
    start = time.perf_counter()
    from nbkit import accel
    from nbkit.accel import cache as cache_room

    acc = accel.setup("jax", simulate_devices=8)
    compile_cache = cache_room.use(cache, acc)
    acc.set_precision("mixed_bfloat16")
    ready = time.perf_counter()
    import keras
    import numpy as np

    keras.utils.set_random_seed(42)
    with acc.scope():  # notebook 02's full-profile model, written out
        backbone = keras.applications.EfficientNetB0(include_top=False, weights=None, pooling="avg")
        inputs = keras.Input([image_size, image_size, 3], dtype="uint8")
        x = keras.layers.Dropout(0.2)(backbone(inputs))
        model = keras.Model(inputs, keras.layers.Dense(104, dtype="float32")(x))
        model.compile(
            keras.optimizers.Adam(),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["sparse_categorical_accuracy"],
        )
    built = time.perf_counter()
    batch = per_replica_batch * acc.num_replicas
    images = np.random.default_rng(0).integers(0, 255, (batch, image_size, image_size, 3), dtype="uint8")
    labels = np.arange(batch) % 104
    history = model.fit(images, labels, batch_size=batch, epochs=1, verbose=0)
    stepped = time.perf_counter()
    model.fit(images, labels, batch_size=batch, epochs=1, verbose=0)  # compiled: one step alone
    step_s = time.perf_counter() - stepped
    return {
        "step_s": step_s,
        "setup_s": ready - start,
        "build_s": built - ready,
        "first_step_s": stepped - built,
        "to_first_step_s": stepped - ready,
        "hits": compile_cache.hits,
        "loss": float(history.history["loss"][0]),
    }


def run_session(cache: str, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, __file__, "--session", cache, "--image-size", str(args.image_size)]
    command += ["--per-replica-batch", str(args.per_replica_batch)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"session failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=192)
    parser.add_argument("--per-replica-batch", type=int, default=2)  # global 16: the compile, not the step
    parser.add_argument("--session", help=argparse.SUPPRESS)  # internal: one fresh process
    args = parser.parse_args()
    if args.session:
        print(json.dumps(session(args.session, args.image_size, args.per_replica_batch)))
        return
    folder = Path(tempfile.mkdtemp(prefix="nbkit-compile-cache-"))
    copied = folder.with_name(folder.name + "-copied")  # the warm cache elsewhere, as RESUME_FROM copies it
    try:
        runs = [("no cache (without nbkit)", run_session("none", args))]
        runs.append(("nbkit, empty cache (cold)", run_session(str(folder), args)))
        entries = list(folder.rglob("*-cache"))
        size_mb = sum(p.stat().st_size for p in entries) / 1e6
        runs.append(("nbkit, warm 1", run_session(str(folder), args)))
        runs.append(("nbkit, warm 2", run_session(str(folder), args)))
        shutil.copytree(folder, copied)
        runs.append(("nbkit, warm, copied to another folder", run_session(str(copied), args)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(copied, ignore_errors=True)
    cold = runs[1][1]
    rows = []
    for name, r in runs:
        wait = r["to_first_step_s"] - r["step_s"]  # what a TPU user waits: the step itself takes ms there
        cold_wait = cold["to_first_step_s"] - cold["step_s"]
        rows.append(
            [
                name,
                r["setup_s"],
                r["build_s"],
                r["first_step_s"],
                r["to_first_step_s"],
                r["to_first_step_s"] / cold["to_first_step_s"],
                r["step_s"],
                wait,
                wait / cold_wait,
                r["hits"],
            ]
        )
    losses = {round(r["loss"], 6) for _, r in runs}
    import jax
    import keras

    notes = (
        f"{os.cpu_count()} CPU cores, jax {jax.__version__}, keras {keras.__version__}; EfficientNetB0 (weights none), "
        f"{args.image_size} px, global batch {8 * args.per_replica_batch}, mixed_bfloat16, 8 simulated devices; each "
        f"row a fresh process. The cache after the cold run: {len(entries)} entries, {size_mb:.0f} MB. "
        f"First-step losses {'all equal' if len(losses) == 1 else 'DIFFER: ' + str(sorted(losses))}."
    )
    headers = ["session", "setup s", "build s", "first step s", "to first step s", "x cold", "a compiled step s"]
    headers += ["wait before the first step s", "x cold", "loaded"]
    report.save("compile_cache", "Warm restarts: time to the first training step", headers, rows, notes)


if __name__ == "__main__":
    main()
