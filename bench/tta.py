"""What test-time augmentation buys: the smoke profile's small CNN trained on the generated sample
(notebook 02's recipe, seed fixed), then its validation scores with TTA = 1 to 4 views averaged
(`nbkit.images.augment.VIEWS`), and the time each prediction pass takes.

    .venv/bin/python bench/tta.py [--epochs 8] [--augment flips]

Writes out/bench/tta.{md,json}; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--augment", default="flips", help="the training augmentation (flips or standard)")
    args = parser.parse_args()
    from nbkit import accel, batching, models

    accel.setup("tensorflow")  # before Keras is imported
    import keras

    from nbkit.images import augment, layout, metrics, ordered, pipeline, predict, sample

    root = report.OUT / "augmentation-data"
    if not root.is_dir():
        sample.make_sample(root, 104)
    train, val = layout.find_files(root, 192, "train"), layout.find_files(root, 192, "val")
    plan = batching.plan(layout.count_items(train), 208, 16, 1, 192 * 192 * 3, steps_per_execution=16)
    keras.utils.set_random_seed(42)
    model = models.build_classifier("small_cnn", 192, 104)
    model.compile(keras.optimizers.Adam(2.5e-4), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(
        pipeline.train_batches(train, 192, plan, 42, recipe=args.augment),
        epochs=args.epochs,
        steps_per_epoch=plan.steps_per_epoch,
        validation_data=ordered.val_batches(val, 192, 16),
        verbose=0,
    )
    rows = []
    for views in range(1, len(augment.VIEWS) + 1):
        start = time.perf_counter()
        found = predict.predict_in_order(model, val, 192, labeled=True, global_batch=16, views=views)
        seconds = time.perf_counter() - start
        _, scores = metrics.of_predictions(found.keys, found.probabilities, "f1_macro")
        rows.append([views, ", ".join(augment.VIEWS[:views]), scores["accuracy"], scores["f1_macro"], seconds])
    base = rows[0]
    for row in rows:
        row.insert(4, f"{row[3] - base[3]:+.3f}")
    notes = (
        f"{os.cpu_count()} CPU cores; small CNN, {args.epochs} epochs of the generated sample (832 training, 208 "
        f"validation images, 104 classes), AUGMENT={args.augment}; one training run, so the gain is of this model."
    )
    headers = ["TTA", "views", "val accuracy", "val macro F1", "F1 gain", "predict s"]
    report.save("tta", "Test-time augmentation on the validation set", headers, rows, notes)


if __name__ == "__main__":
    main()
