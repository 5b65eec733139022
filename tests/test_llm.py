"""Notebook 10 (Gemma / Gemma 3 with LoRA, sharded) and its plumbing, nbkit.llm: the pairs' checks, the memory
plan, the layout rules, in this process; and, on 8 simulated JAX devices in one fresh process, the notebook's
own cells run on a tiny Gemma 3 and a tiny Gemma under three meshes (nbval runs the whole notebook)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import REPO

from nbkit.errors import DataError, ParameterError
from nbkit.llm import data as llm_data
from nbkit.llm import sharding as llm

GEMMA3 = {"1b": llm.GEMMA3_CONFIGS["Gemma 3 1B"], "4b": llm.GEMMA3_CONFIGS["Gemma 3 4B"]}


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name, content, said",
    [
        ("pairs.csv", "prompt,answer\nhi,there\n", "pairs.csv, line 2: no column 'response' (RESPONSE_COLUMN)"),
        ("pairs.csv", "prompt,response\nhi,there\nyo,\n", "pairs.csv, line 3: column 'response' is empty"),
        ("pairs.jsonl", '{"prompt": "a", "response": "b"}\n{"prompt": "a"\n', "pairs.jsonl, line 2 is not JSON"),
        ("pairs.jsonl", '["a", "b"]\n', "pairs.jsonl, line 1 is a JSON list, not an object"),
        ("pairs.txt", "prompt,response\n", "pairs.txt is not a .csv or .jsonl file"),
        ("pairs.csv", "prompt,response\n", "no prompt/response pairs in pairs.csv"),
    ],
)
def test_bad_pairs_are_refused_with_file_line_and_column(tmp_path, name, content, said):
    with pytest.raises(DataError, match=said.replace("(", r"\(").replace(")", r"\)")):
        llm_data.load_pairs(str(write(tmp_path / name, content)), "prompt", "response")


def test_pairs_of_a_folder_and_a_sequence_length_that_cuts_every_response(tmp_path):
    write(tmp_path / "a.csv", 'prompt,response\n"one, two",three\n')
    write(tmp_path / "b.jsonl", '{"q": 1, "prompt": "four", "response": "five"}\n\n')
    pairs = llm_data.load_pairs(str(tmp_path), "prompt", "response")
    assert pairs.prompts == ["one, two", "four"] and pairs.responses == ["three", "five"]
    assert pairs.where == ["a.csv, line 2", "b.jsonl, line 1"]
    assert llm_data.check_lengths([5, 6], [9, 7], 8, pairs) == 0.5
    with pytest.raises(DataError, match=r"SEQUENCE_LENGTH=5 leaves no room .* 5 tokens \(a.csv, line 2\)"):
        llm_data.check_lengths([5, 6], [9, 7], 5, pairs)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no .csv or .jsonl file"):
        llm_data.load_pairs(str(tmp_path / "empty"), "prompt", "response")


def test_the_memory_plan_of_gemma3_on_a_v5e_8():
    one = llm.memory_plan(GEMMA3["1b"], 8, None, 512, 2, 8, chip_gib=15.75)
    assert one.mesh == (8, 1) and "MESH='auto': data parallel" in one.describe()
    assert 0.95e9 < one.parameters < 1.05e9  # "Gemma 3 1B" (its text model)
    four = llm.memory_plan(GEMMA3["4b"], 8, None, 1024, 2, 8, chip_gib=15.75)
    assert four.mesh == (1, 8) and four.fits and 3.7e9 < four.parameters < 4.1e9
    assert four.weights == pytest.approx(four.parameters * 2 / 8)
    too_long = llm.memory_plan(GEMMA3["4b"], 8, (1, 8), 8192, 1, 8, chip_gib=15.75)
    assert not too_long.fits and "a shorter SEQUENCE_LENGTH" in too_long.describe()
    assert llm.memory_plan(GEMMA3["4b"], 8, (1, 8), 8192, 1, 8).fits  # a CPU: the memory is unknown, not checked
    assert llm.parse_mesh("2x4", 8) == (2, 4) and llm.parse_mesh("data", 8) == (8, 1)
    with pytest.raises(ParameterError, match="MESH='3x3'"):
        llm.parse_mesh("3x3", 8)


def test_layout_rules_place_the_lora_kernels_of_the_targets_only():
    rules = llm.layout_rules(["query", "ffw_linear"])
    assert rules[".*/query/lora_kernel_a"] == (None, "model", None) and rules[".*/ffw_linear/lora_kernel_b"] == (
        None,
        "model",
    )
    assert not [p for p in rules if "lora" in p and "query" not in p and "ffw_linear" not in p]


# The notebook's cells up to the optimizer, on 8 simulated devices, for each model and mesh; what the test needs
# printed as one JSON line.
SCRIPT = r"""
import json, sys, jupytext, numpy as np
cells = [c for c in jupytext.read("notebooks/10_llm_finetune.py").cells]
code = [c.source for c in cells if c.cell_type == "code"]
def upto(heading):  # the code cells before the markdown cell that starts with `heading`
    found, seen = [], False
    for c in cells:
        if c.cell_type == "markdown" and c.source.startswith(heading):
            return found
        if c.cell_type == "code":
            found.append(c.source)
rest = upto("## Train")
result = {}
out = sys.argv[1]
for preset in ("tiny", "tiny-gemma"):
    for mesh_name in ("data", "1x8", "2x4"):
        ns = {"__annotations__": {}}
        exec(code[0], ns)
        ns.update(PRESET=preset, MESH=mesh_name, SIMULATE_DEVICES=8, OUTPUT_DIR=f"{out}/{preset}-{mesh_name}")
        for source in rest[1:]:
            exec(source, ns)
        m, keras, sharding = ns["causal_lm"], ns["keras"], ns["sharding"]
        x = {k: v[:16] for k, v in ns["train_x"].items()}
        y, w = ns["train_y"][:16], ns["train_weights"][:16]
        key = f"{preset} {mesh_name}"
        logits = np.asarray(m.predict_on_batch(x), np.float64)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits, sample_weight=w)
        found = {"loss": float(loss), "mesh": list(ns["plan"].mesh), "specs": {
            v.path: [list(v.shape), list(v.value.sharding.shard_shape(v.shape))] for v in m.backbone.weights if "ffw_linear" in v.path or "embeddings" in v.path}}
        found["trainable"] = sorted({v.path.split("/")[-1] for v in m.trainable_weights})
        if preset == "tiny" and mesh_name != "1x8":  # (each mesh compiles its own step: two meshes, for time)
            m.compile(optimizer=keras.optimizers.Adam(1e-2), loss=m.loss)  # a constant rate: the schedule starts at 0
            found["step_losses"] = [float(m.train_on_batch(x, y, sample_weight=w)[0]) for _ in range(2)]
        if key == "tiny 2x4":  # the rest once: the prompts' weights, the refused rules, the files loaded back
            tok = ns["tokenizer"]
            prompt_len = len(tok(ns["chat_prompt"](ns["pairs"].prompts[ns["train_rows"][0]]))) + 1
            found["weights_before_answer"] = float(w[0][: prompt_len - 1].sum())
            found["weights_of_answer"] = float(w[0][prompt_len - 1 :].sum())
            found["answer_tokens"] = len(tok(ns["chat_response"](ns["pairs"].responses[ns["train_rows"][0]])))
            rules, hidden, axes = ns["layout_rules"], ns["config"]["hidden_dim"], dict(zip(ns["mesh"].axis_names, ns["mesh"].shape))
            refused = []
            for wrong in ({**rules, ".*/ffw_gate/kernel": ("model", None)},
                          {p: r for p, r in rules.items() if p != ".*/ffw_gating/lora_kernel_a"},
                          {**rules, ".*/ffw_linear/kernel": ("model", None)}):
                try:
                    sharding.check_sharding(m.backbone.weights, wrong, hidden, axes)
                except Exception as error:
                    refused.append(str(error))
            found["refused"] = refused
            m.backbone.save_lora_weights(f"{out}/x.lora.h5")
            m.save_to_preset(f"{out}/merged")
            keras.utils.set_random_seed(ns["SEED"])
            again = ns["build_model"]()
            again.backbone.enable_lora(ns["LORA_RANK"], ns["LORA_TARGETS"])
            again.backbone.load_lora_weights(f"{out}/x.lora.h5")
            merged = ns["keras_hub"].models.CausalLM.from_preset(f"{out}/merged")
            trained = np.asarray(m.predict_on_batch(x))
            found["lora_file_diff"] = float(np.abs(np.asarray(again.predict_on_batch(x)) - trained).max())
            found["merged_diff"] = float(np.abs(np.asarray(merged.predict_on_batch(x)) - trained).max())
            found["logit_scale"] = float(np.abs(trained).max())
        result[key] = found
print("RESULT " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def meshes(tmp_path_factory):
    import subprocess
    import sys

    from conftest import clean_env

    out = tmp_path_factory.mktemp("llm")
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)], cwd=REPO, env=clean_env(NBKIT_WORKING_DIR=str(out / "work")),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(run.stdout.split("RESULT ", 1)[1])


LOSS_TOLERANCE = 1e-5  # float32 sums in another order on another split: relative


@pytest.mark.parametrize("preset", ["tiny", "tiny-gemma"])
def test_the_same_batch_gives_the_same_loss_on_every_mesh(meshes, preset):
    losses = [meshes[f"{preset} {mesh}"]["loss"] for mesh in ("data", "1x8", "2x4")]
    assert losses[0] > 0.1 and np.allclose(losses, losses[0], rtol=LOSS_TOLERANCE), losses
    if preset == "tiny":  # two training steps: the gradients agree too, and the loss falls
        steps = np.array([meshes[f"tiny {mesh}"]["step_losses"] for mesh in ("data", "2x4")])
        assert np.allclose(steps, steps[0], rtol=1e-4) and steps[0][1] < steps[0][0], steps


@pytest.mark.parametrize("preset", ["tiny", "tiny-gemma"])
def test_the_kernels_are_sharded_as_planned_and_only_lora_trains(meshes, preset):
    for mesh, shape in (("data", [8, 1]), ("1x8", [1, 8]), ("2x4", [2, 4])):
        found = meshes[f"{preset} {mesh}"]
        assert found["mesh"] == shape
        for path, (full, shard) in found["specs"].items():  # each chip's part of (..., hidden): hidden / model axis
            if path.endswith("ffw_linear/kernel") or path.endswith("ffw_linear/lora_kernel_b") or "embeddings" in path:
                assert shard == [*full[:-1], full[-1] // shape[1]], (mesh, path, full, shard)
            else:  # lora_kernel_a of ffw_linear: (intermediate, rank), whole on every chip
                assert shard == full, (mesh, path, full, shard)
        assert found["trainable"] == ["lora_kernel_a", "lora_kernel_b"]


def test_a_wrong_layout_rule_is_refused(meshes):
    typo, missing, other = meshes["tiny 2x4"]["refused"]
    assert "the rule(s) '.*/ffw_gate/kernel' matched no variable" in typo
    assert "decoder_block_0/ffw_gating/lora_kernel_a (64, 16) is placed by no rule: it is replicated" in missing
    assert "ffw_linear/kernel (128, 64) is sharded (None, 'model'), not ('model', None) as planned" in other


def test_prompt_tokens_carry_no_weight_and_the_saved_model_gives_the_same_logits(meshes):
    found = meshes["tiny 2x4"]
    assert found["weights_before_answer"] == 0 and found["weights_of_answer"] == found["answer_tokens"] + 1  # and <eos>
    assert found["lora_file_diff"] < 1e-5 * found["logit_scale"]
    assert found["merged_diff"] < 1e-4 * found["logit_scale"]
