"""Notebook 08 (text) in miniature: tokenization (pairs/s on the host) and training steps/s of its model on 8
simulated CPU devices (Keras on JAX), its own way (`tokenize` once, `get_dataset` of token ids, `build_model`,
compiled with `steps_per_execution`; its functions read from the notebook, bench/notebook.py) against KerasHub's
plain way: `BertTextClassifier(backbone, preprocessor=...)` and `fit(x=(premises, hypotheses), y=labels)`, which
tokenizes in its tf.data pipeline every epoch (as it is, and with the notebook's `steps_per_execution`). The same
tiny BERT, data and global batch; also the input wait of the notebook's timed epochs (its input monitor).

    .venv/bin/python bench/text_classifier.py [--rows 4096] [--epochs 3] [--rounds 2]

Writes out/bench/text_classifier.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notebook  # noqa: E402
import report  # noqa: E402

DATA = Path("out/bench/text-data")
NOTEBOOK = notebook.NOTEBOOK.with_name("08_text_classifier.py")
PER_REPLICA_BATCH, SEQUENCE_LENGTH = 16, 32
SETUPS = ("notebook", "plain", "plain-spe")


def worker(kind: str, epochs: int) -> None:
    """One run: build the model, fit one epoch to compile, then time `epochs` more; print JSON."""
    from nbkit import accel, models
    from nbkit.text import competition as text

    acc = accel.setup("jax", simulate_devices=8)
    import keras
    import keras_hub
    import numpy as np

    data = text.load_data(str(DATA))
    rows = np.arange(data.train.count)
    global_batch = PER_REPLICA_BATCH * acc.num_replicas
    steps = data.train.count // global_batch
    nb = notebook.load(
        len(data.classes),
        NOTEBOOK,
        data=data,
        train_rows=rows,
        preset_folder=None,
        SEQUENCE_LENGTH=SEQUENCE_LENGTH,
        GLOBAL_BATCH=global_batch,
        SEED=42,
        TEXTS=["premise", "hypothesis"],
    )
    preprocessor = nb["preprocessor"] = nb["build_preprocessor"]()
    nb["tokenizer"] = preprocessor.tokenizer
    keras.utils.set_random_seed(42)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    result: dict[str, float] = {}
    if kind == "notebook":
        start = time.perf_counter()
        features = nb["tokenize"](data.train, rows)
        result["pairs_per_s"] = data.train.count / (time.perf_counter() - start)
        batches = nb["get_dataset"](features, data.train.labels, training=True)
        with acc.scope():
            model = nb["build_model"]()
            model.compile(keras.optimizers.AdamW(1e-3), loss, steps_per_execution=steps)
        monitor = models.input_monitor()
        model.fit(batches, epochs=1, steps_per_epoch=steps, verbose=0)  # compiles
        start = time.perf_counter()
        history = model.fit(
            monitor.watch(batches), epochs=epochs, steps_per_epoch=steps, callbacks=[monitor], verbose=0
        )
        result["input_wait"] = float(np.mean([wait.share for wait in monitor.epochs]))
    else:
        with acc.scope():
            model = keras_hub.models.BertTextClassifier(
                nb["build_backbone"](), len(data.classes), preprocessor=preprocessor
            )
            model.compile(keras.optimizers.AdamW(1e-3), loss, steps_per_execution=steps if kind == "plain-spe" else 1)
        x, y = (np.array(data.train.texts[0]), np.array(data.train.texts[1])), data.train.labels
        model.fit(x=x, y=y, batch_size=global_batch, epochs=1, verbose=0)  # compiles
        start = time.perf_counter()
        history = model.fit(x=x, y=y, batch_size=global_batch, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - start
    result.update(steps_per_s=epochs * steps / seconds, loss=history.history["loss"][-1])
    print(json.dumps(result))


def run(kind: str, epochs: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", kind, "--epochs", str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ})
    if done.returncode:
        sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096, help="training rows of the generated sample")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run (after one to compile)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setup, interleaved; the best counts")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.epochs)
    from nbkit.text import sample as text_sample

    text_sample.make(DATA, train_rows=args.rows, test_rows=64)
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.rounds):
        for kind in SETUPS:
            found = run(kind, args.epochs)
            if kind not in best or found["steps_per_s"] > best[kind]["steps_per_s"]:
                best[kind] = found
    plain = best["plain"]["steps_per_s"]
    rows = [
        [
            "notebook 08: tokenize once, token ids batched, steps_per_execution = steps per epoch",
            best["notebook"]["pairs_per_s"],
            best["notebook"]["steps_per_s"],
            best["notebook"]["steps_per_s"] / plain,
            f"{100 * best['notebook']['input_wait']:.1f} %",
            best["notebook"]["loss"],
        ],
        [
            "KerasHub's plain fit: the preprocessor inside, texts in",
            float("nan"),
            plain,
            1.0,
            "n/a",
            best["plain"]["loss"],
        ],
        [
            "the same with steps_per_execution = steps per epoch",
            float("nan"),
            best["plain-spe"]["steps_per_s"],
            best["plain-spe"]["steps_per_s"] / plain,
            "n/a",
            best["plain-spe"]["loss"],
        ],
    ]
    header = ["setup", "tokenization pairs/s", "training steps/s", "vs plain", "input wait", "loss at the end"]
    notes = (
        f"{args.rows} training pairs of the generated Watson sample, tiny BERT (2 layers, hidden 64), "
        f"{SEQUENCE_LENGTH} tokens, global batch {PER_REPLICA_BATCH * 8} on 8 simulated JAX devices; "
        f"best of {args.rounds} interleaved runs of {args.epochs} timed epochs, after one that compiles. "
        "Tokenization: the notebook's `tokenize` over every training pair, once (the plain fit tokenizes inside its "
        "steps, every epoch)."
    )
    report.save("text_classifier", "Notebook 08 (text): tokenization and training steps/s", header, rows, notes)


if __name__ == "__main__":
    main()
