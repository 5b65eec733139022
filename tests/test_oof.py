"""Out-of-fold predictions (nbkit.images.oof): each fold's oof.csv, and the gathering of the folds
into one score, refused unless every labeled id is there exactly once."""

from __future__ import annotations

import numpy as np
import pytest

from nbkit.errors import DataError
from nbkit.images import metrics, oof
from nbkit.images.description import Description

DATASET = Description(
    title="t", classes=("a", "b", "c"), label_values=(0, 1, 2), image_sizes=(8,), metric="qwk", folds=(("f0",), ("f1",))
)


def fold_file(tmp_path, fold, ids, labels, predicted):
    probabilities = np.eye(3)[predicted] * 0.8 + 0.2 / 3
    return oof.write(ids, labels, probabilities, fold, DATASET, tmp_path / f"fold{fold}" / "oof.csv")


def test_the_folds_gather_into_one_score_of_every_labeled_picture(tmp_path):
    first = fold_file(tmp_path, 0, ["x", "y"], [0, 1], [0, 2])
    second = fold_file(tmp_path, 1, ["z"], [2], [2])
    assert first.read_text().splitlines()[0] == "id,label,fold,p:0,p:1,p:2"
    gathered = oof.gather([first, second], DATASET, labeled_ids=["z", "y", "x"])
    assert gathered.ids == ["x", "y", "z"] and gathered.folds.tolist() == [0, 0, 1]
    scores = gathered.scores("qwk")
    expected = metrics._scores(metrics._confusion_matrix([0, 1, 2], [0, 2, 2], 3), "qwk")
    assert scores == expected and scores["accuracy"] == pytest.approx(2 / 3)


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
            ["x", "y", "w"],
            r"miss 1 labeled ids \(e.g. \['w'\]\) and hold 0",
        ),
    ],
    ids=["a fold missing", "an id twice", "a labeled id missing"],
)
def test_gathering_refuses_what_would_score_wrong(tmp_path, files, labeled, message):
    with pytest.raises(DataError, match=message):
        oof.gather(files(tmp_path), DATASET, labeled_ids=labeled)


def test_an_oof_file_of_other_data_is_named(tmp_path):
    path = tmp_path / "oof.csv"
    path.write_text("id,label,fold,p:0,p:1\nx,0,0,0.5,0.5\n")
    with pytest.raises(DataError, match="oof.csv: its columns are not those of this dataset"):
        oof._read(path, DATASET)
