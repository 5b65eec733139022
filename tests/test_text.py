"""Text competitions (notebook 08, nbkit.text): the CSV files checked before any training, each bad input one
clear error naming the file, column or row; scores and submission.csv against answers worked apart. The notebook's
runs: nbval's (the generated Watson sample) and tests/matrix/test_smoke_runs.py's (bundled, data in another form)."""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path
from types import SimpleNamespace

import jupytext
import numpy as np
import pytest
from conftest import REPO

from nbkit.env import detect
from nbkit.errors import DataError, ParameterError
from nbkit.inputs import presets
from nbkit.text import competition as text
from nbkit.text import sample as text_sample

WATSON = ("id", ("premise", "hypothesis"), "label", "language")


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header, *rows])


def read_csv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def watson(tmp_path_factory) -> Path:
    return text_sample.make(tmp_path_factory.mktemp("watson") / "data")


def load(folder: Path, *args, **kwargs) -> text._TextData:
    return text.load_data(str(folder), *(args or WATSON), environment=detect(), **kwargs)


def label_of(hypothesis: str, language: str) -> int:
    """The sample's rule, read back from a hypothesis: 2 with its language's "not", 1 with its "maybe", else 0."""
    _, _, negation, maybe, _ = next(entry for entry in text_sample._LANGUAGES if entry[1] == language)
    return 2 if negation in hypothesis.split() else 1 if maybe in hypothesis else 0


def test_the_sample_is_the_competitions_form_and_follows_its_rule(watson):
    data = load(watson)
    assert read_csv(watson / "train.csv")[0] == ["id", "premise", "hypothesis", "lang_abv", "language", "label"]
    assert read_csv(watson / "test.csv")[0] == ["id", "premise", "hypothesis", "lang_abv", "language"]
    assert read_csv(watson / "sample_submission.csv")[0] == ["id", "prediction"]
    assert data.classes == ["0", "1", "2"] and data.train.count == 1200 and data.test.count == 240
    assert len(set(data.train.languages)) == 15 and data.sample_ids == data.test.ids
    rule = [label_of(h, lang) for h, lang in zip(data.train.texts[1], data.train.languages)]
    assert rule == list(data.train.labels)  # the label is learnable from the hypothesis alone


def edit(source: Path, target: Path, name: str, change) -> Path:
    """A copy of the data folder with `change(rows)` applied to file `name` (rows include the header)."""
    target.mkdir()
    for path in source.iterdir():
        rows = read_csv(path)
        if path.name == name:
            change(rows)
        with open(target / path.name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)
    return target


def set_cell(row: int, column: int, value: str):
    def change(rows):
        rows[row][column] = value

    return change


@pytest.mark.parametrize(
    "name, change, message",
    [
        (
            "train.csv",
            set_cell(0, 2, "hypotesis"),
            r"train.csv has no column 'hypothesis' \(TEXT_COLUMNS\).*Did you mean 'hypotesis'",
        ),
        ("test.csv", set_cell(0, 0, "ID"), r"test.csv has no column 'id' \(ID_COLUMN\)"),
        ("train.csv", set_cell(0, 5, "labels"), r"no column 'label' \(LABEL_COLUMN\)"),
        ("train.csv", set_cell(7, 1, "  "), r"train.csv, line 8 \(id '[0-9a-f]+'\): column 'premise' is empty"),
        ("train.csv", set_cell(9, 5, ""), r"line 10 .*column 'label' is empty"),
        (
            "train.csv",
            set_cell(5, 5, "7"),
            r"1 of the 4 label values are on one row only: '7' \(train.csv line 6 \(id '[0-9a-f]+'\)\)",
        ),
        (
            "train.csv",
            lambda rows: [r.__setitem__(5, "-1") for r in rows[1:3]],
            r"values are -1, 0, 1, 2, not the classes 0..3",
        ),
        ("train.csv", lambda rows: [r.__setitem__(0, "x1") for r in rows[3:5]], r"id 'x1' is on line 4 and line 5"),
        ("test.csv", set_cell(3, 0, "not-in-sample"), r"1 test ids are not in the sample \(e.g. \['not-in-sample'\]\)"),
        (
            "sample_submission.csv",
            lambda rows: rows.append(list(rows[1])),
            r"sample_submission.csv: id '[0-9a-f]+' is on line \d+ and line \d+",
        ),
        ("train.csv", lambda rows: rows[3].pop(), r"train.csv line 4 has 5 cells, the header 6: quote a cell"),
    ],
    ids=[
        "misspelt text column",
        "test file without the id column",
        "misspelt label column",
        "empty text",
        "empty label",
        "a label on one row",
        "labels outside 0..K-1",
        "repeated id",
        "a test id missing from the sample",
        "a sample id twice",
        "a short row",
    ],
)
def test_bad_data_is_one_clear_error_naming_the_file_column_or_row(watson, tmp_path, name, change, message):
    with pytest.raises(DataError, match=message):
        load(edit(watson, tmp_path / "data", name, change))


def test_missing_files_and_bad_parameters_are_said(watson, tmp_path):
    with pytest.raises(DataError, match="DATA_ROOT='.*nowhere' does not exist"):
        load(tmp_path / "nowhere")
    only_train = tmp_path / "only-train"
    only_train.mkdir()
    (only_train / "train.csv").write_bytes((watson / "train.csv").read_bytes())
    assert load(only_train).test is None  # training data alone: everything but the submission
    (only_train / "test.csv").write_bytes((watson / "test.csv").read_bytes())
    with pytest.raises(DataError, match="has test.csv but not sample_submission.csv"):
        load(only_train)
    with pytest.raises(ParameterError, match="METRIC='roc_auc' scores two classes; this data has 3"):
        text.check_metric("roc_auc", 3)
    with pytest.raises(ParameterError, match="METRIC='auc' is not one of accuracy, f1_macro, roc_auc"):
        text.check_metric("auc", 2)


def test_roc_auc_is_the_share_of_positive_negative_pairs_ranked_right():
    rng = np.random.default_rng(3)
    positive = rng.integers(0, 2, 300).astype(bool)
    score = np.round(rng.random(300) + positive * 0.3, 1)  # rounded: many ties
    pairs = [(p, n) for p, n in itertools.product(score[positive], score[~positive])]
    by_pairs = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs])
    assert text._roc_auc(positive, score) == pytest.approx(by_pairs, abs=1e-12)
    with pytest.raises(DataError, match="needs rows of both classes"):
        text._roc_auc(np.ones(4, bool), np.arange(4.0))


def test_the_submission_follows_the_sample_in_header_and_order(watson, tmp_path):
    data = load(watson)
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3), data.test.count)
    order = rng.permutation(data.test.count)  # predictions in another order than the sample's
    ids = [data.test.ids[i] for i in order]
    path = data.write_submission(ids, probabilities[order], "accuracy", tmp_path / "submission.csv")
    rows = read_csv(path)
    assert rows[0] == ["id", "prediction"] and [r[0] for r in rows[1:]] == data.sample_ids
    assert [int(r[1]) for r in rows[1:]] == list(probabilities.argmax(1))
    with pytest.raises(DataError, match="not ids of sample_submission.csv"):
        data.write_submission(ids[:-1] + ["other"], probabilities, "accuracy", tmp_path / "wrong.csv")


def test_a_roc_auc_submission_holds_the_second_class_probability_the_score_ranks(tmp_path):
    """Two classes ("0", "1": train.csv's values in class order): each row's probability of class 1, the one
    `score` ranks for ROC AUC; the first class's probability would rank every test row the wrong way round."""
    folder = tmp_path / "toxic"
    folder.mkdir()
    write_csv(folder / "train.csv", ["id", "comment_text", "toxic"], [[f"r{i}", f"text {i}", i % 2] for i in range(6)])
    write_csv(folder / "test.csv", ["id", "comment_text"], [["b", "x"], ["a", "y"], ["c", "z"]])
    write_csv(folder / "sample_submission.csv", ["id", "toxic"], [["a", 0.5], ["b", 0.5], ["c", 0.5]])
    data = load(folder, "id", ("comment_text",), "toxic", "lang")
    assert data.classes == ["0", "1"]
    probabilities = np.array([[0.2, 0.8], [0.9, 0.1], [0.35, 0.65]])  # b, a, c: p(class 0), p(class 1)
    path = data.write_submission(["b", "a", "c"], probabilities, "roc_auc", tmp_path / "submission.csv")
    assert read_csv(path) == [["id", "toxic"], ["a", "0.100000"], ["b", "0.800000"], ["c", "0.650000"]]
    _, scores = data.score(np.array([1, 0, 1]), probabilities, "roc_auc")  # b and c toxic: ranked above a
    assert scores["roc_auc"] == 1.0


def test_scores_match_numpy(watson):
    data = load(watson)
    labels = data.train.labels[:200]
    probabilities = np.random.default_rng(1).dirichlet(np.ones(3), 200)
    confusion, scores = data.score(labels, probabilities, "f1_macro")
    predicted = probabilities.argmax(1)
    assert scores["accuracy"] == pytest.approx(np.mean(predicted == labels))
    f1 = []
    for k in range(3):
        tp, fp, fn = (
            np.sum((predicted == k) & (labels == k)),
            np.sum((predicted == k) & (labels != k)),
            np.sum((predicted != k) & (labels == k)),
        )
        f1.append(2 * tp / (2 * tp + fp + fn))
    assert scores["f1_macro"] == pytest.approx(np.mean(f1)) and scores["metric"] == "f1_macro"
    assert confusion[labels[0], predicted[0]] >= 1 and confusion.sum() == 200


def preset(folder: Path, missing: str = "", damaged: str = "", empty: bool = False) -> Path:
    """A KerasHub preset folder's files, with its config's keys (max_sequence_length 512) unless `empty`."""
    folder.mkdir(parents=True)
    config = {"class_name": "BertBackbone", "registered_name": "keras_hub>BertBackbone"}
    for name in ("config.json", "metadata.json", "tokenizer.json", "model.weights.h5"):
        content = {} if empty else {**config, "config": {"max_sequence_length": 512}}
        if name != missing:
            (folder / name).write_text("{" if name == damaged else json.dumps(content))
    return folder


def test_a_preset_is_found_where_kaggle_attaches_it_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("NBKIT_KAGGLEHUB", "off")
    environment = detect({"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "NBKIT_INPUT_DIR": str(tmp_path)})
    found, why = presets.find_preset("bert_base_multi", environment=environment)
    assert found is None and "keras/bert/keras/bert_base_multi/3 is not attached" in why and "--model keras/bert" in why
    attached = preset(tmp_path / "bert" / "keras" / "bert_base_multi" / "3")
    assert presets.find_preset("bert_base_multi", environment=environment) == (
        str(attached),
        "keras/bert/keras/bert_base_multi/3 is attached as a Kaggle Model",
    )
    with pytest.raises(DataError, match=r"incomplete: tokenizer.json missing"):
        presets.find_preset(str(preset(tmp_path / "partial", missing="tokenizer.json")))
    with pytest.raises(DataError, match=r"config.json is damaged"):
        presets.find_preset(str(preset(tmp_path / "damaged", damaged="config.json")))
    with pytest.raises(
        ParameterError, match=r"PRESET='bert_base_mult' is not a KerasHub preset \(close: bert_base_multi"
    ):
        presets.find_preset("bert_base_mult", environment=environment)
    # The sweep of issue 59: a Kaggle Models handle as PRESET is looked up as one (it was "not a folder"), and a
    # Hugging Face folder is named as such (it was "incomplete: ... attach the whole model version again").
    found, why = presets.find_preset("keras/gemma4/keras/gemma4_instruct_2b", environment=environment)
    assert found is None and "keras/gemma4/keras/gemma4_instruct_2b is not attached" in why
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "gemma4_text"}')
    with pytest.raises(DataError, match=r"hf is a Hugging Face model folder .* notebook 11's and 12's MODEL"):
        presets.find_preset(str(tmp_path / "hf"))


def relabel(rows: list[list[str]], old: str, new: str, every: int = 2) -> None:
    """Every `every`-th row labelled `old` is labelled `new` (train.csv's label is its last column)."""
    for row in [r for r in rows[1:] if r[-1] == old][::every]:
        row[-1] = new


def test_labels_follow_the_converters_rules_number_forms_case_and_two_classes(watson, tmp_path):
    """Issue 45 #1, #2: 1 and 1.0 are one class (written 1); Entailment and entailment an error naming both rows;
    a single label value stops before training, as the converter does (nbkit.convert.labels.class_list)."""
    data = load(edit(watson, tmp_path / "forms", "train.csv", lambda rows: relabel(rows, "1", "1.0")))
    assert data.classes == ["0", "1", "2"] and list(data.train.labels) == list(load(watson).train.labels)
    words = {"0": "Entailment", "1": "neutral", "2": "contradiction"}

    def cased(rows):
        for row in rows[1:]:
            row[-1] = words[row[-1]]
        relabel(rows, "Entailment", "entailment", every=3)

    with pytest.raises(
        DataError,
        match=r"Labels '(E|e)ntailment' \(train.csv line \d+ \(id '\w+'\)\) "
        r"and '(?!\1)[Ee]ntailment' \(train.csv line \d+",
    ):
        load(edit(watson, tmp_path / "cased", "train.csv", cased))
    one = edit(watson, tmp_path / "one", "train.csv", lambda rows: [r.__setitem__(-1, "0") for r in rows[1:]])
    with pytest.raises(DataError, match="a classifier needs at least two"):
        load(one)


def test_the_submission_keeps_the_samples_header_other_columns_and_id_name(watson, tmp_path):
    """Issue 45 #3, #9: a sample `ID,prediction,Usage` (another id column than train/test's) gives a submission of
    that header, Usage as the sample has it; both said under the counts."""

    def usage(rows):
        rows[0] = ["ID", "prediction", "Usage"]
        for i, row in enumerate(rows[1:]):
            row.append("Public" if i % 2 else "Private")

    data = load(edit(watson, tmp_path / "data", "sample_submission.csv", usage))
    said = data.describe()
    assert "id column is 'ID'" in said and "other columns (Usage)" in said
    probabilities = np.random.default_rng(0).dirichlet(np.ones(3), data.test.count)
    rows = read_csv(data.write_submission(data.test.ids, probabilities, "accuracy", tmp_path / "submission.csv"))
    sample = read_csv(tmp_path / "data" / "sample_submission.csv")
    assert rows[0] == ["ID", "prediction", "Usage"] and [(r[0], r[2]) for r in rows] == [(r[0], r[2]) for r in sample]
    by_id = dict(zip(data.test.ids, probabilities.argmax(1)))
    assert [int(r[1]) for r in rows[1:]] == [by_id[r[0]] for r in rows[1:]]


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_semicolon_and_tab_files_and_spaced_headers_are_read_as_the_converter_reads_them(watson, tmp_path, delimiter):
    """Issue 45 #9: `;` or tab separated files (a spreadsheet's), a header written `id, premise`: the same data."""
    folder = tmp_path / "data"
    folder.mkdir()
    for path in watson.iterdir():
        rows = read_csv(path)
        rows[0] = [f" {name}" if i else name for i, name in enumerate(rows[0])]
        with open(folder / path.name, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, delimiter=delimiter).writerows(rows)
    data, original = load(folder), load(watson)
    assert data.classes == original.classes and data.train.texts == original.train.texts
    assert list(data.train.labels) == list(original.train.labels) and data.sample_ids == original.sample_ids


def test_long_texts_text_labels_empty_test_texts_and_empty_test_files(watson, tmp_path):
    """Issue 45 #10: a text over csv's 131,072-character limit is read; LABEL_COLUMN naming a text column is a short
    error that counts the values; an empty test text is kept (its row is a line of the submission) and said; a
    header-only test.csv says what to do."""
    long = "word " * 40_000
    data = load(edit(watson, tmp_path / "long", "train.csv", set_cell(4, 1, long)))
    assert data.train.texts[0][3] == long.strip()
    with pytest.raises(DataError) as error:
        load(tmp_path / "long", "id", ("hypothesis",), "premise", "language")
    assert len(str(error.value)) < 600 and re.search(r"\d{3,} of the \d{3,} premise values are on one row", str(error))
    data = load(edit(watson, tmp_path / "empty", "test.csv", set_cell(3, 2, "")))
    assert data.test.texts[1][2] == "" and re.search(
        r"test.csv rows with an empty text: 1 \(line 4 \(id '[0-9a-f]+'\)\); kept, the submission needs them",
        data.describe(),
    )
    with pytest.raises(DataError, match="test.csv has a header but no rows: give its rows. To train without a"):
        load(edit(watson, tmp_path / "header-only", "test.csv", lambda rows: rows.__delitem__(slice(1, None))))


def test_languages_blank_or_missing_and_which_class_roc_auc_scores(watson, tmp_path):
    """Issue 45 #13: a blank language is "(blank)"; a LANGUAGE_COLUMN the data lacks is said; roc_auc names the class
    whose probability it scores and writes."""
    data = load(edit(watson, tmp_path / "blank", "train.csv", set_cell(2, 4, " ")))
    assert data.train.languages[1] == "(blank)"
    data = load(watson, "id", ("premise", "hypothesis"), "label", "lang")
    assert (
        data.train.languages is None and "no column 'lang' (LANGUAGE_COLUMN): no scores per language" in data.describe()
    )
    binary = edit(watson, tmp_path / "binary", "train.csv", lambda rows: relabel(rows, "2", "1", every=1))
    data = load(binary)
    labels = data.train.labels[:100]
    _, scores = data.score(labels, np.eye(2)[labels], "roc_auc")
    assert scores["roc_auc"] == 1.0 and scores["positive_class"] == "1"


def test_a_presets_config_is_checked_and_bounds_the_sequence_length(tmp_path):
    """Issue 45 #11, #12: config files of `{}` are not a preset; SEQUENCE_LENGTH over the backbone's positions stops
    in the configuration cell, before the tokenizer and model are built."""
    with pytest.raises(DataError, match=r"config.json is not a KerasHub preset's \(it lacks class_name, config, regis"):
        presets.find_preset(str(preset(tmp_path / "empty", empty=True)))
    folder = presets.find_preset(str(preset(tmp_path / "bert")))[0]
    assert presets.check_sequence_length(folder, 512) == 512 and presets.check_sequence_length(None, 100_000) == 100_000
    with pytest.raises(ParameterError, match=r"SEQUENCE_LENGTH=100000: .* positions for 512 tokens at most"):
        presets.check_sequence_length(folder, 100_000)
    source = (REPO / "notebooks" / "08_text_classifier.py").read_text()
    assert source.index("presets.check_sequence_length(") < source.index("preprocessor = build_preprocessor()")


def configuration(**parameters) -> dict:
    """Notebook 08's configuration cell run on `parameters` (a CPU of one replica): its namespace afterwards."""
    cell = next(
        c.source for c in jupytext.read(REPO / "notebooks" / "08_text_classifier.py").cells if "SMOKE =" in c.source
    )
    namespace = {"presets": presets, "DataError": DataError, "acc": SimpleNamespace(kind="cpu", num_replicas=1)}
    namespace |= {"PRESET": "tiny", "PROFILE": "auto", "PER_REPLICA_BATCH": 16, **parameters}
    exec(cell, namespace)
    return namespace


def test_values_the_user_gives_are_kept_and_zero_is_the_models_choice_said(capsys, tmp_path):
    """Issue 45 #4: `-p PRESET tiny -p PROFILE full -p EPOCHS 2 -p LEARNING_RATE 0.0001` trains 2 epochs at 1e-4;
    EPOCHS and LEARNING_RATE 0 are the model's choice and the smoke profile's cut of SEQUENCE_LENGTH, each said."""
    given = configuration(PROFILE="full", EPOCHS=2, LEARNING_RATE=1e-4, SEQUENCE_LENGTH=128)
    assert (given["EPOCHS"], given["LEARNING_RATE"], given["SEQUENCE_LENGTH"]) == (2, 1e-4, 128)
    assert "full: 2 epochs, 128 tokens, global batch 16, peak lr 0.0001\n" in capsys.readouterr().out
    chosen = configuration(EPOCHS=0, LEARNING_RATE=0.0, SEQUENCE_LENGTH=128)
    assert (chosen["EPOCHS"], chosen["LEARNING_RATE"], chosen["SEQUENCE_LENGTH"]) == (10, 2e-3, 32)
    assert (
        "smoke: 10 epochs, 32 tokens, global batch 16, peak lr 0.002 (EPOCHS=0: the tiny BERT's 10; LEARNING_RATE=0: "
        "the tiny BERT's 0.002; "
        "SEQUENCE_LENGTH=128 cut to 32 by the smoke profile)" in capsys.readouterr().out
    )
    folder = str(preset(tmp_path / "bert"))
    pretrained = configuration(PRESET=folder, PROFILE="full", EPOCHS=0, LEARNING_RATE=0.0, SEQUENCE_LENGTH=512)
    assert (pretrained["EPOCHS"], pretrained["LEARNING_RATE"], pretrained["SEQUENCE_LENGTH"]) == (3, 2e-5, 512)
    with pytest.raises(ParameterError, match="SEQUENCE_LENGTH=100000: the preset's backbone has positions for 512"):
        configuration(PRESET=folder, PROFILE="full", EPOCHS=0, LEARNING_RATE=0.0, SEQUENCE_LENGTH=100_000)
