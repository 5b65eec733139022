"""Notebook 12 (answer a test set) on a CPU with Hugging Face transformers: answers/s and new tokens/s of its own
cells (prompts tokenized once, batched by length, left-padded, `generate` a batch at a time) against the obvious
loop a user writes first (`model.generate` on one prompt at a time, in the file's order), and the notebook's
batches in the file's order (no sorting: what the sorting alone gains). The same tiny Gemma 3 (random weights, as the
notebook's smoke profile writes it), the same prompts (questions of 2 to 40 words, so that lengths differ), greedy, the
same MAX_NEW_TOKENS; each in a fresh process with one torch thread (as the test lanes), the fastest of a few runs
alternated between the setups; loading the model is left out of the rates.
Needs torch (Kaggle's TPU image's environment has it):

    .venv-kaggle-tpu/bin/python bench/answers.py [--prompts 256] [--max-new-tokens 32] [--batch-size 32] [--repeats 3]

Writes out/bench/answers.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "out" / "bench"
sys.path.insert(0, str(REPO / "bench"))
import report  # noqa: E402  (bench/report.py, beside this file)

SETUPS = ("one prompt at a time", "notebook 12, batches in file order", "notebook 12, batches by length")
WORDS = "apple river stone cloud green fast old tree house light dark blue".split()


def make_data(folder: Path, count: int) -> Path:
    """test.csv (id, question) of `count` questions of 2 to 40 words, and the tiny model learned from them."""
    import numpy as np

    from nbkit import metrics
    from nbkit.llm import engines

    rng = np.random.default_rng(0)
    questions = [f"how many words: {' '.join(rng.choice(WORDS, int(rng.integers(2, 41))))}" for _ in range(count)]
    metrics.write_csv([["id", "question"], *([f"{i:04d}", q] for i, q in enumerate(questions))], folder / "test.csv")
    system = "Think step by step inside <reasoning> </reasoning>, then give the answer inside <answer> </answer>."
    engines.tiny_model(folder / "model", [system, *questions], 42)
    return folder


def worker(setup: str, folder: Path, max_new_tokens: int, batch_size: int) -> None:
    if setup == SETUPS[0]:
        return one_at_a_time(folder, max_new_tokens)
    import jupytext

    code = [
        c.source for c in jupytext.read(REPO / "notebooks" / "12_answer_test_set.py").cells if c.cell_type == "code"
    ]
    ns: dict = {"__annotations__": {}}
    exec(code[0], ns)
    ns.update(MODEL=str(folder / "model"), DATA_ROOT=str(folder / "test.csv"), ENGINE="transformers", PROFILE="full")
    ns.update(MAX_NEW_TOKENS=max_new_tokens, BATCH_SIZE=batch_size, OUTPUT_DIR=str(folder / "outputs"))
    loop = next(i for i, source in enumerate(code) if "rl.time_budget(" in source)
    for source in code[1:loop]:
        exec(source, ns)
    source = code[loop]
    if setup == SETUPS[1]:
        source = source.replace("rl.time_budget(iter(batches)", "rl.time_budget(iter(in_order)")
    exec(source, ns)
    print("RESULT " + json.dumps({"answers": len(ns["texts"]), "seconds": ns["seconds"], "tokens": ns["new_tokens"]}))


def one_at_a_time(folder: Path, max_new_tokens: int) -> None:
    """What a user writes first: the chat template, `generate` on each prompt, in the file's order."""
    import csv

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with open(folder / "test.csv", newline="") as f:
        questions = [row["question"] for row in csv.DictReader(f)]
    system = "Think step by step inside <reasoning> </reasoning>, then give the answer inside <answer> </answer>."
    tokenizer = AutoTokenizer.from_pretrained(folder / "model")
    model = AutoModelForCausalLM.from_pretrained(folder / "model", dtype=torch.float32).eval()
    stops = set(model.generation_config.eos_token_id)  # <eos> and <end_of_turn>, from generation_config.json
    start, tokens = time.perf_counter(), 0
    for question in questions:
        turns = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        ids = tokenizer.apply_chat_template(turns, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
        new = out[0, ids["input_ids"].shape[1] :].tolist()
        tokens += len(new) - (bool(new) and new[-1] in stops)  # as the notebook counts: before the stop token
    seconds = time.perf_counter() - start
    print("RESULT " + json.dumps({"answers": len(questions), "seconds": seconds, "tokens": tokens}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setup; the fastest is kept")
    parser.add_argument("--worker", choices=SETUPS)
    parser.add_argument("--folder", type=Path, default=OUT / "answers-data")
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.folder, args.max_new_tokens, args.batch_size)
    make_data(args.folder, args.prompts)
    results: dict[str, dict] = {}
    for _ in range(args.repeats):  # alternated, each setup's fastest run kept: a busy machine slows some runs 20x
        for setup in SETUPS:
            options = ["--folder", str(args.folder), "--max-new-tokens", str(args.max_new_tokens)]
            command = [sys.executable, __file__, "--worker", setup, *options, "--batch-size", str(args.batch_size)]
            threads = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # as the test lanes: no spinning
            run = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env={**os.environ, **threads})
            line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"{setup} failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
            found = json.loads(line[len("RESULT ") :])
            if setup not in results or found["seconds"] < results[setup]["seconds"]:
                results[setup] = found
    base = results[SETUPS[0]]["answers"] / results[SETUPS[0]]["seconds"]
    rows = []
    for setup, found in results.items():
        rate = found["answers"] / found["seconds"]
        rows.append([setup, found["seconds"], rate, found["tokens"] / found["seconds"], f"{rate / base:.2f}x"])
    threads = os.environ.get("OMP_NUM_THREADS", "1")
    notes = (
        f"{args.prompts} prompts of 2-40 words, greedy, MAX_NEW_TOKENS={args.max_new_tokens}, batches of "
        f"{args.batch_size}; the tiny Gemma 3 (random weights) on {os.cpu_count()} CPU cores, {threads} torch"
        f" thread(s); the fastest of {args.repeats} alternated runs each"
    )
    headers = ["setup", "seconds", "answers/s", "new tokens/s", "answers/s against one at a time"]
    report.save("answers", "Notebook 12: answering a test set with transformers on a CPU", headers, rows, notes)


if __name__ == "__main__":
    main()
