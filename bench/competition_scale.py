"""The competition at full scale, on this machine: files with the competition's counts (12,753 /
3,712 / 7,382 images) at 192 and 512 px, generated once in its layout. Each measurement runs in a
fresh process and reports its own peak memory (RSS).

    .venv/bin/python bench/competition_scale.py [--sizes 192 512] [--steps 2]

1. the data check of notebooks 02/04/05 (`checks.check_splits`: every record read, every image
   decoded), seconds and images/s;
2. from notebook 02's `get_dataset(...)` (read from the notebook: bench/notebook.py) to its first
   batch, then images/s of the following batches, global batch 128;
3. steps/s of the full profile (the notebook's `build_model`: EfficientNetB0, weights none, global
   batch 128) on 8 simulated JAX devices, in
   float32 and mixed_bfloat16, after a compiling step.
Writes out/bench/competition_scale.{md,json}; asserts nothing.
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

DATA = report.OUT / "competition"
COUNTS = {"train": 12_753, "val": 3_712, "test": 7_382}

GENERATE = """
import sys
from nbkit.images import sample, writer
size, root = int(sys.argv[1]), sys.argv[2]
per_class = {"train": 123, "val": 36}  # 104 classes: then cut to the competition's exact counts
for split, records in sample._sample_splits(size, 104, per_class["train"], per_class["val"], test_images=7382):
    writer.write_split(records[: {counts}[split]], root, size, split)
"""

CHECK = """
import json, resource, sys, time
from nbkit.images import checks, layout
start = time.perf_counter()
size = int(sys.argv[1])
splits = checks.check_splits(layout.split_files(sys.argv[2], size), size, 104)
seconds = time.perf_counter() - start
images = sum(s.count for s in splits.values())
rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"seconds": seconds, "images": images, "rss_gib": rss_gib}))
"""

PIPELINE = """
import json, resource, sys, time
sys.path.insert(0, "bench")
from nbkit import accel
from nbkit.images import layout
accel.setup("jax")
import notebook
size, root = int(sys.argv[1]), sys.argv[2]
files = layout.find_files(root, size, "train")
nb = notebook.load(image_size=size, GLOBAL_BATCH=128, steps_per_epoch=sum(map(layout.count_in_name, files)) // 128)
start = time.perf_counter()
iterator = iter(nb["get_dataset"](notebook.split(files), training=True))
next(iterator)
first = time.perf_counter() - start
start = time.perf_counter()
for _ in range(40):
    next(iterator)
rate = 40 * 128 / (time.perf_counter() - start)
print(json.dumps({"first_batch_s": first, "images_per_s": rate,
                  "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""

STEPS = """
import json, resource, sys, time
sys.path.insert(0, "bench")
from nbkit import accel
acc = accel.setup("jax", simulate_devices=8)
acc.set_precision(sys.argv[1])
import keras
import numpy as np
import notebook
with acc.scope():
    model = notebook.load(image_size=192, MODEL="EfficientNetB0", WEIGHTS="none")["build_model"]()
    model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
x = rng.integers(0, 256, (128, 192, 192, 3), dtype=np.uint8)
y = rng.integers(0, 104, 128)
model.train_on_batch(x, y)  # compiles
steps = int(sys.argv[2])
start = time.perf_counter()
for _ in range(steps):
    model.train_on_batch(x, y)
seconds = (time.perf_counter() - start) / steps
print(json.dumps({"seconds_per_step": seconds, "images_per_s": 128 / seconds,
                  "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def fresh(code: str, *args: object) -> dict:
    """Run `code` in a fresh interpreter; the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=report.REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def generate(size: int) -> Path:
    root = DATA / str(size)
    if not (root / f"tfrecords-jpeg-{size}x{size}" / "test").is_dir():
        print(f"generating the competition's counts at {size} px in {root} (once; minutes)...", flush=True)
        subprocess.run(
            [sys.executable, "-c", GENERATE.replace("{counts}", repr(COUNTS)), str(size), str(root)],
            cwd=report.REPO,
            check=True,
        )
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[192, 512])
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per precision")
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        root = generate(size)
        check = fresh(CHECK, size, root)
        rows.append(
            [
                f"data check, {size} px",
                f"{check['seconds']:.0f} s",
                f"{check['images'] / check['seconds']:,.0f}",
                f"{check['rss_gib']:.2f}",
                f"{check['images']:,} images, every one decoded",
            ]
        )
        first = fresh(PIPELINE, size, root)
        rows.append(
            [
                f"notebook's get_dataset to first batch, {size} px",
                f"{first['first_batch_s']:.0f} s",
                f"{first['images_per_s']:,.0f}",
                f"{first['rss_gib']:.2f}",
                "decoded every epoch (no cache)",
            ]
        )
    for policy in ("float32", "mixed_bfloat16"):
        steps = fresh(STEPS, policy, args.steps)
        rows.append(
            [
                f"EfficientNetB0 step, 8 JAX devices, {policy}",
                f"{steps['seconds_per_step']:.1f} s",
                f"{steps['images_per_s']:.1f}",
                f"{steps['rss_gib']:.2f}",
                "global batch 128, 192 px",
            ]
        )
    report.save(
        "competition_scale",
        "The competition at full scale",
        ["what", "time", "images/s", "peak RSS GiB", "notes"],
        rows,
        f"{os.cpu_count()} CPU cores; each row a fresh process.",
    )


if __name__ == "__main__":
    main()
