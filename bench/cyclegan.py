"""Notebook 09 (CycleGAN) in miniature, on 8 simulated CPU devices (Keras on JAX, DataParallel):

- training steps/s of the notebook's `train_step` (two `jax.value_and_grad` calls, each generator run once on
  everything it translates) against the obvious Keras 3 port of the starter's `tf.GradientTape` step: the same
  networks, Adams and `fit`, one `jax.value_and_grad` per network over the whole forward pass, each network
  called once per picture set as the starter does. Both without DiffAugment (the starter has none); the
  notebook's classes and functions are read from the notebook (bench/notebook.py).
- pictures/s written into images.zip: `nbkit.imagegen.paintings.write_zip` (TensorFlow encodes each chunk of pictures
  and decodes every JPEG again at 1/8 scale on its threads; the zip read back after) against a plain loop of
  `PIL.Image.save` into `zipfile`, interleaved, the best of each.

    .venv/bin/python bench/cyclegan.py [--size 64] [--epochs 2] [--rounds 2] [--pictures 1000]

Writes out/bench/cyclegan.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import notebook  # noqa: E402
import report  # noqa: E402

NOTEBOOK = notebook.NOTEBOOK.with_name("09_monet_cyclegan.py")
FILTERS, PER_REPLICA_BATCH, STEPS = 16, 1, 8


def starter_port(nb: dict) -> type:
    """The obvious port of the starter's step: a `GradientTape` becomes one `jax.value_and_grad` per network,
    each of the whole forward pass; the notebook's model otherwise (its networks, Adams, carried state)."""
    import jax

    class StarterPort(nb["CycleGan"]):
        def train_step(self, state, data):
            trainable, non_trainable, optimizer_state, metrics = state
            variables = self.trainable_variables + self.non_trainable_variables + self.metrics_variables
            value = dict(zip(map(id, variables), [*trainable, *non_trainable, *metrics]))
            of = lambda variables: [value[id(v)] for v in variables]  # noqa: E731
            real_monet, real_photo = data
            names = nb["NETWORKS"]
            seeds = {n: of(getattr(self, n).non_trainable_variables) for n in names}
            bce, l1, lam = nb["bce"], nb["l1"], nb["LAMBDA_CYCLE"]

            def forward(weights, seeds):
                seeds = dict(seeds)

                def run(name, x):
                    y, seeds[name] = getattr(self, name).stateless_call(weights[name], seeds[name], x, training=True)
                    return y

                fake_monet = run("monet_generator", real_photo)
                cycled_photo = run("photo_generator", fake_monet)
                fake_photo = run("photo_generator", real_monet)
                cycled_monet = run("monet_generator", fake_photo)
                same_monet, same_photo = run("monet_generator", real_monet), run("photo_generator", real_photo)
                disc_real_monet, disc_real_photo = (
                    run("monet_discriminator", real_monet),
                    run("photo_discriminator", real_photo),
                )
                disc_fake_monet, disc_fake_photo = (
                    run("monet_discriminator", fake_monet),
                    run("photo_discriminator", fake_photo),
                )
                cycle = lam * (l1(real_monet, cycled_monet) + l1(real_photo, cycled_photo))
                return {
                    "monet_generator": bce(disc_fake_monet, 1.0) + cycle + 0.5 * lam * l1(real_monet, same_monet),
                    "photo_generator": bce(disc_fake_photo, 1.0) + cycle + 0.5 * lam * l1(real_photo, same_photo),
                    "monet_discriminator": (bce(disc_real_monet, 1.0) + bce(disc_fake_monet, 0.0)) / 2,
                    "photo_discriminator": (bce(disc_real_photo, 1.0) + bce(disc_fake_photo, 0.0)) / 2,
                }, seeds

            weights = {n: of(getattr(self, n).trainable_variables) for n in names}
            losses = {}
            for name in names:  # tape.gradient(loss, network.trainable_variables), four times

                def loss_of(own, name=name):
                    found, new_seeds = forward({**weights, name: own}, seeds)
                    return found[name], new_seeds

                (losses[name], new_seeds), grads = jax.value_and_grad(loss_of, has_aux=True)(weights[name])
                adam = self.adams[name]
                new_weights, new_moments = adam.stateless_apply(of(adam.variables), grads, weights[name])
                value.update(zip(map(id, getattr(self, name).trainable_variables), new_weights))
                value.update(zip(map(id, adam.variables), new_moments))
            for name in names:
                value.update(zip(map(id, getattr(self, name).non_trainable_variables), new_seeds[name]))
            logs = {f"{name}_loss": loss for name, loss in losses.items()}
            return logs, (
                of(self.trainable_variables),
                of(self.non_trainable_variables),
                optimizer_state,
                of(self.metrics_variables),
            )

    return StarterPort


def worker(kind: str, size: int, epochs: int) -> None:
    """One run: build, fit one epoch to compile, time `epochs` more; print JSON."""
    from nbkit import accel

    acc = accel.setup("jax", simulate_devices=8)
    import keras
    import numpy as np

    global_batch = PER_REPLICA_BATCH * acc.num_replicas
    nb = notebook.load(
        0,
        NOTEBOOK,
        IMAGE_SIZE=size,
        FILTERS=FILTERS,
        GLOBAL_BATCH=global_batch,
        DIFF_AUGMENT=False,
        SEED=42,
        init=keras.initializers.RandomNormal(0.0, 0.02),
    )
    rng = np.random.default_rng(0)
    pictures = [rng.uniform(-1, 1, (STEPS * global_batch, size, size, 3)).astype("float32") for _ in range(2)]
    keras.utils.set_random_seed(42)
    with acc.scope():
        model = (nb["CycleGan"] if kind == "notebook" else starter_port(nb))()
        model.compile(steps_per_execution=STEPS)
    fit = dict(x=pictures[0], y=pictures[1], batch_size=global_batch, verbose=0)
    model.fit(**fit, epochs=1)  # compiles
    start = time.perf_counter()
    model.fit(**fit, epochs=epochs)
    seconds = time.perf_counter() - start
    steps = {name: int(adam.iterations) for name, adam in model.adams.items()}
    print(json.dumps({"steps_per_s": epochs * STEPS / seconds, "adam_steps": steps}))


def run(kind: str, size: int, epochs: int) -> dict:
    command = [sys.executable, __file__, "--worker", kind, "--size", str(size), "--epochs", str(epochs)]
    done = subprocess.run(command, capture_output=True, text=True, env={"TF_CPP_MIN_LOG_LEVEL": "2", **os.environ})
    if done.returncode:
        sys.exit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def zip_rates(count: int) -> tuple[float, float]:
    """Pictures/s into a zip: nbkit's write_zip (read back included) and a plain PIL.save-into-zipfile loop."""
    import numpy as np
    from PIL import Image

    from nbkit.imagegen import paintings
    from nbkit.imagegen import sample as painting_sample

    rng = np.random.default_rng(0)
    base = [painting_sample.style(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)) for _ in range(16)]
    pictures = [(f"p{i:05d}", base[i % 16]) for i in range(count)]
    with tempfile.TemporaryDirectory() as scratch:
        paintings.write_zip(Path(scratch) / "warm.zip", iter(pictures[:16]), 16)  # TensorFlow imported, as in 09
        start = time.perf_counter()
        paintings.write_zip(Path(scratch) / "images.zip", iter(pictures), count)
        nbkit_rate = count / (time.perf_counter() - start)
        start = time.perf_counter()
        with zipfile.ZipFile(Path(scratch) / "plain.zip", "w") as archive:
            for name, picture in pictures:
                with archive.open(f"{name}.jpg", "w") as entry:
                    Image.fromarray(picture).save(entry, "JPEG", quality=95)
        plain_rate = count / (time.perf_counter() - start)
    return nbkit_rate, plain_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="picture size the networks train at")
    parser.add_argument("--epochs", type=int, default=2, help=f"timed epochs of {STEPS} steps (after one to compile)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setup, interleaved; the best counts")
    parser.add_argument("--pictures", type=int, default=1000, help="pictures written into each zip")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.size, args.epochs)
    best: dict[str, dict] = {}
    zips: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        for kind in ("notebook", "starter"):
            found = run(kind, args.size, args.epochs)
            if kind not in best or found["steps_per_s"] > best[kind]["steps_per_s"]:
                best[kind] = found
        zips.append(zip_rates(args.pictures))
    nbkit_zip, plain_zip = max(z[0] for z in zips), max(z[1] for z in zips)
    port = best["starter"]["steps_per_s"]
    rows = [
        [
            "notebook 09's train_step (two value_and_grad, each generator once)",
            best["notebook"]["steps_per_s"],
            best["notebook"]["steps_per_s"] / port,
            "steps/s",
        ],
        ["the starter's step ported as it is (one value_and_grad per network)", port, 1.0, "steps/s"],
        [
            "nbkit write_zip: encoded and decoded again on TensorFlow's threads, read back",
            nbkit_zip,
            nbkit_zip / plain_zip,
            "pictures/s",
        ],
        ["a plain loop of PIL.Image.save into zipfile", plain_zip, 1.0, "pictures/s"],
    ]
    notes = (
        f"Training: {args.size} px, first layer {FILTERS} filters, global batch {PER_REPLICA_BATCH * 8} on 8 simulated "
        f"JAX devices (DataParallel), no DiffAugment; best of {args.rounds} interleaved runs of {args.epochs} timed "
        f"epochs of {STEPS} steps (steps_per_execution {STEPS}) after one that compiles; Adam steps at the end: "
        f"{best['notebook']['adam_steps']}. Zip: {args.pictures} 256x256 JPEGs (quality 95) on {os.cpu_count()} CPUs."
    )
    report.save(
        "cyclegan",
        "Notebook 09 (CycleGAN): train_step steps/s and images.zip pictures/s",
        ["setup", "rate", "vs plain", "unit"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
