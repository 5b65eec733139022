"""Input pipeline images/s on competition-format files: notebook 02's own pipeline against one written
the way the flower starter notebooks write it, and against the host's JPEG-decode ceiling.

    .venv/bin/python bench/input_pipeline.py [--seconds 4] [--rounds 3] [--batch 128]

(a) notebook: notebook 02's `get_dataset(files, training=True)`, read from the notebook
    (bench/notebook.py): seeded shuffle, decode, stateless `augment`, uint8 batches; AUGMENT="flips",
    and "(a) standard" with AUGMENT="standard" (flips, zoom, colour); both with CACHE="memory" (the
    decoded images kept: what CACHE="auto" does where they fit, as here). "(a) no cache": CACHE="none",
    every image decoded every epoch (data too large for the memory; the pipeline before issue 45).
(b) starter: per-record `parse_single_example`, `decode_jpeg`, float32 / 255, reshape, (resize),
    map with AUTOTUNE, random flip, repeat, shuffle, batch, prefetch.
(c) ceiling: the files' JPEGs already in memory, decoded with all cores, nothing else.
Each pipeline runs `--seconds` per round, rounds interleaved; the best round counts (the least
disturbed by anything else the machine did). Writes out/bench/input_pipeline.{md,json,png}.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

DATA = report.OUT / "data"
CASES = [(192, 192), (512, 512)]  # (image size in the files, training image size)


def sample_files(size: int) -> list[str]:
    """The benchmark's training files at `size`, generated once (same images at every size)."""
    from nbkit.images import layout, sample

    if not Path(layout.split_folder(DATA, 512, "test")).is_dir():
        print(f"generating benchmark data in {DATA} (once, about a minute)...", flush=True)
        sample.make_sample(DATA, 104, image_sizes=(192, 512), train_per_class=12, val_per_class=1, test_images=8)
    return layout.find_files(DATA, size, "train")


def starter_records(files: list[str], stored: int, size: int) -> Any:
    """The flower starter notebooks' per-record steps (Kaggle "Getting started with TPUs"): parse,
    decode, float32 / 255, reshape, (resize), map with AUTOTUNE, random flip."""
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    features = {"image": tf.io.FixedLenFeature([], tf.string), "class": tf.io.FixedLenFeature([], tf.int64)}

    def read_labeled_tfrecord(example: Any) -> Any:
        example = tf.io.parse_single_example(example, features)
        image = tf.image.decode_jpeg(example["image"], channels=3)
        image = tf.cast(image, tf.float32) / 255.0
        image = tf.reshape(image, [stored, stored, 3])
        if size != stored:
            image = tf.image.resize(image, [size, size])
        return image, tf.cast(example["class"], tf.int32)

    def data_augment(image: Any, label: Any) -> Any:
        return tf.image.random_flip_left_right(image), label

    ignore_order = tf.data.Options()
    ignore_order.deterministic = False
    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=autotune).with_options(ignore_order)
    dataset = dataset.map(read_labeled_tfrecord, num_parallel_calls=autotune)
    return dataset.map(data_augment, num_parallel_calls=autotune)


def starter_pipeline(files: list[str], stored: int, size: int, batch: int) -> Any:
    """The starter notebooks' training dataset: their records, repeat, shuffle(2048), batch, prefetch."""
    import tensorflow as tf

    return starter_records(files, stored, size).repeat().shuffle(2048).batch(batch).prefetch(tf.data.AUTOTUNE)


def decode_ceiling(jpegs: list[bytes], stored: int, batch: int) -> Any:
    """JPEG decoding alone, with all cores: the files' JPEG bytes in memory, decoded, batched."""
    import tensorflow as tf

    options = tf.data.Options()
    options.deterministic = False
    dataset = tf.data.Dataset.from_tensor_slices(jpegs).repeat().with_options(options)
    decode = lambda jpeg: tf.reshape(tf.io.decode_jpeg(jpeg, channels=3), [stored, stored, 3])  # noqa: E731
    return dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(batch).prefetch(tf.data.AUTOTUNE)


def images_per_second(dataset: Any, seconds: float) -> float:
    """Batches pulled for `seconds` after a warm-up (shuffle buffer filled, threads started)."""
    iterator = iter(dataset)
    for _ in range(4):
        next(iterator)
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = next(iterator)
        images += int((batch[0] if isinstance(batch, tuple) else batch).shape[0])
    return images / (time.perf_counter() - start)


def plot(rows: list[list[Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [row[0] for row in rows]
    names = ["(a) notebook", "(a) standard", "(a) no cache", "(b) starter", "(c) decode ceiling"]
    x = np.arange(len(rows))
    figure, axis = plt.subplots(figsize=(9, 4))
    for i, name in enumerate(names):
        axis.bar(x + (i - 2) * 0.16, [row[1 + i] for row in rows], 0.16, label=name)
    axis.set_xticks(x, labels)
    axis.set_yscale("log")  # 512 px rows are ~20x slower than 192 px ones
    axis.set_ylabel("images / s")
    axis.set_title(f"Input pipeline on {os.cpu_count()} CPU cores")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def contenders(files: list[str], stored: int, size: int, batch: int) -> dict[str, Callable[[], Any]]:
    """Each pipeline of the comparison, made anew for every timed round."""
    import notebook

    from nbkit.images import checks

    split = checks.check_splits({"train": files}, stored, 104, keep_items=True)["train"]
    jpegs = [jpeg for jpeg, _ in split.items]
    steps = split.count // batch
    config = {"image_size": stored, "GLOBAL_BATCH": batch, "steps_per_epoch": steps, "EPOCHS": 10**6}
    flips, standard, uncached = (
        notebook.load(**config, AUGMENT=augment, CACHE=cache)["get_dataset"]
        for augment, cache in (("flips", "memory"), ("standard", "memory"), ("flips", "none"))
    )
    return {  # a cached pipeline decodes every image when it is made (not timed), then reads them from memory
        "notebook": lambda: flips(split, training=True),
        "standard": lambda: standard(split, training=True),
        "no cache": lambda: uncached(split, training=True),
        "starter": lambda: starter_pipeline(files, stored, size, batch),
        "ceiling": lambda: decode_ceiling(jpegs, stored, batch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="timed seconds per pipeline per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best counts")
    parser.add_argument("--batch", type=int, default=128, help="global batch (16 per replica x 8)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[stored for stored, _ in CASES])
    args = parser.parse_args()

    rows = []
    for stored, size in (case for case in CASES if case[0] in args.sizes):
        files = sample_files(stored)
        pipelines = contenders(files, stored, size, args.batch)
        best = {name: 0.0 for name in pipelines}
        for _ in range(args.rounds):
            for name, make in pipelines.items():
                best[name] = max(best[name], images_per_second(make(), args.seconds))
        label = f"{size}x{size} from {stored}x{stored} files"
        ratios = [best[name] / best[than] for name in ("notebook", "no cache") for than in ("starter", "ceiling")]
        rows.append([label, *(best[name] for name in pipelines), *ratios])
        print(f"{label}: " + ", ".join(f"{k} {v:,.0f}" for k, v in best.items()), flush=True)

    headers = [f"images/s, batch {args.batch}", "(a) notebook", "(a) standard", "(a) no cache", "(b) starter"]
    headers += ["(c) decode ceiling", "(a)/(b)", "(a)/(c)", "no cache/(b)", "no cache/(c)"]
    notes = (
        f"{os.cpu_count()} CPU cores; best of {args.rounds} interleaved rounds of {args.seconds:g} s. "
        '"(a) standard": what the richer augmentation costs the host; "(a) no cache": CACHE="none".'
    )
    report.save("input_pipeline", "Input pipeline", headers, rows, notes)
    plot(rows, report.OUT / "input_pipeline.png")
    print(f"plot: {report.OUT / 'input_pipeline.png'}")


if __name__ == "__main__":
    main()
