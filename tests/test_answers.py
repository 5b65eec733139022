"""Notebook 12 (answer a test set) and its plumbing, nbkit.llm.answers and nbkit.llm.engines, in this process: the
test file and the sample submission read and checked (ids, prompts, columns, order), submission.csv written in the
sample's order and read back, the prompts batched by length and checked against the model, the model folder checked
before anything loads (LoRA alone, no tokenizer, 10's and 11's output folders), the engine chosen, and the notebook's
first-cell checks. nbval runs the committed notebook (JAX); tests/matrix/test_smoke_runs.py runs it in Kaggle's lane
with transformers and JAX on the same tiny model."""

from __future__ import annotations

import csv
import importlib.util
import json
import math

import jupytext
import numpy as np
import pytest
from conftest import REPO

from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError, RunError
from nbkit.llm import answers, engines, export

NOTEBOOK = REPO / "notebooks" / "12_answer_test_set.py"


def write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return path


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture
def competition(tmp_path):
    """test.csv (id, prompt) with ids as text with leading zeros, and its sample submission in another order."""
    folder = tmp_path / "competition"
    write(folder / "test.csv", ["id", "prompt"], [["007", "two plus two"], ["010", "one, two"], ["3", "a\nb"]])
    write(folder / "sample_submission.csv", ["id", "answer"], [["3", "0"], ["007", "0"], ["010", "0"]])
    return folder


def load(root, id_column="id", prompt_column="auto", answer_column="auto", environment=None):
    return answers.load_test(str(root), id_column, prompt_column, answer_column, environment)


def test_a_sample_in_another_order_gives_the_submission_its_order_ids_kept_as_text(competition, tmp_path):
    test = load(competition)
    assert test.ids == ["007", "010", "3"] and test.prompts[2] == "a\nb" and test.where[0] == "test.csv, line 2"
    assert test.header == ["id", "answer"] and "another order" in test.describe()
    written = test.write_submission(['"four"', "1, 2", "y\rz"], tmp_path / "submission.csv")  # a lone \r quoted
    assert read(written) == [["id", "answer"], ["3", "y\rz"], ["007", '"four"'], ["010", "1, 2"]]


def test_without_a_sample_the_test_files_ids_in_its_order_and_jsonl_whole_number_ids(tmp_path):
    lines = [{"id": 7, "question": "q7"}, {"id": "b", "question": "qb"}]
    (tmp_path / "test.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    test = load(tmp_path / "test.jsonl")  # PROMPT_COLUMN="auto": "question" where there is no "prompt"
    assert test.ids == ["7", "b"] and test.prompts == ["q7", "qb"] and "no sample_submission.csv" in test.describe()
    test.write_submission(["a7", "ab"], tmp_path / "out.csv")
    assert read(tmp_path / "out.csv") == [["id", "answer"], ["7", "a7"], ["b", "ab"]]
    assert load(tmp_path / "test.jsonl", answer_column="label").header == ["id", "label"]


@pytest.mark.parametrize(
    "rows, words",
    [
        ([["1", "p"], ["1", "q"]], "test.csv, line 3 repeats the id '1' of test.csv, line 2: each row needs an id"),
        ([["1", "p"], ["", "q"]], "test.csv, line 3: the id ('id') is \"\": give every row an id"),
        ([["1", "p"], ["2", "  "]], "test.csv, line 3: the prompt ('prompt') is \"  \", not text to answer. Fill it"),
        ([], "test.csv: no rows. Give the test file"),
    ],
)
def test_ids_and_prompts_are_checked_row_by_row(tmp_path, rows, words):
    write(tmp_path / "test.csv", ["id", "prompt"], rows)
    with pytest.raises(DataError) as error:
        load(tmp_path / "test.csv")
    assert words in str(error.value)


def test_a_missing_column_is_named_with_the_closest_one(tmp_path):
    write(tmp_path / "test.csv", ["ID", "prompt"], [["1", "p"]])
    with pytest.raises(DataError, match="line 2: no column 'id' \\(ID_COLUMN\\); it has ID, prompt. Did you mean 'ID'"):
        load(tmp_path / "test.csv")
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": 1, "prompt": ["a"]}) + "\n")
    with pytest.raises(DataError, match='q.jsonl, line 1: the prompt .* is \\["a"\\], not text'):
        load(tmp_path / "q.jsonl")
    with pytest.raises(ParameterError, match="ID_COLUMN='prompt' is also PROMPT_COLUMN or ANSWER_COLUMN"):
        load(tmp_path / "test.csv", id_column="prompt", prompt_column="prompt")


@pytest.mark.parametrize(
    "sample, error, words",
    [
        ([["id", "answer"], ["007", ""], ["10", ""], ["3", ""]], DataError, "leading zeros: ids are compared as text"),
        ([["id", "answer"], ["007", ""], ["010", ""]], DataError, "0 of its ids are not in the test file (e.g. [])"),
        ([["id", "answer"], ["007", ""], ["007", ""]], DataError, "lists the id '007' more than once"),
        ([["key", "answer"], ["007", ""]], DataError, "has no column 'id' (ID_COLUMN): its columns are key,answer"),
        ([["id", "answer", "score"], ["007", "", ""]], ParameterError, "name the one the answers go in as ANSWER_C"),
    ],
)
def test_the_sample_submission_must_be_the_test_files(competition, sample, error, words):
    write(competition / "sample_submission.csv", sample[0], sample[1:])
    with pytest.raises(error) as raised:
        load(competition)
    assert words in str(raised.value)


def test_answer_column_is_one_of_the_samples_and_its_other_columns_are_kept(competition, tmp_path):
    rows = [["007", "0", "x"], ["010", "0", "y"], ["3", "0", "z"]]
    write(competition / "sample_submission.csv", ["id", "answer", "note"], rows)
    with pytest.raises(ParameterError, match="ANSWER_COLUMN='label' is not a column of sample_submission.csv"):
        load(competition, answer_column="label")
    test = load(competition, answer_column="answer")
    test.write_submission(["a", "b", "c"], tmp_path / "s.csv")
    assert read(tmp_path / "s.csv")[1:] == [["007", "a", "x"], ["010", "b", "y"], ["3", "c", "z"]]
    with pytest.raises(RunError, match="2 answers for 3 test ids: nothing written"):
        test.write_submission(["a", "b"], tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()


def test_data_root_a_folder_a_file_auto_attached_or_the_generated_sample(competition, tmp_path):
    assert load(competition).source == str(competition / "test.csv")
    with pytest.raises(DataError, match="DATA_ROOT='.*nowhere' is not there"):
        load(tmp_path / "nowhere")
    write(tmp_path / "two" / "a.csv", ["id", "prompt"], [])
    write(tmp_path / "two" / "b.csv", ["id", "prompt"], [])
    with pytest.raises(DataError, match="holds a.csv, b.csv: give the test file itself"):
        load(tmp_path / "two")
    write(tmp_path / "train-only" / "train.csv", ["id", "prompt"], [["1", "p"]])
    with pytest.raises(DataError, match="holds no test .csv or .jsonl file \\(never a train\\* one\\)"):
        load(tmp_path / "train-only")
    with pytest.raises(DataError, match="is not a test file"):
        load(competition / "sample_submission.csv")
    environment = nbenv._Environment("local", tmp_path / "input", tmp_path / "work", False)
    sample = load("auto", environment=environment)
    assert "the generated sample" in sample.source and len(sample.ids) == 48 and sample.ids[7] == "007"
    assert sample.prompts[0].startswith("how many words: ") and sample.header == ["id", "answer"]
    write(tmp_path / "input" / "some-competition" / "test.csv", ["id", "prompt"], [["1", "p"]])
    assert load("auto", environment=environment).source.endswith("some-competition/test.csv (attached)")
    write(tmp_path / "input" / "competitions" / "other" / "test.csv", ["id", "prompt"], [["1", "p"]])
    with pytest.raises(ParameterError, match="several test files are attached"):
        load("auto", environment=environment)


def test_batches_by_length_cover_every_prompt_once_longest_first_and_pad_less():
    lengths = [5, 90, 7, 88, 6, 91, 8, 87]
    batches = answers.length_batches(lengths, 4)
    assert batches == [[5, 1, 3, 7], [6, 2, 4, 0]]
    assert answers.padding_share(lengths, batches) == pytest.approx(14 / 396)  # 91 x 4 - 356, 8 x 4 - 26
    assert answers.padding_share(lengths, [[0, 1, 2, 3], [4, 5, 6, 7]]) == pytest.approx(342 / 724)
    assert answers.length_batches(lengths, 3) == [[5, 1, 3], [7, 6, 2], [4, 0]]
    assert answers.length_batches([], 4) == [] and answers.padding_share([], []) == 0


def test_prompts_are_checked_against_the_vocabulary_and_the_context():
    where = ["t.csv, line 2", "t.csv, line 3"]
    answers.check_prompts([[2, 5], [2, 6, 7]], where, vocabulary=8, context=10, max_new_tokens=7)
    with pytest.raises(DataError, match="t.csv, line 3: the tokenizer gives the token 8, past the model's vocabulary"):
        answers.check_prompts([[2, 5], [2, 8]], where, vocabulary=8, context=None, max_new_tokens=7)
    with pytest.raises(DataError, match="the longest: 3 tokens, t.csv, line 3\\): shorten them."):
        answers.check_prompts([[2, 5], [2, 6, 7]], where, vocabulary=8, context=3, max_new_tokens=1)
    with pytest.raises(DataError) as error:
        answers.check_prompts([[2, 5], [2, 6, 7]], where, vocabulary=8, context=9, max_new_tokens=7)
    assert str(error.value) == (
        "1 of 2 prompts leave no room for MAX_NEW_TOKENS=7 in the model's context of 9 tokens (the longest: 3 tokens, "
        "t.csv, line 3): lower MAX_NEW_TOKENS to 6 or less, or shorten those prompts."
    )


# ---- the model folder and the engine ----


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny stand-in, written as notebook 12 writes it."""
    return engines.tiny_model(tmp_path_factory.mktemp("tiny") / "model", ["how many words: tree old", "apple"], 42)


def test_the_tiny_model_is_read_as_an_export(tiny):
    from transformers import AutoTokenizer

    model = engines.check_model(tiny, "jax")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    assert model.model_type == "gemma3_text" and model.vocabulary == len(tokenizer)
    assert tokenizer.convert_ids_to_tokens(model.stop_ids) == ["<eos>", "<end_of_turn>"]
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " tree old "}]
    text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    assert text == "<bos><start_of_turn>user\nBe brief.\n\ntree old<end_of_turn>\n<start_of_turn>model\n"  # Gemma's
    import sentencepiece

    pieces = sentencepiece.SentencePieceProcessor(model_file=str(tiny / "tokenizer.model"))
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == [2, *pieces.encode(text[len("<bos>") :])]


def copy_model(tiny, folder, drop=()):
    folder.mkdir(parents=True)
    for path in tiny.iterdir():
        if path.name not in drop:
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_notebook_11s_and_10s_output_folders_stand_for_their_merged_model(tiny, tmp_path):
    eleven = tmp_path / "grpo-reasoning"
    copy_model(tiny, eleven / "model")
    (eleven / "lora.safetensors").write_bytes(b"")
    model = engines.check_model(eleven, "transformers")
    assert model.folder == eleven / "model" and "notebook 11's output folder: its model/" in model.describe()
    ten = tmp_path / "llm-finetune"
    copy_model(tiny, ten / "transformers")
    assert engines.check_model(ten, "jax").folder == ten / "transformers"


@pytest.mark.parametrize(
    "files, words",
    [
        (["lora.safetensors"], "holds LoRA weights alone (lora.safetensors): the engines need the model with the LoRA"),
        (["model.lora.h5", "metrics.json"], "notebook 10's transformers/ (run 10 with EXPORT_TRANSFORMERS=True)"),
        (["model.weights.h5", "config.json"], "no *.safetensors weights (it is a KerasHub preset, which no engine"),
    ],
)
def test_lora_weights_alone_or_a_keras_preset_are_refused_naming_the_merged_model(tmp_path, files, words):
    for name in files:
        (tmp_path / name).write_bytes(b"{}")
    with pytest.raises(DataError) as error:
        engines.check_model(tmp_path, "auto")
    assert words in str(error.value)


def test_a_folder_without_tokenizer_or_with_a_damaged_config_or_another_family_for_jax(tiny, tmp_path):
    bare = copy_model(tiny, tmp_path / "bare", drop=("tokenizer.model",))
    with pytest.raises(DataError, match="has no tokenizer \\(tokenizer.json or tokenizer.model\\): copy the tokenizer"):
        engines.check_model(bare, "transformers")
    cut = copy_model(tiny, tmp_path / "cut")
    (cut / "model.safetensors").write_bytes((tiny / "model.safetensors").read_bytes()[:5000])
    with pytest.raises(
        DataError, match="model.safetensors cannot be read as safetensors .*: it is damaged or cut short"
    ):
        engines.check_model(cut, "transformers")
    damaged = copy_model(tiny, tmp_path / "damaged")
    (damaged / "config.json").write_text('{"vocab_size": 3')
    with pytest.raises(DataError, match="config.json is not JSON .*: it is damaged or cut short"):
        engines.check_model(damaged, "transformers")
    qwen = copy_model(tiny, tmp_path / "qwen")
    (qwen / "config.json").write_text(json.dumps({"model_type": "qwen3", "vocab_size": 320}))
    assert engines.check_model(qwen, "transformers").model_type == "qwen3"
    with pytest.raises(ParameterError, match="ENGINE='jax' runs Gemma 3 and Gemma 2 .* is 'qwen3': use ENGINE='trans"):
        engines.check_model(qwen, "jax")


def test_model_auto_is_the_tiny_stand_in_in_the_smoke_profile_else_the_one_model_attached(tiny, tmp_path):
    environment = nbenv._Environment("kaggle", tmp_path / "input", tmp_path / "work", False)
    assert engines.find_model("auto", smoke=True, environment=environment)[0] is None
    with pytest.raises(ParameterError, match="looks for one model folder attached .* and found none: attach notebook"):
        engines.find_model("auto", smoke=False, environment=environment)
    copy_model(tiny, tmp_path / "input" / "my-grpo-run" / "grpo-reasoning" / "model")
    folder, why = engines.find_model("auto", smoke=False, environment=environment)
    assert folder == tmp_path / "input" / "my-grpo-run" / "grpo-reasoning" / "model" and "the one model" in why
    assert engines.find_model(str(folder / "config.json"), smoke=False)[0] == folder


def test_the_engine_named_must_be_installed_and_auto_picks_what_is():
    torch = importlib.util.find_spec("torch") is not None
    engine, device, why = engines.pick_engine("auto")
    assert (engine, device) == (("transformers", "cpu") if torch else ("jax", "cpu")) and why.startswith(
        "ENGINE='auto'"
    )
    with pytest.raises(ParameterError, match="ENGINE='vllm' needs vllm.*, not installed here: pip install vllm"):
        engines.pick_engine("vllm")
    if not torch:  # the main environment: Kaggle's TPU image lacks vLLM, ours torch
        with pytest.raises(ParameterError, match="ENGINE='transformers' needs torch, not installed here: pip install"):
            engines.pick_engine("transformers")


def test_on_a_tpu_auto_picks_jax(monkeypatch):
    monkeypatch.setenv("ISTPUVM", "1")
    assert engines.pick_engine("auto")[:2] == ("jax", "tpu")


# ---- the notebook's first cell ----


def first_cell(tmp_path, **injected):
    """Notebook 12's parameters cell, a cell injecting `injected` as papermill writes it, and its setup cell up to
    where it takes OUTPUT_DIR, run in this process."""
    cells = [c.source for c in jupytext.read(NOTEBOOK).cells if c.cell_type == "code"]
    setup = next(c for c in cells if "params.check_parameters(" in c).split("\nenvironment = env.detect()")[0]
    written = {
        n: f"float('{v}')" if isinstance(v, float) and not math.isfinite(v) else repr(v) for n, v in injected.items()
    }
    cell = "# Parameters\n" + "".join(f"{name} = {value}\n" for name, value in written.items())
    namespace: dict = {}
    exec(cells[0] + "\n" + cell, namespace)
    exec(setup, {**namespace, "In": ["", cells[0], cell, setup]})


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("ENGINE", "torch", "ENGINE='torch' is not allowed: use one of 'auto', 'vllm', 'transformers', 'jax'"),
        ("TEMPERATURE", -0.5, "TEMPERATURE=-0.5: give a number from 0 (greedy) to 10."),
        ("TEMPERATURE", float("nan"), "TEMPERATURE=nan: give a number from 0"),
        ("BATCH_SIZE", 0, "Parameter BATCH_SIZE=0 must be >= 1"),
        ("MAX_NEW_TOKENS", 0, "Parameter MAX_NEW_TOKENS=0 must be >= 1"),
        ("TIME_BUDGET", 0.0, "TIME_BUDGET=0.0: give the minutes generation may take"),
        ("TIME_BUDGET", float("inf"), "TIME_BUDGET=inf: give the minutes"),
        ("PROFILE", "fast", "PROFILE='fast' is not allowed"),
        ("SEED", -1, "Parameter SEED=-1 must be >= 0"),
        ("BATCH_SIZE", 2.5, "BATCH_SIZE=2.5 is a float, not an int"),
    ],
)
def test_bad_parameters_stop_in_the_first_cell(tmp_path, name, value, words):
    first_cell(tmp_path, TEMPERATURE=0.7, BATCH_SIZE=4)  # good values go on
    with pytest.raises(ParameterError) as error:
        first_cell(tmp_path, **{name: value})
    assert words in str(error.value)


def test_the_notebook_checks_everything_before_it_loads_a_model():
    source = NOTEBOOK.read_text()
    order = [
        "params.check_parameters(",
        "staging.start(",
        "engines.pick_engine(",
        "answers.load_test(",
        "engines.check_model(",
        "answers.check_prompts(",
        '= {"transformers": load_transformers',
        "test.write_submission(",
        "outputs.publish()",
    ]
    assert [source.index(step) for step in order] == sorted(source.index(step) for step in order)
    assert export.save_gemma.__module__ == "nbkit.llm.export"  # the stand-in is written as 11 writes its model
    assert np.array_equal(answers.length_batches([3, 3], 1), [[0], [1]])
