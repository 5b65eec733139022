"""How often an 8-device Keras/JAX fit on the CPU dies in XLA's all-reduce, with nbkit's setup and
without it: each run a fresh process, the two arms alternating so both see the same load.

    .venv/bin/python bench/jax_deadlock.py [--runs 50] [--plain-runs 10] [--timeout 300]

A run is notebook 01's model and input shape (tf.data, global batch 128 on 8 simulated devices,
steps_per_execution 1): a 32-step compiling fit, then 96 steps. It fails when the process aborts
("Termination timeout for all reduce ... only 7 of them arrived") or runs past --timeout (a hang).
"plain" sets only XLA's device count, as nbkit did before; "nbkit" is `accel.setup("jax",
simulate_devices=8)`, which also sets PJRT_NPROC. Writes out/bench/jax_deadlock.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

SETUP = {
    "plain": (
        'os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"\nos.environ["KERAS_BACKEND"] = "jax"\n'
    ),
    "nbkit": 'from nbkit import accel\naccel.setup("jax", simulate_devices=8)\n',
}
FIT = """
import os
{setup}
import jax, keras, numpy as np, tensorflow as tf
if keras.distribution.distribution() is None:
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
assert len(jax.devices()) == 8
from keras import layers
model = keras.Sequential([
    keras.Input((28, 28, 1)),
    layers.Rescaling(1 / 255),
    layers.Conv2D(16, 3, padding="same", activation="relu"),
    layers.MaxPooling2D(),
    layers.Conv2D(32, 3, padding="same", activation="relu"),
    layers.MaxPooling2D(),
    layers.Flatten(),
    layers.Dense(64, activation="relu"),
    layers.Dense(10, dtype="float32"),
])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=1)
rng = np.random.default_rng(0)
digits = (rng.integers(0, 256, (4096, 28, 28, 1), dtype=np.uint8), rng.integers(0, 10, 4096))
data = tf.data.Dataset.from_tensor_slices(digits).shuffle(4096).repeat().batch(128, drop_remainder=True)
model.fit(data, epochs=1, steps_per_epoch=32, verbose=0)
model.fit(data, epochs=1, steps_per_epoch=96, verbose=0)
print("OK", os.environ.get("PJRT_NPROC"))
"""


def one_run(arm: str, timeout: float) -> tuple[bool, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS", "PJRT_NPROC")}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", FIT.format(setup=SETUP[arm])],
            cwd=report.REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        ok = done.returncode == 0 and "OK" in done.stdout
    except subprocess.TimeoutExpired:
        ok = False
    return ok, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs with nbkit's setup")
    parser.add_argument("--plain-runs", type=int, default=10, help="runs without it, for comparison")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    results: dict[str, list[tuple[bool, float]]] = {"plain": [], "nbkit": []}
    for index in range(max(args.runs, args.plain_runs)):
        for arm, wanted in (("plain", args.plain_runs), ("nbkit", args.runs)):
            if index < wanted:
                results[arm].append(one_run(arm, args.timeout))
                ok, seconds = results[arm][-1]
                outcome = "ok" if ok else "FAILED"
                print(f"{arm} run {index + 1}: {outcome} ({seconds:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
    rows = [
        [arm, len(runs), sum(not ok for ok, _ in runs), f"{sorted(s for _, s in runs)[len(runs) // 2]:.0f} s"]
        for arm, runs in results.items()
        if runs
    ]
    report.save(
        "jax_deadlock",
        "8-device JAX fit on the CPU: failures",
        ["setup", "runs", "failed", "median time"],
        rows,
        f"{os.cpu_count()} CPU cores; spe 1, 32 + 96 steps, global batch 128; arms alternating.",
    )


if __name__ == "__main__":
    main()
