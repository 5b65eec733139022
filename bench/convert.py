"""The converter's speed on this machine: images/s of `python -m nbkit tfrecords` on a generated
Cassava-like source (800x600 and 600x800 JPEGs, ~100-200 KB each, as a phone camera's pictures
scaled down), with one worker and with every core, against the loop a user would write first (one
process: Pillow open -> RGB -> resize -> JPEG bytes -> tf.train.Example -> tf.io.TFRecordWriter),
all in the same run; the same for a few phone-size pictures (4032x3024, where decoding at a reduced
scale pays); then where one picture's time goes.

    .venv/bin/python bench/convert.py [--pictures 1000] [--phone-pictures 60] [--sizes 512 224] [--repeats 2]

Each timing runs in a fresh process (best of --repeats, the runs interleaved so that they see the
same load); TensorFlow's import is not timed. Writes out/bench/convert.{md,json}; asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

SOURCE = report.OUT / "convert-source"
PHONE_SOURCE = report.OUT / "convert-source-phone"

# Peak memory of this process: VmHWM, not getrusage's ru_maxrss, which a child inherits from the
# process that started it (here the bench, after generating the phone-size pictures).
PEAK_RSS = """
def peak_rss_gib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 2**20
"""

NBKIT = (
    PEAK_RSS
    + """
import json, sys, time
from nbkit.convert.run import convert
root, output, size, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
convert(f"{root}/train_images", output, size, labels=f"{root}/train.csv", workers=workers)
print(json.dumps({"seconds": time.perf_counter() - start, "rss_gib": peak_rss_gib()}))
"""
)

PLAIN = (
    PEAK_RSS
    + """
import csv, io, json, sys, time
import tensorflow as tf
from PIL import Image
root, output, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(f"{root}/train.csv") as f:
    rows = list(csv.reader(f))[1:]
start = time.perf_counter()
with tf.io.TFRecordWriter(output) as writer:
    for image_id, label in rows:
        image = Image.open(f"{root}/train_images/{image_id}").convert("RGB").resize((size, size))
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=95)
        feature = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[buffer.getvalue()])),
            "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_id.encode()])),
        }
        writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
print(json.dumps({"seconds": time.perf_counter() - start, "rss_gib": peak_rss_gib()}))
"""
)


def generate(root: Path, count: int, landscape: tuple[int, int]) -> Path:
    """`count` Cassava-like JPEGs of `landscape` size (a quarter of them portrait) and train.csv, once."""
    import numpy as np
    from PIL import Image

    from nbkit.convert.example import drawing

    if (root / "train.csv").is_file() and len(list((root / "train_images").iterdir())) == count:
        return root
    print(f"generating {count} {landscape[0]}x{landscape[1]} JPEGs in {root} (once)...", flush=True)
    (root / "train_images").mkdir(parents=True, exist_ok=True)
    for old in (root / "train_images").iterdir():
        old.unlink()
    rng = np.random.default_rng(0)
    rows = []
    for i in range(count):
        label = i % 5
        width, height = landscape[::-1] if i % 4 == 3 else landscape
        pixels = drawing(label, width, height, rng)
        # Camera-like texture: smooth shapes compress far better than leaves do.
        pixels = np.clip(pixels + rng.normal(0, 12, pixels.shape), 0, 255).astype(np.uint8)
        name = f"{1_000_000_000 + i * 7919}.jpg"
        Image.fromarray(pixels).save(root / "train_images" / name, quality=90)
        rows.append((name, label))
    with open(root / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([("image_id", "label"), *rows])
    return root


def fresh(code: str, *args: object) -> dict:
    """Run `code` in a fresh interpreter; the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], cwd=report.REPO, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def plain_picture(path: Path, size: int) -> bytes:
    """The plain loop's Pillow steps for one picture."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.open(path).convert("RGB").resize((size, size)).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def breakdown(root: Path, size: int, count: int = 200, rounds: int = 3) -> list[list[object]]:
    """Milliseconds per picture of each step, one core, over the first `count` pictures (best of
    `rounds`, the steps interleaved); then the plain loop's Pillow work against square_jpeg's."""
    from PIL import Image

    from nbkit.convert import pictures

    paths = sorted((root / "train_images").iterdir())[:count]
    loaded = []
    for path in paths:
        image = Image.open(path)
        image.load()
        loaded.append(image)
    squares = [pictures.to_square(image, size, "resize") for image in loaded]
    steps = {
        "decode": lambda: [Image.open(p).load() for p in paths],
        f"resize to {size} (bilinear, nbkit)": lambda: [pictures.to_square(i, size, "resize") for i in loaded],
        f"resize to {size} (bicubic, Pillow's default)": lambda: [i.resize((size, size)) for i in loaded],
        "JPEG encode, quality 95": lambda: [i.save(io.BytesIO(), "JPEG", quality=95) for i in squares],
        "plain loop's Pillow work (open, RGB, resize, encode)": lambda: [plain_picture(p, size) for p in paths],
        "nbkit square_jpeg (the same, upright, draft)": lambda: [pictures.square_jpeg(p, size) for p in paths],
    }
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(rounds):
        for step, run in steps.items():
            start = time.perf_counter()
            run()
            best[step] = min(best[step], time.perf_counter() - start)
    return [[f"{size} px: {step}", f"{1000 * seconds / len(paths):.2f}"] for step, seconds in best.items()]


def timed_rows(root: Path, count: int, size: int, arms: dict[str, tuple[str, int]], repeats: int, what: str) -> list:
    """One row per arm: the best of `repeats` fresh-process runs, interleaved."""
    work = report.OUT / "convert-output"
    work.mkdir(parents=True, exist_ok=True)
    best: dict[str, dict] = {}
    for _ in range(repeats):
        for arm, (code, workers) in arms.items():
            if code is NBKIT:
                result = fresh(code, root, work / f"{size}-{workers}", size, workers)
            else:
                result = fresh(code, root, work / f"plain-{size}.tfrec", size)
            if arm not in best or result["seconds"] < best[arm]["seconds"]:
                best[arm] = result
    plain = count / best[PLAIN_ARM]["seconds"]
    return [
        [
            f"{arm}, {what} -> {size} px",
            f"{r['seconds']:.1f}",
            f"{count / r['seconds']:,.0f}",
            f"{count / r['seconds'] / plain:.2f}",
            f"{r['rss_gib']:.2f}",
        ]
        for arm, r in best.items()
    ]


PLAIN_ARM = "plain loop (TensorFlow)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, default=1000, help="800x600 pictures")
    parser.add_argument("--phone-pictures", type=int, default=60, help="4032x3024 pictures (0: none)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 224])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    root = generate(SOURCE, args.pictures, (800, 600))
    cores = len(os.sched_getaffinity(0))
    arms = {"nbkit, 1 worker": (NBKIT, 1), f"nbkit, {cores} workers": (NBKIT, cores), PLAIN_ARM: (PLAIN, 0)}
    rows = [row for size in args.sizes for row in timed_rows(root, args.pictures, size, arms, args.repeats, "800x600")]
    if args.phone_pictures:
        phone = generate(PHONE_SOURCE, args.phone_pictures, (4032, 3024))
        rows += timed_rows(phone, args.phone_pictures, 512, arms, args.repeats, "4032x3024")
    kilobytes = sum(p.stat().st_size for p in (root / "train_images").iterdir()) / args.pictures / 1024
    report.save(
        "convert",
        "Converting pictures to TFRecords",
        ["what", "seconds", "images/s", "vs plain loop", "peak RSS GiB (main process)"],
        rows,
        f"{args.pictures} JPEGs of 800x600 / 600x800 (~{kilobytes:.0f} KB), {args.phone_pictures} of 4032x3024; "
        f"{cores} cores; best of {args.repeats}; the nbkit rows include listing, the split and the description.",
    )
    rows = [row for size in args.sizes for row in breakdown(root, size)]
    report.save(
        "convert_steps", "Where one picture's time goes (one core, 800x600 JPEGs)", ["step", "ms per picture"], rows
    )


if __name__ == "__main__":
    main()
