"""Notebook 11 (GRPO through Tunix) and its plumbing, nbkit.llm.rl: in this process, Tunix's group-normalised
advantage and KL term against cases worked by hand, the notebook's reward functions on hand-made completions, the
loss computed from the completion's tokens only, and the bad inputs that stop a run before anything loads; in one
fresh process on 8 simulated JAX devices, the notebook's own cells on the tiny Gemma 3: the same first-step loss on
two meshes, a run resumed at its checkpoint with the same batches, the saved model loaded back by Tunix's Gemma
code giving the same greedy completions; and notebook 10 -> 11 (SFT, then GRPO with LoRA) on the generated sample,
its LoRA-merged model loaded back the same way."""

from __future__ import annotations

import functools
import io
import json
import math
import subprocess
import sys

import jupytext
import numpy as np
import pytest
from conftest import REPO, clean_env

from nbkit.errors import DataError, ParameterError, RunError
from nbkit.llm import data, gemma, gemma4_config, model_sizes, planning, rl

NOTEBOOK = REPO / "notebooks" / "11_grpo_reasoning.py"
TINY = dict(num_layers=2, num_embed=128, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=1)


def cells_until(heading: str) -> list[str]:
    """The notebook's code cells before the markdown cell that starts with `heading`."""
    found = []
    for cell in jupytext.read(NOTEBOOK).cells:
        if cell.cell_type == "markdown" and cell.source.startswith(heading):
            return found
        if cell.cell_type == "code":
            found.append(cell.source)
    raise AssertionError(f"no heading {heading!r} in {NOTEBOOK.name}")


@pytest.fixture(scope="module")
def task():
    """The notebook's task cell (prompt, format, reward functions) run alone, with the parameters' defaults."""
    cells = cells_until("## Tokenizer")
    namespace = {"__annotations__": {}, "FAMILY": "gemma3"}
    exec(cells[0], namespace)
    source = cells[-1].split("REWARDS = [")[0]  # the functions, not the check that needs the data
    exec(source, namespace)
    return namespace


def test_each_reward_function_on_hand_made_completions(task):
    completions = [
        "<reasoning>a 1 b 2</reasoning><answer>2</answer>",  # right, in the format
        " <reasoning>x</reasoning>\n<answer>3</answer> ",  # wrong by one, in the format (spaces allowed)
        "<reasoning>x</reasoning><answer>2</answer> and more",  # right, text after the answer
        "<answer>2</answer>",  # right, no reasoning
        "<reasoning></reasoning><answer>20</answer>",  # empty reasoning; 20 is 10x 2
        "no tags at all: 2",
    ]
    answers = ["2", "2", "2", "2", "2", "2"]
    prompts = ["p"] * len(completions)
    functions = [task[n] for n in ("format_exact", "format_partial", "answer_exact", "number_close", "not_empty")]
    rewards = {f.__name__: f(prompts, completions, answer=answers) for f in functions}
    assert rewards["format_exact"] == [1, 1, 0, 0, 0, 0]
    assert rewards["format_partial"] == [1, 1, 0.8, 0, 0.2, 0]  # the parts in order; the fifth: nothing after
    assert task["format_partial"](
        ["p"] * 2, ["</answer><answer></reasoning><reasoning>", "<reasoning>x"], answer=["2"] * 2
    ) == [0, 0.2]
    assert rewards["not_empty"] == [0] * 6
    assert task["not_empty"](["p"] * 2, ["", " \n"]) == [-1, -1]  # an end token first
    assert rewards["answer_exact"] == [2, 0, 2, 2, 0, 0]
    assert rewards["number_close"] == [0.5, 0, 0.5, 0.5, 0, 0]  # 3 is 50% off 2
    assert task["number_close"](["p"], ["<answer>101</answer>"], answer=["100"]) == [0.5]  # within 10%
    assert task["number_close"](["p"], ["<answer>1,000 apples</answer>"], answer=["1000"]) == [0.5]


def test_group_normalised_advantage_and_kl_as_worked_by_hand():
    from tunix.rl import algo_core, common

    # Two groups of 4 answers: rewards 1 0 0 1 (mean 0.5, sample std sqrt(1/3)) and 2 2 2 2 (all alike: no signal).
    advantages = algo_core.compute_advantages(np.array([1.0, 0, 0, 1, 2, 2, 2, 2]), num_generations=4)
    by_hand = 0.5 / math.sqrt(1 / 3)
    assert np.allclose(advantages, [by_hand, -by_hand, -by_hand, by_hand, 0, 0, 0, 0], atol=1e-5)
    # The KL term the notebook asks for (low_var_kl, the GRPO paper's): r - log r - 1, r = p_ref / p.
    logp, ref = np.log([[0.5, 0.2]]), np.log([[0.25, 0.2]])
    kl = np.asarray(common.compute_kl_divergence(logp, ref, "low_var_kl"))
    assert np.allclose(kl, [[0.5 - math.log(0.5) - 1, 0.0]], atol=1e-6)


def test_the_loss_comes_from_the_completion_tokens_only():
    """Tunix's GRPO loss on a tiny Gemma 3 equals the loss worked from the completion tokens' log-probabilities
    alone (a plain forward pass): the prompt's tokens carry none, and neither do padded completion tokens."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from tunix.models.gemma3 import model as gemma3
    from tunix.rl import algo_core
    from tunix.rl.grpo import grpo_learner

    config = gemma3.ModelConfig(**TINY, sliding_window_size=64, param_dtype=jnp.float32)
    model = gemma3.Gemma3(config, rngs=nnx.Rngs(params=0))
    prompt = jnp.array([[0, 5, 9, 17, 4], [1, 7, 7, 30, 4]])  # the first left-padded (pad 0)
    completion = jnp.array([[11, 12, 2, 0], [21, 22, 23, 24]])  # eos 2 then padding; a full one
    mask = completion != 0
    advantages = jnp.array([1.5, -0.5])
    ref = jnp.full(completion.shape, -5.0)
    tokens = jnp.concatenate([prompt, completion], axis=1)
    valid = tokens != 0
    positions = jnp.maximum(jnp.cumsum(valid, axis=1) - 1, 0)
    attention = valid[:, None, :] & jnp.tril(jnp.ones((9, 9), bool))[None]
    logits, _ = model(tokens, positions, None, attention)
    logps = jax.nn.log_softmax(logits[:, 4:-1], axis=-1)  # the logits that predict each completion token
    own = jnp.take_along_axis(logps, completion[..., None], axis=-1)[..., 0]
    diff = ref - own
    per_token = -advantages[:, None] + 0.04 * (jnp.exp(diff) - diff - 1)  # ratio 1 at the first iteration
    by_hand = float(jnp.mean(jnp.sum(per_token * mask, 1) / jnp.sum(mask, 1)))
    example = grpo_learner.TrainExample(
        prompt_ids=prompt,
        prompt_mask=prompt != 0,
        completion_ids=completion,
        completion_mask=mask,
        advantages=advantages,
        ref_per_token_logps=ref,
        old_per_token_logps=None,
    )
    algo = grpo_learner.GRPOConfig(num_generations=2, beta=0.04, epsilon=0.2, kl_loss_mode="low_var_kl")
    algo.temperature = 1.0
    loss, _ = algo_core.grpo_loss_fn(model, example, algo, pad_id=0, eos_id=2)
    assert abs(float(loss) - by_hand) < 1e-5 * max(1.0, abs(by_hand)), (float(loss), by_hand)


# ---- bad inputs stop before anything loads ----


def test_a_missing_column_is_named_with_the_parameter(tmp_path):
    (tmp_path / "q.csv").write_text("question,solution\nhow many,2\n")
    with pytest.raises(
        DataError, match=r"line 2: no column 'answer' \(ANSWER_COLUMN\); it has question, solution. Set ANSWER_COLUMN"
    ):
        data.load_pairs(str(tmp_path / "q.csv"), "question", "answer", names=("QUESTION_COLUMN", "ANSWER_COLUMN"))


def test_prompts_longer_than_max_prompt_length_are_counted():
    with pytest.raises(
        DataError,
        match=r"2 of 3 prompts are longer than MAX_PROMPT_LENGTH=10 tokens \(the longest: 30 tokens, b.csv, line 3\)",
    ):
        rl.check_prompt_lengths([12, 5, 30], 10, ["a.csv, line 2", "a.csv, line 3", "b.csv, line 3"])
    rl.check_prompt_lengths([10, 5], 10, ["x", "y"])
    # Sweep 6, poor: the smoke profile's cap said "raise MAX_PROMPT_LENGTH", which the cap undoes.
    with pytest.raises(DataError, match=r"the smoke profile .* caps MAX_PROMPT_LENGTH at 48: run with PROFILE='full'"):
        rl.check_prompt_lengths([60], 48, ["q.csv, line 2"], smoke_cap=48)
    with pytest.raises(DataError, match=r"longest: 45 tokens, q.csv, line 2\): raise MAX_PROMPT_LENGTH"):
        rl.check_prompt_lengths([45], 40, ["q.csv, line 2"], smoke_cap=48)  # within the cap: raising it helps


def test_a_tokenizer_other_than_the_models_vocabulary_is_refused():
    import io

    import sentencepiece

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["how many words: apple river stone"] * 20),
        model_writer=proto,
        model_type="BPE",
        vocab_size=24,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue())
    with pytest.raises(
        DataError, match=rf"the tokenizer has {tokenizer.get_piece_size()} pieces, the model a vocabulary of 256"
    ):
        rl.check_tokenizer(tokenizer, 256, ["apple"], [])
    with pytest.raises(DataError, match=r"no piece for 'Z' in 'apple Z' \(q.csv, line 2\)"):
        rl.check_tokenizer(tokenizer, tokenizer.get_piece_size(), ["apple Z"], ["q.csv, line 2"])


def test_a_reward_function_that_fails_is_named_with_its_prompt():
    def broken(prompts, completions, **columns):
        return [1.0 / len(c) for c in completions]  # an empty completion divides by zero

    def short(prompts, completions, **columns):
        return [1.0]

    with pytest.raises(RunError, match=r"reward function broken failed \(ZeroDivisionError: .*\) on the prompt 'p1'"):
        rl.check_rewards([broken], ["p1", "p2"], ["", "x"])
    wrapped = rl.named_rewards([short])[0]
    assert wrapped.__name__ == "short"  # Tunix logs each reward under its function's name
    with pytest.raises(RunError, match=r"reward function short returned 1 rewards for 2 completions"):
        wrapped(["p1", "p2"], ["a", "b"])


def test_a_checkpoint_of_other_settings_is_refused(tmp_path):
    folder = tmp_path / "checkpoints"
    assert rl.checkpoint_run(folder, {"data": "a.csv", "beta": 0.04}, restart=False) == (0, [])
    (folder / "actor" / "20").mkdir(parents=True)
    assert rl.checkpoint_run(folder, {"data": "a.csv", "beta": 0.04}, restart=False)[0] == 20
    with pytest.raises(ParameterError, match=r"\(step 20\) was trained with other settings: data 'a.csv' -> 'b.csv'"):
        rl.checkpoint_run(folder, {"data": "b.csv", "beta": 0.04}, restart=False)
    assert rl.checkpoint_run(folder, {"data": "b.csv", "beta": 0.04}, restart=True) == (0, [])
    # A warm start's checkpoint (sft/) is a run's too: other settings against it are refused as well.
    (folder / "sft" / "60").mkdir(parents=True)
    with pytest.raises(ParameterError, match=r"other settings: data 'b.csv' -> 'c.csv'"):
        rl.checkpoint_run(folder, {"data": "c.csv", "beta": 0.04}, restart=False)


def test_restart_deletes_only_the_runs_own_checkpoint_files(tmp_path):
    # Sweep 6, item 1: on 191e8da RESUME="restart" deleted the whole checkpoints folder, the user's files with it.
    folder = tmp_path / "checkpoints"
    rl.checkpoint_run(folder, {"seed": 1}, restart=False)
    (folder / "actor" / "50").mkdir(parents=True)
    (folder / "sft" / "60").mkdir(parents=True)
    (folder / "history.json").write_text("[]")
    (folder / "my_notes.txt").write_text("mine")
    (folder / "mine").mkdir()
    assert rl.checkpoint_run(folder, {"seed": 2}, restart=True) == (0, [])
    assert sorted(p.name for p in folder.iterdir()) == ["mine", "my_notes.txt", "settings.json"]
    assert (folder / "my_notes.txt").read_text() == "mine"


def test_checkpoints_without_their_settings_are_refused_and_the_history_is_kept_to_the_step(tmp_path):
    folder = tmp_path / "checkpoints"
    (folder / "actor" / "4").mkdir(parents=True)
    with pytest.raises(ParameterError, match=r"have no settings.json: nothing says what trained them"):
        rl.checkpoint_run(folder, {"seed": 1}, restart=False)
    (folder / "settings.json").write_text(json.dumps({"seed": 1}))
    steps = [{"step": n, "rewards/a": n / 10} for n in range(1, 7)]  # steps 5 and 6 ran after the last checkpoint
    (folder / "history.json").write_text(json.dumps(steps))
    assert rl.checkpoint_run(folder, {"seed": 1}, restart=False) == (4, steps[:4])


def test_references_are_gsm8k_numbers_and_an_empty_one_is_refused():
    # Sweep 6, items 5 and 6: "#### $4,000" kept its "$" (number_close then paid 0 to right answers), and an empty
    # reference made answer_exact pay 2.0 for an empty answer.
    responses = ["She pays 4 x 1000.\n#### $4,000", "#### 12", "3 + 4 = 7 #### 7.5%", "Paris", "a #### b #### -1,250"]
    worked, answers = data.references(responses, [f"q.csv, line {i}" for i in range(2, 7)])
    assert answers == ["4000", "12", "7.5", "Paris", "-1250"]
    assert worked == ["She pays 4 x 1000.", "", "3 + 4 = 7", "", "a #### b"]
    with pytest.raises(DataError, match=r"q.csv, line 3: the answer 'so it is ####  ' has nothing after '####'"):
        data.references(["x #### 2", "so it is ####  "], ["q.csv, line 2", "q.csv, line 3"])


def test_worked_solutions_in_a_column_of_their_own_feed_the_warm_start(tmp_path):
    # The old sample's form (question, answer, reasoning): REASONING_COLUMN names the worked solutions.
    rows = [{"q": f"question {i}", "a": str(i % 3 + 2), "why": "a 1 a 2"} for i in range(30)]
    (tmp_path / "own.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    parameters, _, data_cell = cells_until("## Model, mesh")

    found = {}
    namespace = {"__annotations__": {}}
    exec(parameters, namespace)
    namespace.update(rl=rl, data=data, ParameterError=ParameterError, DATA_ROOT=str(tmp_path / "own.jsonl"))
    namespace.update(QUESTION_COLUMN="q", ANSWER_COLUMN="a", HELD_OUT=3)
    exec(data_cell, namespace)
    found["without"] = namespace["worked"][:2]
    namespace["REASONING_COLUMN"] = "why"
    exec(data_cell, namespace)
    assert found["without"] == ["", ""] and namespace["worked"] == ["a 1 a 2"] * 30
    assert namespace["answers"][:3] == ["2", "3", "4"]
    namespace["REASONING_COLUMN"] = "because"
    with pytest.raises(DataError, match=r"no column 'because' \(REASONING_COLUMN\); it has q, a, why"):
        exec(data_cell, namespace)


def test_csv_headers_naming_a_column_twice_or_another_separator_are_refused(tmp_path):
    # Sweep 6, item 7 and a poor one: a repeated column took the last one silently; ";" got "Did you mean ...".
    (tmp_path / "twice.csv").write_text("question,answer,answer\nhow many,2,3\n")
    with pytest.raises(DataError, match=r"twice.csv: the header names the column 'answer' more than once"):
        data.load_pairs(str(tmp_path / "twice.csv"), "question", "answer")
    (tmp_path / "semi.csv").write_text("question;answer\nhow many;2\n")
    with pytest.raises(DataError, match=r"semi.csv looks separated by ';', not by commas"):
        data.load_pairs(str(tmp_path / "semi.csv"), "question", "answer")
    # A record over several lines (GSM8K's answers) is named by its first line.
    (tmp_path / "multi.csv").write_text('question,answer\n"q1","a\nb\n#### 1"\n"q2",""\n')
    with pytest.raises(DataError, match=r"multi.csv, line 5: column 'answer' is empty"):
        data.load_pairs(str(tmp_path / "multi.csv"), "question", "answer")


def test_the_held_out_questions_are_distinct_and_never_trained_on(tmp_path):
    # Sweep 6, item 2: on 191e8da 4 of the 16 held-out questions of the sample were training rows (all 16 when every
    # question repeats). The split is notebook 10's, on distinct questions, with a count.
    rows = [{"question": f"q{i % 40}", "answer": f"#### {i % 40}"} for i in range(200)]  # each question 5 times
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = data.load_pairs(str(tmp_path / "q.jsonl"), "question", "answer")
    train, held_out, line = data.split(pairs, 16, 42)
    held = {pairs.prompts[i] for i in held_out}
    assert len(held) == len(held_out) == 16 and not held & {pairs.prompts[i] for i in train}
    assert len(train) == 200 - 16 * 5 and "16 of the 40 distinct prompts held out" in line
    with pytest.raises(ParameterError, match=r"40 prompts to hold out, but the data has 40 distinct prompts"):
        data.split(pairs, 40, 42)
    source = NOTEBOOK.read_text()
    assert "data.split(pairs, HELD_OUT, SEED)" in source


def test_rewards_are_checked_as_tunix_calls_them_and_one_that_cannot_pay_the_right_answer_is_named(capsys):
    # Late in sweep 6: a reward failing only under Tunix's real keyword arguments (mode, trajectory_ids) or returning
    # NaN was found at training step 1; the check called each with answer= only.
    def strict(prompts, completions, answer):  # no **kwargs: Tunix's mode= breaks it
        return [1.0] * len(completions)

    def nan(prompts, completions, **columns):
        return [float("nan")] * len(completions)

    def exact_text(prompts, completions, answer, **columns):  # compares with a reference it cannot read
        return [1.0 if c == f"<answer>{a}</answer>" else 0.0 for c, a in zip(completions, answer)]

    with pytest.raises(RunError, match=r"reward function strict failed \(TypeError: .*'mode'"):
        rl.check_rewards([strict], ["p"], ["<answer>4</answer>"], answer=["4"])
    with pytest.raises(RunError, match=r"reward function nan returned nan for the completion '<answer>4</answer>'"):
        rl.check_rewards([nan], ["p"], ["<answer>4</answer>"], answer=["4"])
    assert rl.check_rewards([exact_text], ["p"], ["<answer>4</answer>"], answer=["4"]) == {"exact_text": [1.0]}
    assert "WARNING" not in capsys.readouterr().out
    rl.check_rewards([exact_text], ["p"], ["<answer>4000</answer>"], answer=["$4,000"])
    assert "WARNING: exact_text pays the ideal completion '<answer>4000</answer>' 0.0 and an empty one 0.0" in (
        capsys.readouterr().out
    )


def test_a_damaged_or_mismatched_model_folder_is_named_before_the_build(tmp_path):
    # Sweep 6, late and poor: sizes that disagree with the weights failed in Tunix's build (AssertionError: Shape
    # mismatch); a cut config.json, one without head_dim, a cut safetensors: raw JSONDecodeError, KeyError,
    # SafetensorError, no file named.
    write_gemma2(tmp_path / "g2", 64, tiny_tokenizer())
    config = json.loads((tmp_path / "g2" / "config.json").read_text())
    (tmp_path / "g2" / "config.json").write_text(json.dumps({**config, "intermediate_size": 256}))
    with pytest.raises(ParameterError, match=r"do not match config.json: layers.0.mlp.gate_proj.weight \(128, 64\)"):
        gemma.gemma_config(tmp_path / "g2")
    (tmp_path / "g2" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(ParameterError, match=r"do not match config.json: 2 layers \(config.json: 3\)"):
        gemma.gemma_config(tmp_path / "g2")
    (tmp_path / "g2" / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "head_dim"}))
    with pytest.raises(ParameterError, match=r"config.json has no whole number for head_dim"):
        gemma.gemma_config(tmp_path / "g2")
    (tmp_path / "g2" / "config.json").write_text(json.dumps(config)[:40])
    with pytest.raises(ParameterError, match=r"g2/config.json is not JSON .* damaged or cut short"):
        gemma.gemma_config(tmp_path / "g2")
    (tmp_path / "g2" / "config.json").write_text(json.dumps(config))
    weights = tmp_path / "g2" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ParameterError, match=r"model.safetensors cannot be read as safetensors"):
        gemma.gemma_config(tmp_path / "g2")
    # The sweep of issue 59: a damaged tokenizer.model (a raw RuntimeError after the plan), a KerasHub preset and a
    # KerasHub preset's name (said to be no folder nor handle, and no more).
    write_gemma2(tmp_path / "g2", 64, b"damaged")
    with pytest.raises(ParameterError, match=r"g2/tokenizer.model is not a SentencePiece model .* damaged or another"):
        gemma.gemma_config(tmp_path / "g2")
    (tmp_path / "g2" / "config.json").write_text(json.dumps({"class_name": "Gemma4Backbone", "config": {}}))
    with pytest.raises(ParameterError, match=r"is a KerasHub preset \(notebook 10's merged-preset/ is one\)"):
        gemma.gemma_config(tmp_path / "g2")
    with pytest.raises(ParameterError, match=r"a KerasHub preset's name is notebook 10's: Tunix reads Hugging Face"):
        gemma.find_model("gemma4_instruct_2b")


# ---- the notebook's own cells on 8 simulated devices, in one fresh process ----

SCRIPT = r"""
import json, sys, jupytext, numpy as np
from nbkit.llm import rl
cells = jupytext.read("notebooks/11_grpo_reasoning.py").cells
code = [c.source.replace("plt.show()", "") for c in cells if c.cell_type == "code"]
out, found = sys.argv[1], {}
given = []  # (run, batch index, prompts) of every batch the learner took


class Recorded(rl.time_budget):
    def __next__(self):
        batch = super().__next__()
        given.append((RUN, self.given, [str(p) for p in batch["prompts"]]))
        return batch


rl.time_budget = Recorded


def run(upto=None, **overrides):
    ns = {"__annotations__": {}}
    exec(code[0], ns)
    ns.update(SIMULATE_DEVICES=8, **overrides)
    for source in code[1:upto]:
        exec(source, ns)
    return ns


# The same first GRPO loss on two meshes: the tiny model, a batch of hand-made completions.
import jax, jax.numpy as jnp
from tunix.rl import algo_core
from tunix.rl.grpo import grpo_learner
losses = {}
for mesh in ("data", "2x4"):
    ns = run(upto=7, MESH=mesh, OUTPUT_DIR=f"{out}/mesh-{mesh}")  # through "Model and LoRA"
    tok = ns["tokenizer"]
    asked = [ns["chat_prompt"](ns["pairs"].prompts[i]) for i in ns["train_rows"][:8]]
    prompts = [[tok.bos_id()] + tok.encode(text)[-15:] for text in asked]
    completions = [tok.encode(f"<reasoning>x</reasoning><answer>{a}</answer>")[:8] for a in "23432342"]
    pad = lambda rows, left: jnp.array([[0] * (16 - len(r)) + r if left else r + [0] * (8 - len(r)) for r in rows])
    p, c = pad(prompts, True), pad(completions, False)
    example = grpo_learner.TrainExample(prompt_ids=p, prompt_mask=p != 0, completion_ids=c, completion_mask=c != 0,
        advantages=jnp.linspace(-1, 1, 8), ref_per_token_logps=jnp.full(c.shape, -4.0), old_per_token_logps=None)
    algo = grpo_learner.GRPOConfig(num_generations=4, beta=0.04, epsilon=0.2, kl_loss_mode="low_var_kl")
    algo.temperature = 1.0
    with jax.set_mesh(ns["mesh"]):
        losses[mesh] = float(algo_core.grpo_loss_fn(ns["actor"], example, algo, pad_id=0, eos_id=tok.eos_id())[0])
    found["mesh " + mesh] = [ns["FSDP"], ns["TP"]]
found["losses"] = losses

# A run stopped by TIME_BUDGET (a last checkpoint), then resumed to 4 steps, then run again once finished; the saved
# model loaded back. A short warm start: the second run restores it from its checkpoint.
RUN = 1
first = run(MAX_STEPS=50, SFT_STEPS=4, TIME_BUDGET=1e-3, OUTPUT_DIR=f"{out}/resume")
RUN = 2
second = run(MAX_STEPS=4, SFT_STEPS=4, OUTPUT_DIR=f"{out}/resume")
found["first"] = {"steps": first["steps"], "stopped": first["batches"].stopped, "sft": len(first["sft_losses"])}
found["second"] = {"steps": second["steps"], "resumed_at": second["resumed_at"], "sft": len(second["sft_losses"])}
found["given"] = given
found["dataset"] = [[str(p) for p in second["dataset"][i]["prompts"]] for i in range(4)]
found["history"] = [h["step"] for h in second["history"]]
found["chosen"] = second["chosen"]
found["parameters"] = [second["parameters"], second["trained"]]
from safetensors.numpy import load_file
found["zero"] = sorted(k for k, v in load_file(f"{out}/resume/model/model.safetensors").items() if not v.any())
RUN = 4
third = run(MAX_STEPS=4, SFT_STEPS=4, OUTPUT_DIR=f"{out}/resume")  # finished: nothing more to train
found["third"] = {"steps": third["steps"], "history": [h["step"] for h in third["history"]],
    "same": third["after"]["completions"] == second["after"]["completions"]}
found["refused"] = {}
for name, overrides in {"model inside": dict(MODEL=f"{out}/resume/model", OUTPUT_DIR=f"{out}/resume"),
                        "held out": dict(MAX_STEPS=4, SFT_STEPS=4, HELD_OUT=8, OUTPUT_DIR=f"{out}/resume"),
                        "temperature": dict(TEMPERATURE=0.0), "tokens": dict(MAX_NEW_TOKENS=1)}.items():
    try:
        found["refused"][name] = ", ".join(run(upto=5, **{"OUTPUT_DIR": f"{out}/{name}", **overrides})["chosen"])
    except Exception as error:
        found["refused"][name] = f"{type(error).__name__}: {error}"
from tunix.models.gemma3 import params_safetensors
loaded = params_safetensors.create_model_from_safe_tensors(
    f"{out}/resume/model", third["config"], third["mesh"], dtype=third["DTYPE"]
)
reloaded = second["evaluate"](loaded, second["held_out_rows"])["completions"]
found["completions"] = [second["after"]["completions"], reloaded]
found["metrics"] = json.loads(open(f"{out}/resume/metrics.json").read())
found["completions"].append(third["evaluate"](loaded, third["held_out_rows"])["completions"])

# Gemma 2 (Tunix's tunix.models.gemma) from a folder of Hugging Face safetensors: random weights with the tiny path's
# tokenizer, LoRA on 2x4, 2 steps; the merged save loaded back by Tunix's Gemma 2 loader.
from pathlib import Path
from safetensors.numpy import load_file
from tunix.models.gemma import params_safetensors as gemma2_safetensors
sys.path.insert(0, "tests")
from test_rl import write_gemma2
write_gemma2(Path(out) / "gemma2", second["sizes"]["num_embed"], second["tokenizer"].serialized_model_proto())
RUN = 3
g2 = run(
    MODEL=f"{out}/gemma2", MESH="2x4", LORA_RANK=8, MAX_STEPS=2, LEARNING_RATE=1e-2, OUTPUT_DIR=f"{out}/gemma2-grpo"
)
saved = Path(out) / "gemma2-grpo" / "model"
loaded = gemma2_safetensors.create_model_from_safe_tensors(str(saved), g2["config"], g2["mesh"], dtype=g2["DTYPE"])
base, merged = load_file(f"{out}/gemma2/model.safetensors"), load_file(str(saved / "model.safetensors"))
found["gemma2"] = {"family": g2["FAMILY"], "steps": g2["steps"], "config": type(g2["config"]).__module__,
    "completions": [g2["after"]["completions"], g2["evaluate"](loaded, g2["held_out_rows"])["completions"]],
    "changed": sorted(k.split(".", 3)[-1] for k in base if not np.array_equal(base[k], merged[k])),
    "keys": sorted(base) == sorted(merged),
    "saved_config": json.loads((saved / "config.json").read_text()),
    "files": sorted(p.name for p in (Path(out) / "gemma2-grpo").iterdir())}

# Gemma 4 (tunix.models.gemma4): the tiny one built from scratch (its training, LoRA beside Gemma 4's kernels, the save
# read back by Tunix's Gemma 4 loader: the chain below, from notebook 10's export).
import time
from tunix.models.gemma4 import params_safetensors as gemma4_safetensors
started = time.perf_counter()
RUN = 5
g4 = run(upto=7, MODEL="tiny-gemma4", MESH="2x4", HELD_OUT=8, OUTPUT_DIR=f"{out}/gemma4")  # through "Model and LoRA"
mlp = [layer.mlp.gate_proj.kernel[...] for layer in g4["reference"].layers]
found["gemma4"] = {"family": g4["FAMILY"], "config": type(g4["config"]).__module__,
    "parameters": [g4["parameters"], g4["trained"]], "mlp_drawn": all(bool(abs(k).sum() > 0) for k in mlp),
    "prompt": g4["chat_prompt"]("Q"), "end": g4["END_OF_TURN_PIECE"], "model": g4["settings"]["model"],
    "layers": len(g4["reference"].layers), "shared": g4["config"].frac_shared_layers}
found["gemma4"]["seconds"] = time.perf_counter() - started
print("RESULT " + json.dumps(found))
"""


def run_fresh(script: str, out) -> dict:
    """`script` run in a fresh Python with `out` as its argument: the JSON it printed after "RESULT "."""
    run = subprocess.run(
        [sys.executable, "-c", script, str(out)],
        cwd=REPO,
        env=clean_env(NBKIT_WORKING_DIR=str(out / "work"), MPLBACKEND="Agg"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(run.stdout.split("RESULT ", 1)[1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return run_fresh(SCRIPT, tmp_path_factory.mktemp("rl"))


def test_the_same_batch_gives_the_same_first_loss_on_every_mesh(runs):
    assert runs["mesh data"] == [8, 1] and runs["mesh 2x4"] == [2, 4]
    losses = list(runs["losses"].values())
    assert losses[0] != 0 and np.allclose(losses, losses[0], rtol=1e-5), losses


def test_time_budget_stops_with_a_checkpoint_and_a_resumed_run_continues_with_the_same_batches(runs):
    assert runs["first"]["steps"] == 2 and "after 2 steps" in runs["first"]["stopped"]
    assert runs["second"] == {"steps": 4, "resumed_at": 2, "sft": 0} and runs["metrics"]["steps"] == 4
    first = [prompts for run, _, prompts in runs["given"] if run == 1][:2]
    second = [prompts for run, _, prompts in runs["given"] if run == 2]
    assert second[:2] == first == runs["dataset"][:2]  # the learner skips the batches trained on
    assert second[2:4] == runs["dataset"][2:4]  # and goes on in the same order
    assert runs["history"] == [1, 2, 3, 4]  # the whole run's steps, the first run's kept with its checkpoint
    assert runs["first"]["sft"] == 4  # the second run restored the warm start, not repeated (its "sft": 0 above)


def test_a_finished_run_trains_no_more_and_its_outputs_are_the_same_model(runs):
    # Sweep 6, item 3: on 191e8da a rerun of a finished OUTPUT_DIR trained "120 -> 121" and replaced the outputs.
    assert runs["third"] == {"steps": 4, "history": [1, 2, 3, 4], "same": True}
    assert not [batch for batch in runs["given"] if batch[0] == 4]  # the learner was given no batch


def test_the_tiny_models_every_weight_trains(runs):
    # Sweep 6, item 10: Tunix starts the MLP kernels at zero, and on 191e8da 49,152 of the "78,464 trained"
    # parameters never moved. Every weight saved is nonzero, and what GRPO moved is what was counted as trained.
    parameters, trained = runs["parameters"]
    assert parameters == trained and runs["metrics"]["trained_parameters_moved"] == trained
    assert runs["zero"] == []


def test_the_first_cells_refuse_a_model_in_the_output_folder_and_say_what_smoke_chose(runs):
    refused = runs["refused"]
    assert (
        refused["model inside"].startswith("ParameterError: MODEL=")
        and "is inside OUTPUT_DIR" in refused["model inside"]
    )
    assert (
        refused["temperature"]
        == "ParameterError: TEMPERATURE=0.0: give a number above 0 and below 10 (see its comment)."
    )
    # Sweep 6, item 4 and a late one: HELD_OUT changed on resume went on silently, and another setting was refused
    # only after the model's build and the "before" evaluation. Now in the first cells (upto=5: before the tokenizer).
    assert refused["held out"].startswith("ParameterError: the checkpoint in ")
    assert "(step 4) was trained with other settings: held_out 16 -> 8" in refused["held out"]
    # Sweep 6, item 8: MAX_NEW_TOKENS 1 was said to become 20.
    assert "MAX_PROMPT_LENGTH, MAX_NEW_TOKENS 256, 1 -> 48, 1 (smoke)" in refused["tokens"]
    assert "MAX_PROMPT_LENGTH, MAX_NEW_TOKENS 256, 256 -> 48, 20 (smoke)" in runs["chosen"]


def test_the_saved_model_loads_with_tunix_and_gives_the_same_greedy_completions(runs):
    trained, loaded, again = runs["completions"]
    assert trained == loaded == again and len(trained) == 16
    assert runs["metrics"]["model"] == "tiny" and runs["metrics"]["mesh"] == [2, 4]


CHAIN = r"""
import csv, json, subprocess, sys, jupytext, numpy as np
from nbkit.llm import data
out = sys.argv[1]
cells = jupytext.read("notebooks/11_grpo_reasoning.py").cells
code = [c.source.replace("plt.show()", "") for c in cells if c.cell_type == "code"]
ns = {"__annotations__": {}}
exec(code[0], ns)
exec(code[4].split("TURNS = {")[0], ns)  # the task cell's SYSTEM_PROMPT
# Notebook 10 learns the answer format by SFT from the sample's reasoning, a few epochs (it answers some right).
folder = data_folder = data._make_sample(f"{out}/data", "questions")
with open(folder / "questions.csv") as f, open(folder / "sft.csv", "w", newline="") as g:
    writer = csv.writer(g)
    writer.writerow(["prompt", "response"])
    for row in csv.DictReader(f):
        worked, answer = row["answer"].split("\n#### ")
        response = f"<reasoning>{worked}</reasoning><answer>{answer}</answer>"
        writer.writerow([f"{ns['SYSTEM_PROMPT']}\n\n{row['question']}", response])
ten = {"PRESET": "tiny", "PROFILE": "full", "SEQUENCE_LENGTH": 64, "EPOCHS": 8, "EXPORT_TRANSFORMERS": True,
       "SIMULATE_DEVICES": 8, "DATA_ROOT": str(folder / "sft.csv"), "OUTPUT_DIR": f"{out}/sft"}
given = [a for k, v in ten.items() for a in ("-p", k, str(v))]
engine = [sys.executable, "-m", "nbkit.publish.engine", "notebooks/10_llm_finetune.ipynb", f"{out}/10.ipynb"]
subprocess.run([*engine, "--cwd", out, "--no-progress-bar", *given], check=True, capture_output=True)
# Notebook 11 starts from 10's export and improves the answer reward by GRPO (LoRA beside the SFT weights).
ns.update(MODEL=f"{out}/sft/transformers", DATA_ROOT=str(folder / "questions.csv"), LORA_RANK=8, LEARNING_RATE=1e-3,
          TEMPERATURE=0.4, MAX_STEPS=40, SIMULATE_DEVICES=8, OUTPUT_DIR=f"{out}/grpo")
for source in code[1:]:
    exec(source, ns)
# The LoRA-merged save loaded by Tunix's Gemma code: the trained model's greedy completions; lora.safetensors: the
# trained LoRA weights alone.
from safetensors.numpy import load_file
from tunix.models.gemma3 import params_safetensors
folder = ns["outputs"].folder
merged = params_safetensors.create_model_from_safe_tensors(
    str(folder / "model"), ns["config"], ns["mesh"], dtype=ns["DTYPE"]
)
lora, trained = load_file(str(folder / "lora.safetensors")), ns["weights"](ns["actor"], ns["nnx"].LoRAParam)
reloaded = ns["evaluate"](merged, ns["held_out_rows"])["completions"]
same_lora = sorted(lora) == sorted(trained) and all(np.array_equal(lora[k], v) for k, v in trained.items())
result = {
    "rewards": ns["reward_change"], "before": ns["before"]["accuracy"],
    "files": sorted(p.name for p in folder.iterdir()),
    "completions": [ns["before"]["completions"], ns["after"]["completions"], reloaded],
    "lora": [len(trained), same_lora],
}
# Gemma 4 the same way, in short: 10's tiny Gemma 4 (2 epochs) exported, 11 from that export with LoRA beside Gemma
# 4's kernels (2 GRPO steps), its merged save loaded back by Tunix's Gemma 4 loader.
from tunix.models.gemma4 import params_safetensors as gemma4_safetensors
ten.update(PRESET="tiny-gemma4", EPOCHS=2, OUTPUT_DIR=f"{out}/sft-gemma4")
given = [a for k, v in ten.items() for a in ("-p", k, str(v))]
engine[-1] = f"{out}/10-gemma4.ipynb"
subprocess.run([*engine, "--cwd", out, "--no-progress-bar", *given], check=True, capture_output=True)
g4 = {"__annotations__": {}}
exec(code[0], g4)
g4.update(MODEL=f"{out}/sft-gemma4/transformers", DATA_ROOT=str(data_folder / "questions.csv"), LORA_RANK=8,
          LEARNING_RATE=1e-2, SFT_STEPS=2, MAX_STEPS=2, HELD_OUT=8, SIMULATE_DEVICES=8, OUTPUT_DIR=f"{out}/grpo-gemma4")
for source in code[1:]:
    exec(source, g4)
saved = g4["outputs"].folder / "model"
merged = gemma4_safetensors.create_model_from_safe_tensors(str(saved), g4["config"], g4["mesh"], dtype=g4["DTYPE"])
base = load_file(f"{out}/sft-gemma4/transformers/model.safetensors")
now = load_file(str(saved / "model.safetensors"))
result["gemma4"] = {"family": g4["FAMILY"], "steps": g4["steps"], "trained": g4["trained"],
    "completions": [g4["after"]["completions"], g4["evaluate"](merged, g4["held_out_rows"])["completions"]],
    "changed": sorted(k for k in base if not np.array_equal(base[k], now[k])), "keys": sorted(base) == sorted(now),
    "sft": len(g4["sft_losses"]), "saved_config": json.loads((saved / "config.json").read_text())}
print("RESULT " + json.dumps(result))
"""


def test_sft_by_notebook_10_then_grpo_by_notebook_11_raises_the_answer_reward_gemma_3_and_4(tmp_path):
    found = run_fresh(CHAIN, tmp_path)
    assert found["before"] > 0.2  # 10's SFT reached 11 through the export: it answers in the format, some right
    first, last = found["rewards"]["answer_exact"]
    assert last > first, found["rewards"]
    assert {"model", "lora.safetensors", "metrics.json", "training.png", "checkpoints"} <= set(found["files"])
    before, after, merged = found["completions"]
    assert after != before and merged == after  # the LoRA was merged into the saved weights
    assert found["lora"][0] > 0 and found["lora"][1], found["lora"]  # the same names and values as trained
    # Gemma 4: 11 read 10's export as a Gemma 4, trained LoRA beside its attention and MLP kernels and merged it into
    # the saved weights, which Tunix's Gemma 4 loader reads back to the same greedy completions.
    lora = found["gemma4"]
    assert lora["family"] == "gemma4" and lora["steps"] == 2 and lora["trained"] > 0 and lora["keys"]
    trained, loaded = lora["completions"]
    assert trained == loaded and len(trained) == 8
    kernels = {"self_attn.q_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}
    changed = {(int(k.split(".")[1]), k.split(".", 2)[2].removesuffix(".weight")) for k in lora["changed"]}
    own_kv = {(i, f"self_attn.{n}_proj") for i in (0, 1) for n in "kv"}  # the shared layers' are never used
    assert changed == {(i, k) for i in range(4) for k in kernels} | own_kv, sorted(changed)
    assert lora["sft"] == 2  # the warm start ran in Gemma 4's turns too
    config = lora["saved_config"]  # the save as Gemma4ForCausalLM: what transformers and Tunix read
    assert config["model_type"] == "gemma4_text" and config["num_kv_shared_layers"] == 2
    assert config["use_double_wide_mlp"] and config["global_head_dim"] == 128 and config["hidden_size_per_layer_input"]
    assert config["rope_parameters"]["full_attention"] == {
        "rope_type": "proportional",
        "rope_theta": 1000000,
        "partial_rotary_factor": 0.25,
    }


# ---- Gemma 2 (Tunix's tunix.models.gemma) from a folder of Hugging Face safetensors ----

GEMMA2 = dict(num_layers=2, embed_dim=64, hidden_dim=128, num_heads=8, head_dim=8, num_kv_heads=4)


def write_gemma2(folder, vocab: int, tokenizer_proto: bytes, seed: int = 0, **config) -> None:
    """A tiny Gemma 2 as Hugging Face writes one (Gemma2ForCausalLM's key names, those Tunix's gemma
    params_safetensors maps), random weights."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    L, D, F, N, K, H = (
        GEMMA2[k] for k in ("num_layers", "embed_dim", "hidden_dim", "num_heads", "num_kv_heads", "head_dim")
    )

    def r(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    weights = {"model.embed_tokens.weight": r(vocab, D), "model.norm.weight": r(D)}
    for i in range(L):
        at = f"model.layers.{i}."
        weights.update(
            {
                f"{at}self_attn.q_proj.weight": r(N * H, D),
                f"{at}self_attn.k_proj.weight": r(K * H, D),
                f"{at}self_attn.v_proj.weight": r(K * H, D),
                f"{at}self_attn.o_proj.weight": r(D, N * H),
                f"{at}mlp.gate_proj.weight": r(F, D),
                f"{at}mlp.up_proj.weight": r(F, D),
                f"{at}mlp.down_proj.weight": r(D, F),
            }
        )
        weights.update(
            {
                f"{at}{n}.weight": r(D)
                for n in (
                    "input_layernorm",
                    "post_attention_layernorm",
                    "pre_feedforward_layernorm",
                    "post_feedforward_layernorm",
                )
            }
        )
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "tokenizer.model").write_bytes(tokenizer_proto)
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Gemma2ForCausalLM"],
                "model_type": "gemma2",
                "vocab_size": vocab,
                "hidden_size": D,
                "intermediate_size": F,
                "num_hidden_layers": L,
                "num_attention_heads": N,
                "num_key_value_heads": K,
                "head_dim": H,
                "sliding_window": 16,
                "attn_logit_softcapping": 50.0,
                "final_logit_softcapping": 30.0,
                "query_pre_attn_scalar": H,
                "rope_theta": 10000.0,
                "hidden_activation": "gelu_pytorch_tanh",
                **config,
            }
        )
    )


def test_a_gemma_2_config_gives_tunix_gemma_sizes_and_other_models_are_refused(tmp_path):
    write_gemma2(tmp_path / "g2", 64, tiny_tokenizer())
    sizes = gemma.gemma_config(tmp_path / "g2")
    assert sizes == {
        "family": "gemma2",
        "num_layers": 2,
        "num_embed": 64,
        "embed_dim": 64,
        "hidden_dim": 128,
        "num_heads": 8,
        "head_dim": 8,
        "num_kv_heads": 4,
        "sliding_window_size": 16,
        "final_logit_softcap": 30.0,
        "attn_logits_soft_cap": 50.0,
        "use_post_attn_norm": True,
        "use_post_ffw_norm": True,
        "attention_types": ["LOCAL_SLIDING", "GLOBAL"],
    }
    described = model_sizes.from_config(sizes)
    assert planning.pick_mesh(described, 8, 16, "auto") == (2, 4)  # kv heads 4 over tp 4
    assert planning.memory_plan(described, 8, (2, 4), 2, 64, 8, grpo=True).parameters > 0
    write_gemma2(tmp_path / "g2", 64, tiny_tokenizer(), layer_types=["full_attention", "sliding_attention"])
    assert gemma.gemma_config(tmp_path / "g2")["attention_types"] == ["GLOBAL", "LOCAL_SLIDING"]
    write_gemma2(tmp_path / "g2", 64, tiny_tokenizer(), query_pre_attn_scalar=144)  # Gemma 2 27B's: not head_dim
    with pytest.raises(ParameterError, match=r"query_pre_attn_scalar 144 \(Tunix's Gemma 2 has 8\)"):
        gemma.gemma_config(tmp_path / "g2")
    write_gemma2(tmp_path / "g2", 64, tiny_tokenizer(), model_type="llama")
    with pytest.raises(ParameterError, match=r"model_type 'llama': notebook 11 trains Gemma 4 .* or Gemma 2 \(gemma2"):
        gemma.gemma_config(tmp_path / "g2")


def test_a_gemma_2_folder_trains_with_lora_and_its_merged_save_loads_back_with_tunix(runs):
    found = runs["gemma2"]
    assert found["family"] == "gemma2" and found["config"] == "tunix.models.gemma.model" and found["steps"] == 2
    trained, loaded = found["completions"]
    assert trained == loaded and len(trained) == 16  # the merged save is the trained model
    assert found["keys"]  # Hugging Face's Gemma 2 names, as given
    lora = {
        f"{p}.weight"
        for p in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        )
    }
    assert set(found["changed"]) == lora, found["changed"]  # LoRA merged into those, the norms and embedding as given
    assert found["saved_config"]["model_type"] == "gemma2" and found["saved_config"]["layer_types"] == [
        "sliding_attention",
        "full_attention",
    ]
    assert {"model", "lora.safetensors", "metrics.json"} <= set(found["files"])


# ---- Gemma 4 (Tunix's tunix.models.gemma4) ----

# Gemma 4 E2B's text layout in miniature: 4 local layers then a global one (its own head size, partial RoPE), the last
# layers KV-shared with a double-wide MLP, per-layer inputs, a final soft cap.
GEMMA4 = {
    "model_type": "gemma4_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 10,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "global_head_dim": 32,
    "sliding_window": 16,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2,
    "num_kv_shared_layers": 5,
    "use_double_wide_mlp": True,
    "hidden_size_per_layer_input": 8,
    "final_logit_softcapping": 30.0,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
    },
    "hidden_activation": "gelu_pytorch_tanh",
    "tie_word_embeddings": True,
}


@functools.cache
def tiny_tokenizer() -> bytes:
    """A SentencePiece model learned from a few words: a tokenizer.model that reads as one."""
    import sentencepiece

    proto = io.BytesIO()
    words = iter(["the tiny model reads a few words", "and answers in a few more"] * 8)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=words, model_writer=proto, vocab_size=40, hard_vocab_limit=False, minloglevel=2
    )
    return proto.getvalue()


def write_gemma4(folder, vocab: int, prefix: str = "", towers: bool = False, seed: int = 0, **config) -> dict:
    """A tiny Gemma 4 as Hugging Face writes one (Gemma4ForCausalLM's names after `prefix`; `towers`: a multimodal
    gemma4 config.json with the text model in text_config, and vision weights beside), random weights; its config."""
    from safetensors.numpy import save_file

    c = {**GEMMA4, "vocab_size": vocab, "vocab_size_per_layer_input": vocab, **config}
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    D, N, P, L = c["hidden_size"], c["num_attention_heads"], c["hidden_size_per_layer_input"], c["num_hidden_layers"]

    def r(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w = {"embed_tokens.weight": r(vocab, D), "norm.weight": r(D), "embed_tokens_per_layer.weight": r(vocab, L * P)}
    w.update({"per_layer_model_projection.weight": r(L * P, D), "per_layer_projection_norm.weight": r(P)})
    for i, kind in enumerate(c["layer_types"]):
        full, at = kind == "full_attention", f"layers.{i}."
        H, K = (c["global_head_dim"], c.get("num_global_key_value_heads") or 1) if full else (c["head_dim"], 1)
        F = c["intermediate_size"] * (2 if i >= L - c["num_kv_shared_layers"] else 1)
        w.update({f"{at}self_attn.q_proj.weight": r(N * H, D), f"{at}self_attn.o_proj.weight": r(D, N * H)})
        w.update({f"{at}self_attn.k_proj.weight": r(K * H, D)})
        if not (full and c.get("attention_k_eq_v")):
            w[f"{at}self_attn.v_proj.weight"] = r(K * H, D)
        w.update({f"{at}self_attn.q_norm.weight": r(H), f"{at}self_attn.k_norm.weight": r(H)})
        w.update(
            {f"{at}mlp.{n}.weight": r(F, D) for n in ("gate_proj", "up_proj")} | {f"{at}mlp.down_proj.weight": r(D, F)}
        )
        norms = ("input_", "post_attention_", "pre_feedforward_", "post_feedforward_", "post_per_layer_input_")
        w.update({f"{at}{n}{'norm' if 'per_layer' in n else 'layernorm'}.weight": r(D) for n in norms})
        w.update({f"{at}per_layer_input_gate.weight": r(P, D), f"{at}per_layer_projection.weight": r(D, P)})
        w[f"{at}layer_scalar"] = r(1)
    w = {prefix + k: v for k, v in w.items()}
    if towers:
        w.update({"model.vision_tower.encoder.layers.0.self_attn.q_proj.weight": r(8, 8), "model.embed_vision.w": r(8)})
    save_file(w, str(folder / "model.safetensors"))
    (folder / "tokenizer.model").write_bytes(tiny_tokenizer())  # read only to check it is one
    written = {"model_type": "gemma4", "text_config": c, "vision_config": {"hidden_size": 8}} if towers else c
    (folder / "config.json").write_text(json.dumps(written))
    return c


GEMMA4_SIZES = {  # what Tunix's gemma4 ModelConfig is given for GEMMA4
    "family": "gemma4",
    "num_layers": 10,
    "num_embed": 64,
    "embed_dim": 64,
    "hidden_dim": 128,
    "num_heads": 4,
    "head_dim": 16,
    "num_kv_heads": 1,
    "sliding_window_size": 16,
    "final_logit_softcap": 30.0,
    "attention_pattern": (["LOCAL_SLIDING"] * 4 + ["GLOBAL"]) * 2,
    "per_layer_input_dim": 8,
    "num_global_kv_heads": 1,
    "global_key_size": 32,
    "k_eq_v_global": False,
    "frac_shared_layers": 0.5,
    "override_kv_shared_ffw_hidden": 256,
    "local_base_frequency": 10000,
    "local_rope_proportion": 1.0,
    "local_scale_factor": 1.0,
    "global_base_frequency": 1000000,
    "global_rope_proportion": 0.25,
    "global_scale_factor": 1.0,
}


def test_a_gemma_4_config_gives_tunix_gemma4_sizes_and_what_tunix_computes_otherwise_is_refused(tmp_path, capsys):
    from tunix.models.gemma4 import model as gemma4

    write_gemma4(tmp_path / "g4", 64)
    sizes = gemma.gemma_config(tmp_path / "g4")
    assert sizes == GEMMA4_SIZES
    pattern = tuple(gemma4.AttentionType[t] for t in sizes["attention_pattern"])
    config = gemma4.ModelConfig(**{k: v for k, v in sizes.items() if k != "family"} | {"attention_pattern": pattern})
    # transformers' shared layers read the last unshared layer of their own type (3: local, 4: global): Tunix's too
    assert gemma4.create_kv_cache_sharing_patterns(10, config.frac_shared_layers, True, True, pattern) == [
        *range(5),
        3,
        3,
        3,
        3,
        4,
    ]
    # Gemma 4 E2B's config.json (text_config) reads as Tunix's own gemma4_e2b preset
    e2b = {**GEMMA4, "vocab_size": 262144, "hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 35}
    e2b.update(num_attention_heads=8, head_dim=256, global_head_dim=512, sliding_window=512, num_kv_shared_layers=20)
    e2b.update(hidden_size_per_layer_input=256, layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 7)
    read, preset = gemma4_config.gemma4_sizes(e2b, "E2B"), gemma4.ModelConfig.gemma4_e2b()
    assert [gemma4.AttentionType[t] for t in read.pop("attention_pattern")] == [*preset.attention_pattern] * 7
    assert {k: getattr(preset, k) for k in read if k != "num_global_kv_heads"} == {
        k: v for k, v in read.items() if k != "num_global_kv_heads"
    }
    # the plan's reading of these sizes is its reading of the config.json they came from
    from_hf = model_sizes.from_config({**GEMMA4, "vocab_size": 64})
    assert model_sizes.from_config(sizes) == from_hf and from_hf.kv_shared_layers == 5 and from_hf.double_wide
    assert planning.pick_mesh(from_hf, 8, 16, "auto") == (2, 4)
    # a multimodal Gemma 4: its text model, the towers' weights left out and said
    write_gemma4(tmp_path / "mm", 64, prefix="model.language_model.", towers=True)
    assert gemma.gemma_config(tmp_path / "mm") == GEMMA4_SIZES
    assert "text weights only: 2 of the vision/audio towers' weights left out" in capsys.readouterr().out
    refused = {
        "experts": (
            {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32},
            r"routes on the residual.* Install Tunix's git head \(e31e280e or later",
        ),
        "sharing": ({"num_kv_shared_layers": 4}, r"unshared layers must end sliding, full \(here \['full_attention', "),
        "eps": ({"rms_norm_eps": 1e-5}, r"rms_norm_eps 1e-05 \(Tunix's Gemma 4 has 1e-06\)"),
        "family": ({"model_type": "gemma3n_text"}, r"model_type 'gemma3n_text': notebook 11 trains Gemma 4"),
        "sizes": (
            {"global_head_dim": 48},
            r"layers.4.self_attn.q_proj.weight \(128, 64\) \(config.json: \(192, 64\)\)",
        ),
        "axes": (
            {"global_head_dim": 64},
            r"sizes that Tunix.s loader cannot tell apart \(width 64, heads 4, head dims \[16, 64\]",
        ),
    }
    for name, (config, message) in refused.items():
        write_gemma4(tmp_path / name, 64)
        (tmp_path / name / "config.json").write_text(
            json.dumps({**GEMMA4, "vocab_size": 64, "vocab_size_per_layer_input": 64, **config})
        )
        with pytest.raises(ParameterError, match=message):
            gemma.gemma_config(tmp_path / name)
    write_gemma4(tmp_path / "prefixed", 64, prefix="model.")  # what Gemma4ForCausalLM.save_pretrained writes
    with pytest.raises(ParameterError, match=r"named model.layers.\* .* Tunix's Gemma 4 loader does not read"):
        gemma.gemma_config(tmp_path / "prefixed")


def test_a_tiny_gemma_4_is_built_from_scratch_in_gemma_4s_turns(runs):
    # MODEL="tiny-gemma4": Tunix's Gemma 4, every weight trained, its MLP kernels drawn (not Tunix's zeros), asked in
    # Gemma 4's turns with its system turn. (Its training, save and reload: the 10 -> 11 chain above, from 10's export.)
    found = runs["gemma4"]
    assert found["family"] == "gemma4" and found["config"] == "tunix.models.gemma4.model"
    assert found["model"] == "tiny-gemma4" and found["layers"] == 4 and found["shared"] == 0.5
    assert found["prompt"].startswith("<|turn>system\n") and found["prompt"].endswith(
        "<turn|>\n<|turn>user\nQ<turn|>\n<|turn>model\n"
    )
    assert found["end"] == "<turn|>" and found["mlp_drawn"]
    parameters, trained = found["parameters"]
    assert parameters == trained > 0
    print(f"Gemma 4's build: {found['seconds']:.0f} s")
