"""Pod slices in miniature: training steps/s of notebook 02's smoke model (small_cnn, 192 px, global
batch 128, Keras on JAX) on 8 simulated CPU devices as 1 process x 8 devices, and as 2 processes x 4
devices joined by JAX's distributed runtime on 127.0.0.1: with nbkit (`accel.setup()` + its pipeline,
each process reading its replicas' files) and the plain way without it (`keras.distribution.initialize()`,
`DataParallel` sharding one tf.data pipeline of every file by process, as Keras' docs show).

    .venv/bin/python bench/pod_slices.py [--epochs 3] [--rounds 2]

On one machine the processes share its cores, and the gradients cross processes through Gloo over
TCP instead of within one XLA program, so 2 x 4 is expected slower here: the figure is the
runtime's overhead, not a speed-up (on a slice every host brings its own chips). Writes
out/bench/pod_slices.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402

from nbkit.publish.launch import coordinator_port  # noqa: E402

DATA = Path("out/bench/pod-data")
PER_REPLICA_BATCH, SIZE, CLASSES = 16, 192, 104
SETUPS = [("notebook", 1, 8), ("notebook", 2, 4), ("plain", 1, 8), ("plain", 2, 4)]
COUNT = 832  # training images in the generated sample (make_sample's 8 per class)
HANG_S = 600  # a run that takes longer has hung (a normal one takes about a minute)


def small_cnn() -> object:
    """The plain run's model: notebook 02's small_cnn, written out (uint8 in, rescaled)."""
    import keras
    from keras import layers

    inputs = keras.Input([SIZE, SIZE, 3], dtype="uint8")
    x = layers.AveragePooling2D(SIZE // 48)(layers.Rescaling(1 / 255)(inputs))
    for width in (16, 32, 64):
        x = layers.MaxPooling2D()(layers.Conv2D(width, 3, padding="same", activation="relu")(x))
    x = layers.Dense(128, activation="relu")(layers.Flatten()(x))
    return keras.Model(inputs, layers.Dense(CLASSES, dtype="float32")(x))


def notebook_setup(files: list[str], devices: int, epochs: int) -> tuple[object, object, object]:
    """(scope, batches, model builder) as notebook 02 makes them: `accel.setup()`, its `get_dataset`
    and `build_model`, read from the notebook (bench/notebook.py)."""
    import notebook

    from nbkit import accel

    acc = accel.setup("jax", simulate_devices=devices)
    steps = COUNT // (PER_REPLICA_BATCH * acc.num_replicas)
    nb = notebook.load(
        CLASSES,
        image_size=SIZE,
        AUGMENT="flips",
        SEED=42,
        EPOCHS=epochs + 1,
        MODEL="small_cnn",
        GLOBAL_BATCH=PER_REPLICA_BATCH * acc.num_replicas,
        steps_per_epoch=steps,
    )
    return acc, nb["get_dataset"](notebook.split(files), training=True), nb["build_model"]


def plain_setup(files: list[str], devices: int, epochs: int) -> tuple[object, object, object]:
    """The same without nbkit: Keras' own (multi-process) set-up and DataParallel, and Görner's
    starter pipeline (parallel unordered reads, shuffle buffer, decode, random flip, batch,
    prefetch; uint8 kept, as the model rescales), sharded by Keras' fit."""
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    import keras

    if "KERAS_DISTRIBUTION_NUM_PROCESSES" in os.environ:
        keras.distribution.initialize()
    import jax
    import tensorflow as tf

    auto = tf.data.AUTOTUNE
    features = {"image": tf.io.FixedLenFeature([], tf.string), "class": tf.io.FixedLenFeature([], tf.int64)}

    def read_labeled_tfrecord(record: object) -> object:
        example = tf.io.parse_single_example(record, features)
        image = tf.reshape(tf.io.decode_jpeg(example["image"], channels=3), [SIZE, SIZE, 3])
        return image, example["class"]

    distribution = keras.distribution.DataParallel(devices=jax.devices())
    keras.distribution.set_distribution(distribution)
    options = tf.data.Options()
    options.deterministic = False
    records = tf.data.TFRecordDataset(files, num_parallel_reads=auto).with_options(options)
    images = records.repeat().shuffle(2048).map(read_labeled_tfrecord, num_parallel_calls=auto)
    flipped = images.map(lambda image, label: (tf.image.random_flip_left_right(image), label), num_parallel_calls=auto)
    batches = flipped.batch(PER_REPLICA_BATCH * len(jax.devices()), drop_remainder=True).prefetch(auto)
    return distribution, batches, small_cnn


def worker(kind: str, devices: int, epochs: int) -> None:
    """One process of a setup: fit one epoch to compile, then time `epochs` more; process 0 prints JSON."""
    from nbkit.images import layout

    files = layout.find_files(str(DATA), SIZE, "train")
    scope_of, batches, build = (notebook_setup if kind == "notebook" else plain_setup)(files, devices, epochs)
    import jax
    import keras

    steps = COUNT // (PER_REPLICA_BATCH * 8)
    keras.utils.set_random_seed(42)
    with scope_of.scope():
        model = build()
        model.compile(
            keras.optimizers.Adam(),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            steps_per_execution=steps,
        )
    model.fit(batches, epochs=1, steps_per_epoch=steps, verbose=0)  # compile
    start = time.perf_counter()
    history = model.fit(batches, epochs=epochs, steps_per_epoch=steps, verbose=0)
    seconds = time.perf_counter() - start
    if jax.process_index() == 0:
        print(
            json.dumps(
                {"steps_per_s": epochs * steps / seconds, "steps": epochs * steps, "loss": history.history["loss"][-1]}
            )
        )


def run_setup(kind: str, processes: int, devices: int, epochs: int) -> dict[str, float] | None:
    """One run of a setup (its processes started together); None when it hung past HANG_S (every
    process is then killed: XLA:CPU's all-reduce deadlock, which nbkit's thread count avoids)."""
    port = coordinator_port()
    command = [sys.executable, __file__, "--worker", kind, "--devices", str(devices), "--epochs", str(epochs)]
    running = []
    for index in range(processes):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        if processes > 1:
            env.update(
                KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
                KERAS_DISTRIBUTION_NUM_PROCESSES=str(processes),
                KERAS_DISTRIBUTION_PROCESS_ID=str(index),
            )
        running.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        results = [p.communicate(timeout=HANG_S) for p in running]
    except subprocess.TimeoutExpired:
        for process in running:
            process.kill()
            process.wait()
        return None
    if any(p.returncode for p in running):
        sys.exit(f"{kind} {processes}x{devices} failed:\n" + "\n".join(err[-3000:] for _, err in results))
    return json.loads(results[0][0].strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run (after one to compile)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setup, interleaved; the best counts")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.devices, args.epochs)
    if not DATA.exists():
        from nbkit.images import sample

        sample.make_sample(DATA, CLASSES)
    best: dict[tuple[str, int, int], dict[str, float]] = {}
    hung = dict.fromkeys(SETUPS, 0)
    for _ in range(args.rounds):
        for setup in SETUPS:
            found = run_setup(*setup, args.epochs)
            if found is None:
                hung[setup] += 1
            elif setup not in best or found["steps_per_s"] > best[setup]["steps_per_s"]:
                best[setup] = found
    base = best[("notebook", 1, 8)]["steps_per_s"]
    rows = []
    for setup in SETUPS:
        kind, processes, devices = setup
        r = best.get(setup, {"steps_per_s": math.nan, "loss": math.nan})
        rows.append(
            [
                kind,
                f"{processes} x {devices}",
                f"{r['steps_per_s']:.2f}",
                f"{1 / r['steps_per_s']:.3f}",
                f"{r['steps_per_s'] / base:.2f}",
                f"{r['loss']:.4f}",
                f"{hung[setup]} of {args.rounds}",
            ]
        )
    header = ["setup", "processes x devices", "steps/s", "s/step", "vs notebook 1 x 8", "loss at the end", "hung"]
    notes = (
        f"Best of {args.rounds} interleaved runs of {args.epochs} timed epochs each, after one epoch that compiles. "
        "2 x 4 shares this machine's cores between two processes and adds Gloo's TCP all-reduce: an overhead "
        "figure, not a speed-up."
    )
    report.save("pod_slices", "Pod slices in miniature: training steps/s", header, rows, notes)


if __name__ == "__main__":
    main()
