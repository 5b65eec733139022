"""Text competitions (notebook 08, nbkit.text): the CSV files checked before any training, each bad input one
clear error naming the file, column or row; scores and submission.csv against answers worked apart. The notebook's
runs: nbval's (the generated Watson sample) and tests/matrix/test_smoke_runs.py's (bundled, data in another form)."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest

from nbkit import text, text_sample
from nbkit.env import detect
from nbkit.errors import DataError, ParameterError

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
        ("train.csv", set_cell(5, 5, "7"), r"the label '7' \(id '[0-9a-f]+'\) occurs on one row only"),
        (
            "train.csv",
            lambda rows: [r.__setitem__(5, "-1") for r in rows[1:3]],
            r"values are \[-1, 0, 1, 2\], not the classes 0..3",
        ),
        ("train.csv", lambda rows: [r.__setitem__(0, "x1") for r in rows[3:5]], r"id 'x1' is on line 4 and line 5"),
        ("test.csv", set_cell(3, 0, "not-in-sample"), r"1 test ids are not in the sample \(e.g. \['not-in-sample'\]\)"),
        (
            "sample_submission.csv",
            lambda rows: rows.append(list(rows[1])),
            r"sample_submission.csv: id '[0-9a-f]+' is on line \d+ and line \d+",
        ),
        ("train.csv", lambda rows: rows[3].pop(), r"train.csv, line 4: 6 columns expected"),
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


def preset(folder: Path, missing: str = "", damaged: str = "") -> Path:
    folder.mkdir(parents=True)
    for name in ("config.json", "metadata.json", "tokenizer.json", "model.weights.h5"):
        if name != missing:
            (folder / name).write_text("{" if name == damaged else "{}")
    return folder


def test_a_preset_is_found_where_kaggle_attaches_it_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("NBKIT_KAGGLEHUB", "off")
    environment = detect({"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "NBKIT_INPUT_DIR": str(tmp_path)})
    found, why = text.find_preset("bert_base_multi", environment=environment)
    assert found is None and "keras/bert/keras/bert_base_multi/3 is not attached" in why and "--model keras/bert" in why
    attached = preset(tmp_path / "bert" / "keras" / "bert_base_multi" / "3")
    assert text.find_preset("bert_base_multi", environment=environment) == (
        str(attached),
        "keras/bert/keras/bert_base_multi/3 is attached as a Kaggle Model",
    )
    with pytest.raises(DataError, match=r"incomplete: tokenizer.json missing"):
        text.find_preset(str(preset(tmp_path / "partial", missing="tokenizer.json")))
    with pytest.raises(DataError, match=r"config.json is damaged"):
        text.find_preset(str(preset(tmp_path / "damaged", damaged="config.json")))
    with pytest.raises(
        ParameterError, match=r"PRESET='bert_base_mult' is not a KerasHub preset \(close: bert_base_multi"
    ):
        text.find_preset("bert_base_mult", environment=environment)
