import json

import numpy as np
import pytest

from nbkit.errors import DataError
from nbkit.flowers import evaluate


def test_confusion_and_macro_scores_by_hand():
    labels, predictions = [0, 0, 1, 1, 2], [0, 1, 1, 1, 0]
    counts = evaluate.confusion_matrix(labels, predictions, 4)
    assert counts.tolist() == [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    got = evaluate.scores(counts)
    # per class (0, 1, 2): precision 1/2, 2/3, 0; recall 1/2, 1, 0; class 3 never occurs and is left out
    assert got["accuracy"] == pytest.approx(3 / 5)
    assert got["precision_macro"] == pytest.approx((1 / 2 + 2 / 3 + 0) / 3)
    assert got["recall_macro"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert got["f1_macro"] == pytest.approx((0.5 + 0.8 + 0) / 3)


def test_submission_has_header_and_one_row_per_id(tmp_path):
    path = evaluate.write_submission(["b", "a", "c"], np.array([3, 1, 103]), tmp_path / "submission.csv")
    assert path.read_text() == "id,label\nb,3\na,1\nc,103\n"
    assert evaluate.read_submission(path) == [("b", 3), ("a", 1), ("c", 103)]


def test_submission_refuses_mismatch_and_keeps_the_old_file(tmp_path):
    path = evaluate.write_submission(["a"], [1], tmp_path / "submission.csv")
    with pytest.raises(DataError, match="2 test ids but 1 predictions"):
        evaluate.write_submission(["a", "b"], [1], path)
    with pytest.raises(DataError, match="repeat"):
        evaluate.write_submission(["a", "a"], [1, 2], path)
    assert path.read_text() == "id,label\na,1\n"


def test_read_submission_checks_the_header(tmp_path):
    (tmp_path / "s.csv").write_text("image,label\n")
    with pytest.raises(DataError, match="header"):
        evaluate.read_submission(tmp_path / "s.csv")


def test_metrics_json_holds_plain_numbers(tmp_path):
    path = evaluate.write_metrics({"accuracy": np.float32(0.5), "epochs": 3}, tmp_path / "metrics.json")
    assert json.loads(path.read_text()) == {"accuracy": 0.5, "epochs": 3}
