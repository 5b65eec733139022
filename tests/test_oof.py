"""Out-of-fold predictions (nbkit.images.oof): each fold's oof.csv, and the gathering of the folds
into one score, refused unless every labeled id is there exactly once."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
from PIL import Image

from nbkit import metrics, tfrecord
from nbkit.convert.run import convert
from nbkit.errors import DataError
from nbkit.images import oof
from nbkit.images.description import Description
from nbkit.publish import cli

DATASET = Description(
    title="t",
    classes=("a", "b", "c"),
    label_values=("H", "S", 103),
    image_sizes=(8,),
    metric="qwk",
    folds=(("f0",), ("f1",)),
)


def fold_file(tmp_path, fold, ids, labels, predicted):
    probabilities = np.eye(3)[predicted] * 0.8 + 0.2 / 3
    return metrics.write_oof(ids, labels, probabilities, fold, DATASET, tmp_path / f"fold{fold}" / "oof.csv")


def test_the_folds_gather_into_one_score_of_every_labeled_picture(tmp_path):
    first = fold_file(tmp_path, 0, ["x", "y"], [0, 1], [0, 2])
    second = fold_file(tmp_path, 1, ["z"], [2], [2])
    assert read_csv(first) == [
        ["id", "label", "fold", "p:H", "p:S", "p:103"],
        ["x", "H", "0", "0.866667", "0.0666667", "0.0666667"],
        ["y", "S", "0", "0.0666667", "0.0666667", "0.866667"],
    ]
    gathered = oof.gather([first, second], DATASET, classes={"z": 2, "y": 1, "x": 0})
    assert gathered.ids == ["x", "y", "z"] and gathered.folds.tolist() == [0, 0, 1]
    assert gathered.labels.tolist() == [0, 1, 2]  # read back as written: labels, and probabilities to 6 digits
    np.testing.assert_allclose(gathered.probabilities, np.eye(3)[[0, 2, 2]] * 0.8 + 0.2 / 3, rtol=1e-6)
    scores = metrics.of_predictions(gathered.labels, gathered.probabilities, "qwk")[
        1
    ]  # confusion [[1,0,0],[0,0,1],[0,0,1]]: kappa 1 - 0.25 / 1.25 by hand
    assert scores["accuracy"] == pytest.approx(2 / 3) and scores["qwk"] == pytest.approx(0.8)


@pytest.mark.parametrize(
    "files, labeled, message",
    [
        (lambda t: [fold_file(t, 0, ["x"], [0], [0])], None, r"hold folds \[0\], but the data has 2 folds"),
        (
            lambda t: [fold_file(t, 0, ["x"], [0], [0]), fold_file(t, 1, ["x"], [0], [0])],
            None,
            "Id 'x' is predicted in fold 0 and in fold 1: folds overlap",
        ),
        (
            lambda t: [fold_file(t, 0, ["x"], [0], [0]), fold_file(t, 1, ["y"], [1], [1])],
            {"x": 0, "y": 1, "w": 2},
            r"miss 1 labeled ids \(e.g. \['w'\]\) and hold 0",
        ),
    ],
    ids=["a fold missing", "an id twice", "a labeled id missing"],
)
def test_gathering_refuses_what_would_score_wrong(tmp_path, files, labeled, message):
    with pytest.raises(DataError, match=message):
        oof.gather(files(tmp_path), DATASET, classes=labeled)


def test_an_oof_file_of_other_data_is_named(tmp_path):
    path = tmp_path / "oof.csv"
    path.write_text("id,label,fold,p:H,p:S\nx,H,0,0.5,0.5\n")
    with pytest.raises(DataError, match="oof.csv: its columns are not those of this dataset"):
        oof._read(path, DATASET)


# ---- python -m nbkit oof: the gathered table and score, read back with csv and json ----------------

LABELS = {"H": 4, "S": 4, "103": 4}  # label values that are not their indices: the data's are ("103", "H", "S")


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """A tiny converted dataset in 2 folds with labels H, S, 103, the train.csv it came from, and the same
    pictures converted without folds."""
    root = tmp_path_factory.mktemp("folded")
    (root / "pics").mkdir()
    rows = [(f"{label}{i}.png", label) for label, count in LABELS.items() for i in range(count)]
    for index, (name, _) in enumerate(rows):
        Image.new("RGB", (12, 10), (20 * index, 90, 200 - 10 * index)).save(root / "pics" / name)
    with open(root / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([("image_id", "label"), *rows])
    folded = convert(root / "pics", root / "folded", 32, labels=root / "train.csv", folds=2, workers=1)
    plain = convert(root / "pics", root / "plain", 32, labels=root / "train.csv", workers=1)
    return folded, plain, dict(rows)


def fold_ids(data):
    """Each fold's ids, read from its files' records."""
    found = json.loads((data / "nbkit-dataset.json").read_text())
    folder = data / "tfrecords-jpeg-32x32" / "train"
    return [
        [
            tfrecord.decode_example(raw)["id"][0].decode()
            for name in files
            for raw in tfrecord.read_records(folder / name)
        ]
        for files in found["folds"]
    ]


def write_fold(folder, fold, ids, labels, probabilities):
    """A fold's oof.csv as 02/05 write it, written here with the csv module."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "oof.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "label", "fold", "p:103", "p:H", "p:S"])
        writer.writerows([i, label, fold, *row] for i, label, row in zip(ids, labels, probabilities))
    return folder


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.fixture
def folds_written(folded, tmp_path):
    """Each fold's oof.csv (fold 0 by its folder, fold 1 by its file), and what each row holds."""
    data, _, label_of = folded
    rng = np.random.default_rng(0)
    expected = []
    for fold, ids in enumerate(fold_ids(data)):
        probabilities = rng.dirichlet(np.ones(3), len(ids)).round(4)
        probabilities[:, 2] = 1 - probabilities[:, :2].sum(axis=1)
        write_fold(tmp_path / f"fold{fold}", fold, ids, [label_of[i] for i in ids], probabilities)
        expected += [(i, label_of[i], fold, row) for i, row in zip(ids, probabilities)]
    return [str(tmp_path / "fold0"), str(tmp_path / "fold1" / "oof.csv")], expected


def run_oof(capsys, *arguments):
    code = cli.main(["oof", *map(str, arguments)])
    out, err = capsys.readouterr()
    return code, out + err


def test_the_command_writes_every_row_with_its_own_fold_and_scores_it(folded, folds_written, tmp_path, capsys):
    data = folded[0]
    files, expected = folds_written
    code, said = run_oof(capsys, *files, "--data", data, "--out", tmp_path / "gathered")
    assert code == 0, said
    header, *rows = read_csv(tmp_path / "gathered" / "oof.csv")
    assert header == ["id", "label", "fold", "p:103", "p:H", "p:S"]
    assert [(i, label, int(fold)) for i, label, fold, *_ in rows] == [
        (i, label, fold) for i, label, fold, _ in expected
    ]
    np.testing.assert_allclose([[float(p) for p in r[3:]] for r in rows], [row for *_, row in expected], atol=1e-6)
    index = {"103": 0, "H": 1, "S": 2}
    accuracy = np.mean([np.argmax(row) == index[label] for _, label, _, row in expected])
    saved = json.loads((tmp_path / "gathered" / "metrics.json").read_text())
    assert saved["metric"] == "accuracy" and saved["accuracy"] == pytest.approx(accuracy)
    assert (saved["folds"], saved["pictures"]) == (2, 12) and "out of fold, 2 folds, 12 pictures" in said
    # the gathered file is a valid input itself, and gathers into the same table
    assert run_oof(capsys, tmp_path / "gathered", "--data", data, "--out", tmp_path / "again")[0] == 0
    assert read_csv(tmp_path / "again" / "oof.csv") == [header, *rows]


def edit_cell(path, row, column, value):
    table = read_csv(path)
    table[row][column] = value
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(table)


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda files, t: edit_cell(f"{files[0]}/oof.csv", 1, 3, "nan"), "1 rows hold no probabilities"),
        (lambda files, t: edit_cell(files[1], 2, 4, "0.9"), "summing to 1"),
        (
            lambda files, t: edit_cell(files[1], 1, 1, {"H": "S"}.get(read_csv(files[1])[1][1], "H")),
            "1 OOF rows give another label than the data",
        ),
        (lambda files, t: files.append(str(t / "fold2")), r"fold2: no such file or folder. Give each fold.s oof.csv"),
        (lambda files, t: (t / "out").write_text("mine"), r"out is in the way of oof.csv"),
        (lambda files, t: (t / "out" / "metrics.json").mkdir(parents=True), r"metrics.json is in the way"),
    ],
    ids=[
        "a NaN probability",
        "probabilities not summing to 1",
        "a label edited",
        "no fold folder",
        "out a file",
        "out holding a folder metrics.json",
    ],
)
def test_the_command_refuses_what_would_score_or_write_wrong(folded, folds_written, tmp_path, capsys, spoil, message):
    files = list(folds_written[0])
    spoil(files, tmp_path)
    code, said = run_oof(capsys, *files, "--data", folded[0], "--out", tmp_path / "out")
    assert code == 1 and re.search(message, said) and "Traceback" not in said
    assert not (tmp_path / "out" / "oof.csv").exists()


def test_the_command_says_unfolded_data_has_no_folds(folded, folds_written, tmp_path, capsys):
    code, said = run_oof(capsys, *folds_written[0], "--data", folded[1], "--out", tmp_path / "out")
    assert code == 1 and "this data has no folds (one train/val split)" in said and "--folds K" in said
    code, said = run_oof(capsys, *folds_written[0], "--data", tmp_path / "nowhere", "--out", tmp_path / "out")
    assert code == 1 and "nowhere does not exist: set DATA_ROOT" in said and "no folds" not in said
