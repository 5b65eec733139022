"""Training steps/s of notebook 01's model (the small MNIST CNN, 16 images per replica) for
steps_per_execution 1, 8 and 32: on 8 simulated devices (JAX backend, like a TPU v3-8 / v5e-8) and
on the default single-device CPU setup of each backend.

    .venv/bin/python bench/training_steps.py [--steps 96]

Each setting runs in a fresh process (a Keras backend and a device split are chosen once per process).
A first `fit` compiles; the second, of `--steps` steps (a multiple of 32), is timed. JAX's 8 CPU
devices sometimes deadlock in an all-reduce (XLA:CPU aborts after 40 s, most often with
steps_per_execution=1, i.e. many small executions): such a setting is tried twice, then shown as n/a.
Writes out/bench/training_steps.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

SETUPS = [("jax", 8), ("jax", 0), ("tensorflow", 0)]  # (backend, simulated devices; 0 = the CPU as it is)
STEPS_PER_EXECUTION = (1, 8, 32)

CHILD = """
import json, sys, time
from nbkit import accel
acc = accel.setup({backend!r}, simulate_devices={devices})
import keras, numpy as np, tensorflow as tf
from keras import layers
global_batch = 16 * acc.num_replicas
rng = np.random.default_rng(0)  # MNIST-shaped digits (notebook 01's model; the pixels do not change the speed)
digits = (rng.integers(0, 256, (4096, 28, 28, 1), dtype=np.uint8), rng.integers(0, 10, 4096))
dataset = tf.data.Dataset.from_tensor_slices(digits).shuffle(4096).repeat().batch(global_batch, drop_remainder=True)
results = []
for spe in [{spe}]:
    with acc.scope():
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
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"], steps_per_execution=spe)
    model.fit(dataset, epochs=1, steps_per_epoch=32, verbose=0)  # compiles
    start = time.perf_counter()
    model.fit(dataset, epochs=1, steps_per_epoch={steps}, verbose=0)
    results.append([spe, {steps} / (time.perf_counter() - start)])
print(json.dumps({{"replicas": acc.num_replicas, "global_batch": global_batch, "results": results}}))
"""


def measure(backend: str, devices: int, spe: int, steps: int) -> tuple[int, float]:
    """(global batch, steps/s), or NaN steps/s when the child failed twice."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    code = CHILD.format(backend=backend, devices=devices, spe=spe, steps=steps)
    for attempt in (1, 2):
        try:
            run = subprocess.run(
                [sys.executable, "-c", code], cwd=report.REPO, env=env, capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            print(f"{backend}, {devices} devices, steps_per_execution={spe}: timed out (attempt {attempt})", flush=True)
            continue
        if run.returncode == 0:
            found = json.loads(run.stdout.strip().splitlines()[-1])
            return found["global_batch"], found["results"][0][1]
        stuck = "Termination timeout" in run.stderr
        print(
            f"{backend}, {devices} devices, steps_per_execution={spe}: failed (attempt {attempt})"
            + (": XLA:CPU all-reduce deadlock" if stuck else f"\n{run.stderr[-1500:]}"),
            flush=True,
        )
    return 16 * max(1, devices), float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64, help="timed steps per setting (a multiple of 32)")
    args = parser.parse_args()
    rows = []
    for backend, devices in SETUPS:
        setup = f"{backend}, {devices} simulated devices" if devices else f"{backend}, default CPU (1 device)"
        for spe in STEPS_PER_EXECUTION:
            global_batch, steps_per_second = measure(backend, devices, spe, args.steps)
            rows.append([setup, global_batch, spe, steps_per_second, steps_per_second * global_batch])
            print(f"{setup}, steps_per_execution={spe}: {steps_per_second:.1f} steps/s", flush=True)
    headers = ["setup", "global batch", "steps_per_execution", "steps/s", "images/s"]
    notes = (
        f"{os.cpu_count()} CPU cores; notebook 01's small CNN on 28x28x1 images, 16 per replica; "
        f"{args.steps} timed steps after a compiling fit."
    )
    report.save("training_steps", "Training steps/s", headers, rows, notes)


if __name__ == "__main__":
    main()
