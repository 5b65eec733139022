"""What the training augmentation costs: for AUGMENT="flips" and "standard" (flips, zoom, rotation,
colour), the share of each epoch the model waits for input (notebook 02's input monitor) and the
host pipeline's images/s alone, training the smoke profile's small CNN on the generated sample.

    .venv/bin/python bench/augmentation.py [--epochs 4] [--devices 1 8]

Each setting runs in a fresh process (devices: 1 = TensorFlow on the CPU, as `make demo`; 8 = 8
simulated JAX devices, the TPU shape). Writes out/bench/augmentation.{md,json}; asserts nothing.
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

RUN = """
import json, sys, time
from nbkit import accel, batching, models
from nbkit.images import layout, monitor, pipeline
recipe, devices, epochs, root = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
acc = accel.setup("jax" if devices > 1 else "tensorflow", simulate_devices=devices if devices > 1 else 0)
import keras
files = layout.find_files(root, 192, "train")
plan = batching.plan(layout.count_items(files), 208, 16, acc.num_replicas, 192 * 192 * 3, steps_per_execution=16)
with acc.scope():
    model = models.build_classifier("small_cnn", 192, 104)
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=plan.steps_per_execution)
batches = pipeline.train_batches(files, 192, plan, seed=1, recipe=recipe)
watcher = monitor.input_monitor(verbose=False)
model.fit(watcher.watch(batches), epochs=epochs, steps_per_epoch=plan.steps_per_epoch, callbacks=[watcher], verbose=0)
later = watcher.epochs[1:]
iterator = iter(pipeline.train_batches(files, 192, plan, seed=2, recipe=recipe))
next(iterator)
start, images = time.perf_counter(), 0
while time.perf_counter() - start < 4:
    images += int(next(iterator)[0].shape[0])
print(json.dumps({"wait": sum(w.waited for w in later) / sum(w.seconds for w in later),
                  "epoch_s": sum(w.seconds for w in later) / len(later), "steps": plan.steps_per_epoch,
                  "batch": plan.global_batch, "pipeline": images / (time.perf_counter() - start)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (the first, compiling, is not counted)")
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 8], help="1 (TensorFlow) and/or 8 (JAX)")
    args = parser.parse_args()
    from nbkit.images import sample

    root = report.OUT / "augmentation-data"
    if not root.is_dir():
        sample.make_sample(root, 104)
    rows = []
    for devices in args.devices:
        for recipe in ("flips", "standard"):
            command = [sys.executable, "-c", RUN, recipe, str(devices), str(args.epochs), str(root)]
            found = json.loads(
                subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1]
            )
            where = "1 CPU device, TensorFlow" if devices == 1 else f"{devices} simulated JAX devices"
            rows.append([where, recipe, found["batch"], found["epoch_s"], f"{found['wait']:.0%}", found["pipeline"]])
            print(rows[-1], flush=True)
    notes = (
        f"{os.cpu_count()} CPU cores; the smoke profile's small CNN at 192 px on the generated sample (832 training "
        f"images), epochs 2-{args.epochs} (the first compiles). Input wait: the share of each epoch spent waiting for the "
        "next batch (nbkit.images.monitor). Pipeline: the training stream alone, images/s."
    )
    headers = ["where", "AUGMENT", "global batch", "s per epoch", "input wait", "pipeline images/s"]
    report.save("augmentation", "Training augmentation: input wait", headers, rows, notes)


if __name__ == "__main__":
    main()
