"""Notebook 10 (Gemma 3 with LoRA) in miniature on 8 simulated CPU devices (Keras on JAX): training tokens/s and the
time to the first step of its own `fit` (its cells, run up to the training: the pairs tokenized once into
arrays, the model sharded by nbkit's layout rules) against plain KerasHub, the obvious way:
`Gemma3CausalLM(backbone, preprocessor).fit(tf.data of {"prompts", "responses"})` under `DataParallel`, which
tokenizes every epoch. The same tiny Gemma 3, tokenizer, LoRA targets and rank, data and global batch (16).
Then the memory plan's figures for Gemma 3 1B, 4B and 12B on a v5e-8, from their configs (written here: no
download).

    .venv/bin/python bench/llm_finetune.py [--epochs 3]

Writes out/bench/llm_finetune.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETUPS = ("notebook data", "notebook 2x4", "plain DataParallel")


def worker(kind: str, epochs: int) -> None:
    import jupytext

    cells = jupytext.read(REPO / "notebooks" / "10_llm_finetune.py").cells
    code = []
    for cell in cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## Train"):
            break
        if cell.cell_type == "code":
            code.append(cell.source)
    ns: dict = {"__annotations__": {}}
    exec(code[0], ns)
    ns.update(PRESET="tiny", SIMULATE_DEVICES=8, EPOCHS=epochs + 1, MESH="2x4" if "2x4" in kind else "data")
    ns.update(OUTPUT_DIR=str(REPO / "out" / "bench" / "llm-run"))
    for source in code[1:]:
        exec(source, ns)
    keras, batch, length = ns["keras"], ns["GLOBAL_BATCH"], ns["SEQUENCE_LENGTH"]

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, step, logs=None):
            self.first = getattr(self, "first", time.perf_counter())

        def on_epoch_begin(self, epoch, logs=None):
            self.begin = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.last = time.perf_counter() - self.begin  # the last epoch's seconds (the first compiles)

    clock, rows = Clock(), ns["train_rows"][: ns["steps_per_epoch"] * batch]
    if kind.startswith("notebook"):
        model, start = ns["causal_lm"], time.perf_counter()
        batches = ns["get_dataset"](ns["train_x"], ns["train_y"], ns["train_weights"])
        model.fit(batches, epochs=epochs + 1, steps_per_epoch=ns["steps_per_epoch"], callbacks=[clock], verbose=0)
    else:
        import keras_hub
        import tensorflow as tf

        keras.distribution.set_distribution(keras.distribution.DataParallel())
        keras.utils.set_random_seed(42)
        config = {k: ns["config"][k] for k in (*ns["TINY"], "vocabulary_size")}
        backbone = keras_hub.models.Gemma3Backbone(**config, image_size=896, vision_encoder=None)
        # A fresh tokenizer: the notebook's, used eagerly, fails inside tf.data (SentencepieceOp resource not found).
        tokenizer = keras_hub.models.Gemma3Tokenizer(proto=ns["tokenizer"].proto)
        preprocessor = keras_hub.models.Gemma3CausalLMPreprocessor(tokenizer, sequence_length=length)
        model = keras_hub.models.Gemma3CausalLM(backbone=backbone, preprocessor=preprocessor)
        backbone.enable_lora(ns["LORA_RANK"], ns["LORA_TARGETS"])
        model.compile(
            optimizer=keras.optimizers.AdamW(ns["LEARNING_RATE"]),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=["accuracy"],
        )
        pairs = ns["pairs"]
        data = {
            "prompts": [ns["chat_prompt"](pairs.prompts[i]) for i in rows],
            "responses": [ns["chat_response"](pairs.responses[i]) for i in rows],
        }
        start = time.perf_counter()
        model.fit(
            tf.data.Dataset.from_tensor_slices(data).batch(batch), epochs=epochs + 1, callbacks=[clock], verbose=0
        )
    tokens_per_s = len(rows) * length / clock.last
    print("RESULT " + json.dumps({"tokens_per_s": tokens_per_s, "first_step_s": clock.first - start}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--worker", default="")
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.epochs)
    sys.path.insert(0, str(REPO))
    from nbkit.llm import model_sizes, planning

    found = {}
    for kind in SETUPS:
        run = subprocess.run(
            [sys.executable, __file__, "--worker", kind, "--epochs", str(args.epochs)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if run.returncode:
            sys.exit(run.stdout[-2000:] + run.stderr[-4000:])
        found[kind] = json.loads(run.stdout.split("RESULT ", 1)[1])
    plain = found["plain DataParallel"]["tokens_per_s"]
    lines = ["| setup | tokens/s | vs plain | time to first step (s) |", "|---|---|---|---|"]
    for kind, values in found.items():
        ratio = values["tokens_per_s"] / plain
        lines.append(f"| {kind} | {values['tokens_per_s']:,.0f} | {ratio:.2f}x | {values['first_step_s']:.1f} |")
    lines += [
        "",
        "| model (v5e-8, bfloat16, LoRA rank 8 on query and value, 1 x 2048 tokens a chip) "
        "| parameters | mesh | weights/chip | activations/chip | total/chip |",
        "|---|---|---|---|---|---|",
    ]
    plans = {}
    for name, config in {**model_sizes.GEMMA3_CONFIGS, **model_sizes.GEMMA4_CONFIGS}.items():
        sizes = model_sizes.from_config(config)
        plan = planning.memory_plan(sizes, 8, None, 1, 2048, 8, chip_gib=planning.CHIP_GIB["TPU v5 lite"])
        plans[name] = {
            "parameters": plan.parameters,
            "mesh": plan.mesh,
            "total_gib": plan.total / 2**30,
            "fits": plan.fits,
        }
        gib = 2**30
        fits = "" if plan.fits else " (does not fit)"
        weights, activations = plan.parts["weights"] / gib, plan.parts["activations"] / gib
        lines.append(
            f"| {name} | {plan.parameters / 1e9:.2f}B | {plan.mesh[0]}x{plan.mesh[1]} | {weights:.2f} GiB "
            f"| {activations:.2f} GiB | {plan.total / gib:.2f} GiB{fits} |"
        )
    table = "\n".join(lines)
    print(table)
    out = REPO / "out" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "llm_finetune.md").write_text(table + "\n")
    (out / "llm_finetune.json").write_text(json.dumps({"fit": found, "plans": plans}, indent=2) + "\n")


if __name__ == "__main__":
    main()
