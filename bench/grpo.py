"""Notebook 11 (GRPO through Tunix) in miniature on 8 simulated CPU devices: GRPO steps/s and rollout tokens/s of
its own cells against the official Tunix demo's setup ported as it is written (`examples/grpo_gemma.ipynb`: its
optimizer chain with gradient clipping and a warm-up cosine schedule, its rollout settings (top_k 50, a KV cache
256 tokens longer), its TensorBoard metrics, checkpoint and evaluation settings, its four reward functions), on the
same tiny Gemma 3, tokenizer, data and 2x4 mesh, with the demo's NUM_GENERATIONS=2, batch 1, BETA=0.08. One run
each, each in a fresh process; the first step (compiles) is left out of the rates. Then the memory plan's figures
for Gemma 3 1B and Gemma 2 2B on a v5e-8 (their configs written here: no download).

    .venv/bin/python bench/grpo.py [--steps 30]

Writes out/bench/grpo.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETUPS = ("notebook 11", "demo as written")


def worker(kind: str, steps: int) -> None:
    import jupytext

    code = [c.source for c in jupytext.read(REPO / "notebooks" / "11_grpo_reasoning.py").cells if c.cell_type == "code"]
    ns: dict = {"__annotations__": {}}
    exec(code[0], ns)
    ns.update(MODEL="tiny", MESH="2x4", SIMULATE_DEVICES=8, BATCH_SIZE=1, NUM_GENERATIONS=2, BETA=0.08, MAX_STEPS=steps)
    ns.update(SFT_STEPS=0)  # the GRPO steps alone are timed
    ns.update(RESUME="restart", OUTPUT_DIR=str(REPO / "out" / "bench" / f"grpo-{kind.split()[0]}"))
    training = next(i for i, source in enumerate(code) if "learner.train(" in source)
    for source in code[1:training]:
        exec(source, ns)
    source = code[training]
    if kind == "demo as written":
        source = source.replace(
            "cluster = rl_cluster_lib.RLCluster(",
            "cluster_config = demo_config(ns)\ncluster = rl_cluster_lib.RLCluster(",
        )
        source = source.replace("reward_fns=rl.named_rewards(REWARDS)", "reward_fns=demo_rewards()")
        source = source.replace('kl_loss_mode="low_var_kl"', "")
        ns.update(demo_config=demo_config, demo_rewards=demo_rewards, ns=ns)
    times: list[float] = []
    kept = '        atomic.write_json(history, checkpoints / "history.json")'
    source = source.replace(kept, f"{kept}\n        TIMES.append(time.perf_counter())")
    ns["TIMES"] = times
    exec(source, ns)
    history = ns["history"]
    window = times[-1] - times[0]
    tokens = sum(h["completions/mean_length"] * ns["ROWS"] for h in history[1:])
    print(
        "RESULT "
        + json.dumps(
            {"steps": len(history), "steps_per_s": (len(history) - 1) / window, "tokens_per_s": tokens / window}
        )
    )


def demo_config(ns: dict):
    """The demo's ClusterConfig, its settings as written (sizes scaled to the tiny model's prompt and answers)."""
    import optax
    import orbax.checkpoint as ocp
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl.rollout import base_rollout
    from tunix.sft import metrics_logger

    steps, mesh, role = ns["MAX_STEPS"], ns["mesh"], rl_cluster_lib.Role
    optimizer = optax.chain(
        optax.clip_by_global_norm(max_norm=0.1),
        optax.adamw(
            learning_rate=optax.schedules.warmup_cosine_decay_schedule(
                0.0, ns["LEARNING_RATE"], max(1, steps // 10), steps
            ),
            b1=0.9,
            b2=0.99,
            weight_decay=0.1,
        ),
    )
    return rl_cluster_lib.ClusterConfig(
        role_to_mesh={role.ACTOR: mesh, role.REFERENCE: mesh, role.ROLLOUT: mesh},
        rollout_engine="vanilla",
        offload_to_cpu=False,
        training_config=rl_cluster_lib.RLTrainingConfig(
            actor_optimizer=optimizer,
            eval_every_n_steps=64,
            max_steps=steps,
            mini_batch_size=1,
            train_micro_batch_size=1,
            metrics_logging_options=metrics_logger.MetricsLoggerOptions(
                log_dir=ns["OUTPUT_DIR"] + "/tensorboard", flush_every_n_steps=20
            ),
            checkpoint_root_directory=str(ns["checkpoints"]),
            checkpointing_options=ocp.CheckpointManagerOptions(save_interval_steps=500, max_to_keep=4),
        ),
        rollout_config=base_rollout.RolloutConfig(
            max_tokens_to_generate=ns["MAX_NEW_TOKENS"],
            max_prompt_length=ns["MAX_PROMPT_LENGTH"],
            kv_cache_size=ns["MAX_PROMPT_LENGTH"] + ns["MAX_NEW_TOKENS"] + 256,
            temperature=0.9,
            top_p=1.0,
            top_k=50,
            eos_tokens=ns["EOS"],
        ),
    )


def demo_rewards():
    """The demo's four reward functions, as it writes them (its regexes and scores)."""
    import re

    match_format = re.compile(
        r"^[\s]{0,}<reasoning>.+?</reasoning>.*?<answer>(.+?)</answer>[\s]{0,}$", flags=re.MULTILINE | re.DOTALL
    )
    match_numbers = re.compile(r"<answer>.*?([\d\.]{1,})", flags=re.MULTILINE | re.DOTALL)

    def match_format_exactly(prompts, completions, **kargs):
        return [0 if match_format.search(r) is None else 3.0 for r in completions]

    def match_format_approximately(prompts, completions, **kargs):
        return [
            sum(0.5 if r.count(t) == 1 else -0.5 for t in ("<reasoning>", "</reasoning>", "<answer>", "</answer>"))
            for r in completions
        ]

    def check_answer(prompts, completions, answer, **kargs):
        found = [g.group(1) if (g := match_format.search(r)) else None for r in completions]
        return [
            0 if g is None else 3.0 if g == a else 1.5 if g.strip() == a.strip() else -1.0
            for g, a in zip(found, answer)
        ]

    def check_numbers(prompts, completions, answer, **kargs):
        found = [g.group(1) if (g := match_numbers.search(r)) else None for r in completions]
        scores = []
        for g, a in zip(found, answer):
            try:
                scores.append(0 if g is None else 1.5 if float(g.strip()) == float(a.strip()) else 0.0)
            except ValueError:
                scores.append(0)
        return scores

    return [match_format_exactly, match_format_approximately, check_answer, check_numbers]


def memory_plans() -> list[str]:
    sys.path.insert(0, str(REPO))
    from nbkit.llm import model_sizes, planning

    configs = {
        "Gemma 3 1B": dict(
            num_layers=26, num_embed=262144, embed_dim=1152, hidden_dim=6912, num_heads=4, head_dim=256, num_kv_heads=1
        ),
        "Gemma 2 2B": dict(
            num_layers=26, num_embed=256128, embed_dim=2304, hidden_dim=9216, num_heads=8, head_dim=256, num_kv_heads=4
        ),
    }
    lines = ["| model | LoRA rank | per chip (v5e-8, 4 questions x 4 answers, 256 + 768 tokens) |", "|---|---|---|"]
    for name, sizes in configs.items():
        for rank in (64, 0):
            model = model_sizes.from_config(sizes)
            mesh = planning.pick_mesh(model, 8, 16, "auto")
            plan = planning.memory_plan(model, 8, mesh, 16 / 8, 256 + 768, rank, chip_gib=15.75, grpo=True)
            lines.append(
                f"| {name} | {rank or 'every weight'} | {plan.describe().splitlines()[1].removeprefix('per chip: ')} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--worker", choices=SETUPS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.steps)
    results = {}
    for kind in SETUPS:
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, __file__, "--worker", kind, "--steps", str(args.steps)],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"},
        )
        if run.returncode:
            sys.exit(run.stdout[-2000:] + run.stderr[-3000:])
        results[kind] = {**json.loads(run.stdout.split("RESULT ", 1)[1]), "wall_s": time.perf_counter() - start}
    ours, demo = results["notebook 11"], results["demo as written"]
    lines = ["| setup | steps | GRPO steps/s | rollout tokens/s | wall s |", "|---|---|---|---|---|"]
    lines += [
        f"| {k} | {r['steps']} | {r['steps_per_s']:.2f} | {r['tokens_per_s']:.0f} | {r['wall_s']:.0f} |"
        for k, r in results.items()
    ]
    lines += [
        "",
        f"notebook 11 / demo: steps/s {ours['steps_per_s'] / demo['steps_per_s']:.2f}, "
        f"tokens/s {ours['tokens_per_s'] / demo['tokens_per_s']:.2f}",
        "",
    ]
    lines += memory_plans()
    out = REPO / "out" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "grpo.md").write_text("\n".join(lines) + "\n")
    (out / "grpo.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
