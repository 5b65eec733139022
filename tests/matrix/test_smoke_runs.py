"""Every Keras notebook's smoke run, and the model hand-off both ways, in whatever environment runs this
file: `make test` runs it in each environment of the version matrix (tools/matrix.py), so the versions
of Kaggle's TPU image, the oldest declared ones and Colab's are each proven on the notebooks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import papermill
import pytest
from conftest import REPO, check_submission, execute, text_outputs
from test_bundle import ENGINE_SCRIPT, fresh_python  # noqa: F401  (a fixture)
from test_text import read_csv, write_csv

from nbkit import metrics as results
from nbkit.handoff import package
from nbkit.images import sample as flower_sample
from nbkit.publish import bundle
from nbkit.text import competition as text

JAX8 = {"BACKEND": "jax", "SIMULATE_DEVICES": 8}  # Kaggle's TPUs today: Keras on JAX, 8 cores
FLOWERS_FILES = (
    "model.keras",
    "batch.png",
    "training_curves.png",
    "input_wait.png",
    "confusion_matrix.png",
    "predictions.png",
)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return flower_sample.make_sample(tmp_path_factory.mktemp("flowers"), 104)


def test_01_tpu_setup_on_eight_jax_devices(tmp_path):
    out = " ".join(text_outputs(execute(tmp_path, "01_tpu_setup.ipynb", **JAX8)).split())
    assert "Keras backend jax, 8 replica(s)" in out and "keras.distribution.DataParallel" in out
    assert out.count("[[22.0, 28.0], [49.0, 64.0]]") == 8 and "global batch 128, " in out
    assert "learned (validation accuracy above 3x chance): True" in out


def test_02_flowers_on_eight_jax_devices_learns_and_submits(made, tmp_path):
    out = text_outputs(
        execute(
            tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(made), OUTPUT_DIR=str(tmp_path / "flowers"), **JAX8
        )
    )
    assert "learned (validation accuracy above 3x chance): True" in out
    assert "Keras backend jax, 8 replica(s)" in " ".join(out.split()) and "global batch 128" in out
    metrics = check_submission(made, tmp_path / "flowers", FLOWERS_FILES)
    assert metrics["replicas"] == 8 and metrics["global_batch"] == 128
    epochs = metrics["epochs"]
    assert [f"input wait, epoch {e}:" in out for e in range(1, epochs + 1)] == [True] * epochs  # the monitor's lines


def test_03_private_dataset_reads_records(tmp_path):
    assert "record 3: {'id': " in text_outputs(execute(tmp_path, "03_private_dataset.ipynb"))


@pytest.mark.parametrize(
    "trained, predicted",
    [(JAX8, {"BACKEND": "tensorflow"}), ({"BACKEND": "tensorflow"}, {"BACKEND": "jax"})],
    ids=["jax8-to-tensorflow", "tensorflow-to-jax"],
)
def test_05_package_predicts_the_same_in_06(made, tmp_path, trained, predicted):
    execute(
        tmp_path, "05_train_on_tpu.ipynb", DATA_ROOT=str(made), OUTPUT_DIR=str(tmp_path / "train"), EPOCHS=2, **trained
    )
    folder = tmp_path / "train" / "model-package"
    assert package.read_manifest(folder)["trained_with"]["keras_backend"] == trained["BACKEND"]
    out = text_outputs(
        execute(
            tmp_path,
            "06_infer_on_gpu.ipynb",
            output="06.ipynb",
            DATA_ROOT=str(made),
            PACKAGES=str(folder),
            OUTPUT_DIR=str(tmp_path / "submit"),
            **predicted,
        )
    )
    assert "checked its outputs against the manifest" in out
    submitted = results.read_csv(tmp_path / "submit" / "submission.csv")
    assert submitted == results.read_csv(tmp_path / "train" / "submission.csv")


def toxic_comments(folder: Path) -> dict[str, int]:
    """Text data in another form than Watson's: one text column, labels 0/1 named `toxic`, a `lang` column,
    ids not in file order, a sample submission in yet another order; the test rows' true labels."""
    rng = np.random.default_rng(5)
    calm, rude = "thanks great article helpful agree nice".split(), "idiot stupid shut awful hate dumb".split()

    def rows(count):
        found = []
        for i in rng.permutation(count):
            toxic = int(rng.random() < 0.4)
            words = list(rng.choice(calm, 6)) + (list(rng.choice(rude, 2)) if toxic else [])
            found.append(
                [f"c{i * 7919 % 100003:05d}", " ".join(rng.permutation(words)), rng.choice(["en", "de", "fr"]), toxic]
            )
        return found

    folder.mkdir()
    train, test = rows(1000), rows(150)
    write_csv(folder / "train.csv", ["id", "comment_text", "lang", "toxic"], train)
    write_csv(folder / "test.csv", ["id", "comment_text", "lang"], [r[:3] for r in test])
    write_csv(
        folder / "sample_submission.csv", ["id", "toxic"], [[r[0], 0.5] for r in sorted(test, key=lambda r: r[1])]
    )
    return {r[0]: r[3] for r in test}


def run_bundled(fresh_python, tmp_path: Path, notebook: str, parameters: dict) -> str:
    """Notebook `notebook` (e.g. "08_text_classifier") as Kaggle gets it (`python -m nbkit bundle`, nbkit not
    installed), run by papermill in a fresh Python with `parameters` into tmp_path; its text outputs."""
    python, env = fresh_python
    folder = bundle.write(REPO / "notebooks" / f"{notebook}.py", tmp_path / "kernels", owner="alice")
    executed = tmp_path / f"{notebook}.ipynb"
    run = subprocess.run(
        [
            python,
            ENGINE_SCRIPT,
            str(folder / f"{notebook.replace('_', '-')}.ipynb"),
            str(executed),
            "-k",
            "fresh",
            "--cwd",
            str(tmp_path),
            "--no-progress-bar",
            *[a for name, value in parameters.items() for a in ("-p", name, str(value))],
        ],
        cwd=tmp_path,
        env={**env, "NBKIT_KAGGLEHUB": "off"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells for o in c.get("outputs", []))


def test_08_text_bundled_runs_with_nbkit_hidden_on_eight_jax_devices_on_data_in_another_form(tmp_path, fresh_python):
    """Notebook 08 as Kaggle gets it (`python -m nbkit bundle`, nbkit not installed), on two classes scored by ROC
    AUC; Watson's own form is nbval's run of the committed notebook."""
    truth = toxic_comments(tmp_path / "toxic")
    out = tmp_path / "outputs"
    parameters = dict(
        DATA_ROOT=tmp_path / "toxic",
        TEXT_COLUMNS="comment_text",
        LABEL_COLUMN="toxic",
        LANGUAGE_COLUMN="lang",
        METRIC="roc_auc",
        OUTPUT_DIR=out,
        BACKEND="jax",
        SIMULATE_DEVICES=8,
    )
    said = run_bundled(fresh_python, tmp_path, "08_text_classifier", parameters)
    assert "nbkit 0.2.0 from this notebook's bundle: " in said and "a tiny BERT from scratch" in said
    rows = read_csv(out / "submission.csv")
    sample = read_csv(tmp_path / "toxic" / "sample_submission.csv")
    assert rows[0] == ["id", "toxic"] and [r[0] for r in rows] == [r[0] for r in sample]  # the sample's order
    scores = np.array([float(r[1]) for r in rows[1:]])
    positive = np.array([truth[r[0]] for r in rows[1:]], bool)
    assert ((scores >= 0) & (scores <= 1)).all() and text._roc_auc(positive, scores) > 0.9
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["metric"] == "roc_auc" and metrics["roc_auc"] > 0.9
    assert metrics["replicas"] == 8 and metrics["global_batch"] == 128 and metrics["test_rows"] == 150
    per_language = metrics["accuracy_per_language"]
    training, validation = map(int, re.search(r"(\d+) training and (\d+) validation rows", said).groups())
    assert training + validation == 1000 and 150 < validation < 250  # VALIDATION_SHARE 0.2 of train.csv
    assert (
        sorted(per_language) == ["de", "en", "fr"] and sum(v["examples"] for v in per_language.values()) == validation
    )
    weighted = sum(v["accuracy"] * v["examples"] for v in per_language.values()) / validation
    assert weighted == pytest.approx(metrics["accuracy"])  # the languages' accuracies add up to the whole
    for name in (
        "model.keras",
        "learning_rate.png",
        "training_curves.png",
        "input_wait.png",
        "confusion_matrix.png",
        "accuracy_per_language.png",
    ):
        assert (out / name).is_file(), name


def test_09_cyclegan_bundled_runs_with_nbkit_hidden_on_eight_jax_devices(tmp_path, fresh_python):
    """Notebook 09 as Kaggle gets it, on 8 simulated JAX devices (a v5e-8's shape), kept short: 1 epoch of the
    generated sample, a global batch of 8, stopped by TIME_BUDGET after 1 of 2 epochs. nbval's run of the committed
    notebook is the one-device smoke run."""
    import io
    import zipfile

    from PIL import Image

    from nbkit.imagegen import sample as painting_sample

    data = painting_sample._make(tmp_path / "painter")
    out = tmp_path / "outputs"
    parameters = dict(DATA_ROOT=data, OUTPUT_DIR=out, EPOCHS=2, TIME_BUDGET=0.01, PER_REPLICA_BATCH=1, **JAX8)
    said = run_bundled(fresh_python, tmp_path, "09_monet_cyclegan", parameters)
    assert "nbkit 0.2.0 from this notebook's bundle: " in said and "Keras backend jax, 8 replica(s)" in " ".join(
        said.split()
    )
    assert "TIME_BUDGET: stopping after epoch 1 " in said and "epochs done: 1;" in said
    assert "Adam steps: monet_generator 7, photo_generator 7, monet_discriminator 7, photo_discriminator 7" in said
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["replicas"] == 8 and metrics["global_batch"] == 8 and metrics["epochs"] == 1
    with zipfile.ZipFile(out / "images.zip") as archive:
        entries = archive.infolist()
        assert len(entries) == 60 and len({e.filename for e in entries}) == 60
        assert Image.open(io.BytesIO(archive.read(entries[0]))).size == (256, 256)


def test_10_llm_bundled_runs_with_nbkit_hidden_on_eight_jax_devices_on_a_2x4_mesh(tmp_path, fresh_python):
    """Notebook 10 as Kaggle gets it, the tiny Gemma 3 sharded on a 2 (batch) x 4 (model) mesh, on pairs in a CSV
    file with other column names; kept short (2 epochs): nbval's run of the committed notebook shows it learns."""
    rows = [[" ".join(w), " ".join(w[::-1])] for w in np.random.default_rng(3).choice(["sun", "sea", "sky"], (64, 3))]
    write_csv(tmp_path / "pairs.csv", ["question", "answer"], rows)
    out = tmp_path / "outputs"
    parameters = dict(
        DATA_ROOT=tmp_path / "pairs.csv",
        PROMPT_COLUMN="question",
        RESPONSE_COLUMN="answer",
        PRESET="tiny",
        EPOCHS=2,
        MESH="2x4",
        OUTPUT_DIR=out,
        SIMULATE_DEVICES=8,
        EXPORT_TRANSFORMERS=True,
    )
    said = run_bundled(fresh_python, tmp_path, "10_llm_finetune", parameters)
    assert "nbkit 0.2.0 from this notebook's bundle: " in said and "mesh 2 (batch) x 4 (model) over 8 devices" in said
    assert "64 prompt/response pairs" in said and "a tiny Gemma 3 from scratch" in said
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["mesh"] == [2, 4] and metrics["epochs"] == 2 and metrics["training_loss"] > 0
    assert (out / "model.lora.h5").is_file() and (out / "merged-preset" / "config.json").is_file()
    # The Hugging Face export (issue 60) against the JAX side, the merged KerasHub model, in another process.
    assert metrics["transformers_export"].startswith("transformers/ (checked:"), metrics["transformers_export"]
    found = in_transformers(fresh_python, out / "transformers", [r[0] for r in rows[:6]], f"{out}/merged-preset", 12)
    assert found["most_apart"] < 1e-4 and found["same_prompt_ids"] and not found["not_loaded"], found
    assert found["same_greedy"] and found["stops"], found


# Run by the lane's Python: notebook 10's cells up to training on the tiny Gemma 4 (8 simulated devices, a 2x4 mesh),
# asking for the export to transformers, then not: what stopped the run, or two training steps' losses.
GEMMA4_CELLS = r"""
import json, os, jupytext
cells = jupytext.read("notebooks/10_llm_finetune.py").cells
code, seen = [], []
for c in cells:
    if c.cell_type == "markdown" and c.source.startswith("## Train"):
        break
    if c.cell_type == "code":
        code.append(c.source)
found = {}
for export in (True, False):
    ns = {"__annotations__": {}}
    exec(code[0], ns)
    ns.update(PRESET="tiny-gemma4", EXPORT_TRANSFORMERS=export, MESH="2x4", SIMULATE_DEVICES=8, EPOCHS=1)
    ns.update(OUTPUT_DIR=f"{os.environ['NBKIT_WORKING_DIR']}/{export}")
    try:
        for source in code[1:]:
            exec(source, ns)
    except Exception as error:
        found[str(export)] = f"{type(error).__name__}: {error}"
        continue
    m, keras = ns["causal_lm"], ns["keras"]
    x, y, w = {k: v[:16] for k, v in ns["train_x"].items()}, ns["train_y"][:16], ns["train_weights"][:16]
    m.compile(optimizer=keras.optimizers.Adam(1e-2), loss=m.loss)
    found[str(export)] = [float(m.train_on_batch(x, y, sample_weight=w)[0]) for _ in range(2)]
    found["version"] = ns["keras_hub"].__version__
print("RESULT " + json.dumps(found))
"""


def test_10_llm_finetune_gemma4_trains_on_this_lanes_keras_hub_and_stops_before_training_for_no_export(
    tmp_path, run_python
):
    """Issue 59: KerasHub 0.31.1 (Kaggle's TPU image) has Gemma 4's backbone (per-layer embeddings, KV sharing: its
    gemma4 modules are 0.32's but for the preprocessor's import of TensorFlow) and no Gemma 4 exporter. A Gemma 4 run
    asking for the export stops in the first cells, saying what to do; without it, the tiny Gemma 4 trains."""
    run = run_python(GEMMA4_CELLS, NBKIT_WORKING_DIR=str(tmp_path))
    found = json.loads(run.stdout.split("RESULT ", 1)[1])
    steps = found["False"]
    assert isinstance(steps, list) and steps[1] < steps[0], found
    if tuple(map(int, found["version"].split(".")[:2])) < (0, 32):
        assert found["True"].startswith("ParameterError: EXPORT_TRANSFORMERS=True: KerasHub 0.31") and (
            "`pip install -U 'keras-hub>=0.32'`" in found["True"]
            and "or give EXPORT_TRANSFORMERS=False" in found["True"]
        ), found
    else:
        assert isinstance(found["True"], list), found


# Run by the lane's Python: a model folder in Hugging Face transformers (torch, float32) against the JAX side on
# the same prompts: the chat template's ids against the training format's (<bos> + Gemma's turns, tokenized by the
# trained SentencePiece model), the logits, and greedy answers (JAX: notebook 11's completions, or KerasHub's
# generate from a merged preset), each stopped at the end of the turn.
TRANSFORMERS_SIDE = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import numpy as np, sentencepiece, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, prompts, jax_side, new = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
system = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
tokenizer = AutoTokenizer.from_pretrained(folder)
model, loading = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
trained = sentencepiece.SentencePieceProcessor(model_file=f"{folder}/tokenizer.model")
end = trained.piece_to_id("<end_of_turn>")
found = {"same_prompt_ids": True, "most_apart": 0.0, "same_greedy": True, "stops": False, "answers": []}
not_loaded = [*loading["missing_keys"], *loading["unexpected_keys"], *loading["mismatched_keys"]]
found["not_loaded"] = sorted(map(str, not_loaded))  # weights left at random, or read from nowhere
if jax_side.endswith("completions.json"):
    greedy = json.load(open(jax_side))["after"]
else:
    import keras_hub
    causal_lm = keras_hub.models.CausalLM.from_preset(jax_side)
for n, prompt in enumerate(prompts):
    turns = [{"role": "user", "content": prompt}] if system is None else [
        {"role": "system", "content": system}, {"role": "user", "content": prompt}]
    ids = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=True, return_dict=False)
    text = (system + "\n\n" if system else "") + prompt
    want = [trained.bos_id()] + trained.encode(f"<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n")
    found["same_prompt_ids"] &= list(ids) == want
    out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False)[0, len(ids):].tolist()
    found["stops"] |= out[-1] in (end, trained.eos_id()) and len(out) < new
    answer = trained.decode([t for t in out if t not in (end, trained.eos_id())])
    found["answers"].append(answer)
    if jax_side.endswith("completions.json"):
        found["same_greedy"] &= answer == greedy[n]
        continue
    with torch.no_grad():
        hf = model(torch.tensor([ids])).logits[0].numpy()
    backbone = causal_lm.backbone
    hidden = backbone({"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)), bool)})
    ours = np.asarray(backbone.token_embedding(hidden, reverse=True))[0]
    found["most_apart"] = max(found["most_apart"], float(np.abs(hf - ours).max()))
    causal_lm.preprocessor.sequence_length = len(ids) + new
    keras_text = causal_lm.generate(
        [f"<start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n"],
        stop_token_ids=[end, trained.eos_id()],
    )[0]
    keras_answer = keras_text.split("<start_of_turn>model\n", 1)[1].split("<end_of_turn>")[0]
    found["same_greedy"] &= keras_answer == answer
print("RESULT " + json.dumps(found))
"""


def in_transformers(fresh_python, folder: Path, prompts: list, jax_side: str, new: int, system: str = "") -> dict:
    """TRANSFORMERS_SIDE's findings for `folder` (run in a fresh process of the lane's Python), answers of at most
    `new` tokens."""
    python, env = fresh_python
    given = [str(folder), json.dumps(prompts), jax_side, str(new)] + ([json.dumps(system)] if system else [])
    run = subprocess.run(
        [python, "-c", TRANSFORMERS_SIDE, *given], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.split("RESULT ", 1)[1])


def test_11_grpo_bundled_runs_with_nbkit_hidden_on_eight_jax_devices_on_a_2x4_mesh(tmp_path, fresh_python):
    """Notebook 11 as Kaggle gets it (Tunix as the lane has it), the tiny Gemma 3 on a 2 (fsdp) x 4 (tp) mesh, on a
    JSONL file of questions with other column names; kept short (3 GRPO steps): nbval's run shows it learns."""
    rng = np.random.default_rng(5)
    lines = [
        json.dumps({"task": f"sum of {a} and {b}", "solution": str(a + b)}) for a, b in rng.integers(0, 9, (48, 2))
    ]
    (tmp_path / "sums.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "outputs"
    parameters = dict(
        DATA_ROOT=tmp_path / "sums.jsonl",
        QUESTION_COLUMN="task",
        ANSWER_COLUMN="solution",
        MODEL="tiny",
        MAX_STEPS=3,
        MESH="2x4",
        OUTPUT_DIR=out,
        SIMULATE_DEVICES=8,
    )
    said = run_bundled(fresh_python, tmp_path, "11_grpo_reasoning", parameters)
    assert "nbkit 0.2.0 from this notebook's bundle: " in said and "mesh 2 (fsdp) x 4 (tp)" in said
    assert "48 question/answer pairs" in said and "a tiny Gemma 3 from scratch" in said and "steps 0 -> 3" in said
    metrics = json.loads((out / "metrics.json").read_text())
    assert (
        metrics["mesh"] == [2, 4]
        and metrics["steps"] == 3
        and set(metrics["after"]) == {"accuracy", "format_share", "format_parts", "empty_share", "mean_length"}
    )
    assert {p.name for p in (out / "model").iterdir()} == {
        "model.safetensors",
        "config.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "generation_config.json",
    }
    # The saved model in Hugging Face transformers: the chat template's prompts as trained, and the greedy answers
    # of Tunix's sampler after GRPO (completions.json). (With no worked solutions there is no warm start, and 3 steps
    # from random weights end no answer early: 10's test above shows the stop.)
    completions = json.loads((out / "completions.json").read_text())
    system = re.search(r'SYSTEM_PROMPT = "(.+)"', (REPO / "notebooks" / "11_grpo_reasoning.py").read_text())[1]
    new = metrics["settings"]["max_new_tokens"]
    found = in_transformers(fresh_python, out / "model", completions["prompts"], f"{out}/completions.json", new, system)
    assert found["same_prompt_ids"] and found["same_greedy"] and not found["not_loaded"], found


# Run by the lane's Python: a Gemma 3 whose global layers scale RoPE by 8 (as 4B, 12B and 27B do), exported by the
# lane's KerasHub, as it is and as nbkit completes it, each loaded by transformers: the logits against KerasHub's.
ROPE_SCALED = r"""
import io, json, os, shutil, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras_hub, numpy as np, sentencepiece, torch
from transformers import AutoModelForCausalLM
from nbkit.llm import export
out = sys.argv[1]
proto = io.BytesIO()
sentencepiece.SentencePieceTrainer.train(
    sentence_iterator=iter([f"<start_of_turn>user\nsun sea sky {i}<end_of_turn>" for i in range(40)]),
    model_writer=proto, model_type="BPE", vocab_size=300, hard_vocab_limit=False, byte_fallback=True, minloglevel=2,
    **export.gemma_pieces(["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<img>"]),
)
tokenizer = keras_hub.models.Gemma3Tokenizer(proto=proto.getvalue())
backbone = keras_hub.models.Gemma3Backbone(
    vocabulary_size=tokenizer.vocabulary_size(), image_size=896, num_layers=2, num_query_heads=2,
    num_key_value_heads=1, hidden_dim=32, intermediate_dim=64, head_dim=16, use_sliding_window_attention=False,
    global_rope_scaling_factor=8.0, vision_encoder=None, query_head_dim_normalize=True, use_query_key_norm=True,
    use_post_ffw_norm=True, use_post_attention_norm=True,  # as every Gemma 3 has them (transformers always does)
)
causal_lm = keras_hub.models.Gemma3CausalLM(
    backbone=backbone, preprocessor=keras_hub.models.Gemma3CausalLMPreprocessor(tokenizer, sequence_length=48)
)
causal_lm.export_to_transformers(f"{out}/as-exported")
shutil.copytree(f"{out}/as-exported", f"{out}/completed")
said = export.write_for_transformers(f"{out}/completed", proto.getvalue(), export.keras_hub_rope(backbone), "KerasHub")
ids = np.random.default_rng(0).integers(4, tokenizer.vocabulary_size(), (1, 40))
hidden = backbone({"token_ids": ids, "padding_mask": np.ones_like(ids)})
ours = np.asarray(backbone.token_embedding(hidden, reverse=True))
apart = {}
for name in ("as-exported", "completed"):
    model = AutoModelForCausalLM.from_pretrained(f"{out}/{name}", dtype=torch.float32)
    with torch.no_grad():
        apart[name] = float(np.abs(model(torch.tensor(ids)).logits.numpy() - ours).max())
print("RESULT " + json.dumps({"apart": apart, "said": said, "version": keras_hub.__version__}))
"""


def test_a_gemma3_with_scaled_rope_exported_by_keras_hub_loads_right_in_transformers(tmp_path):
    """Issue 60: Kaggle's KerasHub 0.31.1 leaves Gemma 3's global RoPE factor out of config.json (a silently other
    model in transformers); nbkit writes it, and the completed folder's logits are KerasHub's."""
    run = subprocess.run(
        [sys.executable, "-c", ROPE_SCALED, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.split("RESULT ", 1)[1])
    assert found["apart"]["completed"] < 1e-4, found
    if found["version"] == "0.31.1":  # the lane's version drops the factor: the test sees the difference it makes
        assert found["apart"]["as-exported"] > 1e-2 and any("RoPE" in s for s in found["said"]), found


# Run by the lane's Python in tests/: a tiny Gemma 2 in Hugging Face's form loaded by Tunix (as notebook 11 does),
# written back by nbkit's `save_gemma` (Tunix has no Gemma 2 saver), and the saved folder loaded by transformers:
# its logits against Tunix's on the same ids (past the sliding window, through both soft caps).
GEMMA2_ROUND_TRIP = r"""
import json, sys
from pathlib import Path
import jax, jax.numpy as jnp, numpy as np, sentencepiece, torch
from flax import nnx
from transformers import AutoModelForCausalLM
from tunix.models.gemma import model as gemma2, params_safetensors
from test_export import tokenizer_proto
from test_rl import write_gemma2
from nbkit.llm import export, gemma
out = Path(sys.argv[1])
proto = tokenizer_proto()
write_gemma2(out / "hf", sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size(), proto)
sizes = gemma.gemma_config(out / "hf")
sizes.pop("family")
types = [gemma2.AttentionType[t] for t in sizes["attention_types"]]
config = gemma2.ModelConfig(**{**sizes, "attention_types": types})
mesh = jax.make_mesh((1, 1), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
model = params_safetensors.create_model_from_safe_tensors(str(out / "hf"), config, mesh, dtype=jnp.float32)
flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
weights = {".".join(map(str, p)): np.asarray(v.get_value() if hasattr(v, "get_value") else v) for p, v in flat}
export.save_gemma("gemma2", weights, sizes, proto, out / "saved")
ids = np.random.default_rng(1).integers(4, sizes["num_embed"], (1, 40))
causal = jnp.tril(jnp.ones((1, 40, 40), bool))
with jax.set_mesh(mesh):
    ours = np.asarray(model(jnp.asarray(ids), jnp.arange(40)[None], None, causal)[0])
hf = AutoModelForCausalLM.from_pretrained(out / "saved", dtype=torch.float32)
with torch.no_grad():
    theirs = hf(torch.tensor(ids)).logits.numpy()
print("RESULT " + json.dumps({"apart": float(np.abs(ours - theirs).max()), "spread": float(ours.std())}))
"""


def round_trip(script: str, out) -> dict:
    """A round-trip `script` run by the lane's Python in tests/ (it imports test modules) with `out` as its argument:
    the JSON it printed after "RESULT "."""
    run = subprocess.run(
        [sys.executable, "-c", script, str(out)], cwd=REPO / "tests", capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.split("RESULT ", 1)[1])


def test_a_gemma2_saved_by_nbkit_computes_in_transformers_what_tunix_computes(tmp_path):
    found = round_trip(GEMMA2_ROUND_TRIP, tmp_path)
    assert found["apart"] < 1e-4 and found["spread"] > 0.1, found  # the same model, and not a constant one


# Run by the lane's Python in tests/: a tiny Gemma 4 built by Tunix as notebook 11 builds one (per-layer inputs,
# KV-shared layers with a double-wide MLP, global layers with their own head size and partial RoPE; then K=V global
# layers with their own K/V heads), every weight drawn at random (norms and layer scalars too), written by nbkit's
# `save_gemma` as notebook 11 writes its model, and loaded by transformers' Gemma4ForCausalLM: no weight missing or
# left over, the logits against Tunix's on the same ids (past the sliding window, through the final soft cap).
GEMMA4_ROUND_TRIP = r"""
import json, sys
from pathlib import Path
import jax, jax.numpy as jnp, numpy as np, sentencepiece, torch
from flax import nnx
from transformers import AutoModelForCausalLM
from tunix.models.gemma4 import model as gemma4
import io
from test_export import TEXTS
from nbkit.llm import export
out, proto, found = Path(sys.argv[1]), io.BytesIO(), {}
sentencepiece.SentencePieceTrainer.train(  # with Gemma 4's turn pieces, as notebook 11 learns its tiny one's
    sentence_iterator=iter(TEXTS), model_writer=proto, model_type="BPE", vocab_size=96, hard_vocab_limit=False,
    minloglevel=2, **export.gemma_pieces(["<|turn>", "<turn|>"]))
proto = proto.getvalue()
vocab = sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size()
tiny = dict(num_layers=4, num_embed=vocab, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=1,
            sliding_window_size=16, attention_pattern=["LOCAL_SLIDING", "GLOBAL"] * 2, global_key_size=32)
shared = dict(frac_shared_layers=0.5, override_kv_shared_ffw_hidden=256, per_layer_input_dim=8, num_global_kv_heads=1)
k_eq_v = dict(k_eq_v_global=True, num_global_kv_heads=2, global_base_frequency=10_000, global_rope_proportion=0.5)
mesh = jax.make_mesh((1, 1), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
ids = np.random.default_rng(1).integers(4, vocab, (1, 40))
for name, sizes in {"shared": {**tiny, **shared}, "k=v": {**tiny, **k_eq_v}}.items():
    pattern = tuple(gemma4.AttentionType[t] for t in sizes["attention_pattern"])
    model = gemma4.Gemma4(gemma4.ModelConfig(**{**sizes, "attention_pattern": pattern}), rngs=nnx.Rngs(params=0))
    keys = iter(jax.random.split(jax.random.key(2), 500))
    state = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree.map(lambda x: x + 0.2 * jax.random.normal(next(keys), x.shape, x.dtype), state))
    flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
    weights = {".".join(map(str, p)): np.asarray(v.get_value() if hasattr(v, "get_value") else v) for p, v in flat}
    export.save_gemma("gemma4", weights, sizes, proto, out / name)
    with jax.set_mesh(mesh):
        ours = np.asarray(model(jnp.asarray(ids), jnp.arange(40)[None], None, jnp.tril(jnp.ones((1, 40, 40), bool)))[0])
    hf, loading = AutoModelForCausalLM.from_pretrained(out / name, dtype=torch.float32, output_loading_info=True)
    with torch.no_grad():
        theirs = hf(torch.tensor(ids)).logits.numpy()
    found[name] = {"apart": float(np.abs(ours - theirs).max()), "spread": float(ours.std()), "class": type(hf).__name__,
                   "not_loaded": sorted(map(str, [*loading["missing_keys"], *loading["unexpected_keys"],
                                                  *loading["mismatched_keys"]]))}
print("RESULT " + json.dumps(found))
"""


def test_a_gemma4_saved_by_nbkit_computes_in_transformers_what_tunix_computes(tmp_path):
    for found in round_trip(GEMMA4_ROUND_TRIP, tmp_path).values():
        assert found["class"] == "Gemma4ForCausalLM" and found["not_loaded"] == [], found
        assert found["apart"] < 1e-4 and found["spread"] > 0.1, found  # the same model, and not a constant one


def test_12_answers_alike_with_transformers_and_jax_and_writes_nothing_past_its_time_budget(tmp_path, fresh_python):
    """Notebook 12 on its generated sample (ids such as "007", a sample submission) and its tiny Gemma 3 with random
    weights, written as notebook 11 writes its model: Hugging Face transformers (torch on the CPU, left padding) and
    JAX (Tunix's sampler, power-of-two padding; the notebook as Kaggle gets it, nbkit hidden) give the same greedy
    completions, of the same lengths in tokens;
    submission.csv, read back with csv, is the sample submission's columns, ids and order. Then a run that
    TIME_BUDGET stops: an error naming the progress, and the earlier run's outputs as they were. (Neither engine is
    compared with the other on a GPU, nor is vLLM run: no environment here has either.)"""
    import csv

    runs = {}
    for engine in ("transformers", "jax"):
        out = tmp_path / engine
        if engine == "jax":  # its working folder tmp_path/out: the same sample and tiny model, written again
            said = run_bundled(fresh_python, tmp_path, "12_answer_test_set", dict(ENGINE=engine, OUTPUT_DIR=out))
            assert "nbkit 0.2.0 from this notebook's bundle: " in said
        else:
            said = text_outputs(
                execute(tmp_path, "12_answer_test_set.ipynb", f"{engine}.ipynb", ENGINE=engine, OUTPUT_DIR=str(out))
            )
        assert f"ENGINE={engine!r}: {engine} on the CPU" in said and "RANDOM WEIGHTS: the answers are noise" in said
        runs[engine] = (
            json.loads((out / "completions.json").read_text()),
            json.loads((out / "metrics.json").read_text()),
        )
    (transformers, transformers_metrics), (jax, jax_metrics) = runs["transformers"], runs["jax"]
    assert len(transformers) == 48 and transformers == jax  # ids, prompts, completions and their lengths in tokens
    assert jax_metrics["new_tokens"] == transformers_metrics["new_tokens"] > 48  # not all empty at once
    assert len({r["completion"] for r in jax}) > 24  # the answers depend on the prompts
    sample = tmp_path / "work" / "answers-sample" / "sample_submission.csv"
    with open(sample, newline="") as f, open(tmp_path / "jax" / "submission.csv", newline="") as g:
        expected, written = list(csv.reader(f)), list(csv.reader(g))
    assert written[0] == expected[0] == ["id", "answer"] and [r[0] for r in written] == [r[0] for r in expected]
    tagged = [re.search(r"<answer>(.*?)</answer>", r["completion"], re.DOTALL) for r in jax]  # the notebook's rule
    extracted = [(found[1] if found else r["completion"]).strip() for found, r in zip(tagged, jax)]
    assert written[8][0] == "007" and [r[1] for r in written[1:]] == extracted
    outputs = ("submission.csv", "completions.json", "metrics.json")
    before = {name: (tmp_path / "jax" / name).read_bytes() for name in outputs}
    with pytest.raises(papermill.PapermillExecutionError) as error:  # 6 batches; the third would pass 0.006 s
        execute(
            tmp_path,
            "12_answer_test_set.ipynb",
            "late.ipynb",
            ENGINE="jax",
            OUTPUT_DIR=str(tmp_path / "jax"),
            BATCH_SIZE=8,
            TIME_BUDGET=0.0001,
        )
    assert error.value.ename == "RunError" and "prompts answered. No submission is written" in error.value.evalue
    assert {name: (tmp_path / "jax" / name).read_bytes() for name in outputs} == before
