import json

import numpy as np
import pytest

from nbkit.errors import DataError
from nbkit.images import evaluate
from nbkit.images.description import Description


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


FLOWERS_LIKE = Description(title="t", classes=tuple("abcd"), label_values=(0, 1, 2, 103), image_sizes=(64,))
CASSAVA_LIKE = Description(
    title="c", classes=("healthy", "sick"), label_values=("H", "S"), image_sizes=(64,), id_column="image_id"
)


def test_submission_has_the_datasets_header_and_label_values(tmp_path):
    path = evaluate.write_submission(["b", "a", "c"], np.array([3, 1, 0]), FLOWERS_LIKE, tmp_path / "submission.csv")
    assert path.read_text() == "id,label\nb,103\na,1\nc,0\n"
    assert evaluate.read_submission(path) == (["id", "label"], [("b", "103"), ("a", "1"), ("c", "0")])
    other = evaluate.write_submission(["x.jpg", "y.jpg"], [1, 0], CASSAVA_LIKE, tmp_path / "other.csv")
    assert other.read_text() == "image_id,label\nx.jpg,S\ny.jpg,H\n"


def test_submission_refuses_mismatch_and_keeps_the_old_file(tmp_path):
    path = evaluate.write_submission(["a"], [1], FLOWERS_LIKE, tmp_path / "submission.csv")
    with pytest.raises(DataError, match="2 test ids but 1 predictions"):
        evaluate.write_submission(["a", "b"], [1], FLOWERS_LIKE, path)
    with pytest.raises(DataError, match="repeat"):
        evaluate.write_submission(["a", "a"], [1, 2], FLOWERS_LIKE, path)
    assert path.read_text() == "id,label\na,1\n"


def test_metrics_json_holds_plain_numbers(tmp_path):
    path = evaluate.write_metrics({"accuracy": np.float32(0.5), "epochs": 3}, tmp_path / "metrics.json")
    assert json.loads(path.read_text()) == {"accuracy": 0.5, "epochs": 3}


def test_predictions_are_checked_against_the_same_rows_on_one_device(tmp_path):
    """predict_in_order passes an honest model and stops, before anything is written, on one whose
    batched predictions come back with rows swapped (what keras 3.8 + jax 0.4.35 did on 8 devices)."""
    import keras

    from nbkit import models
    from nbkit.errors import PredictionError
    from nbkit.images import layout, predict, sample

    root = sample.make_sample(tmp_path / "data", image_sizes=(64,), train_per_class=1, val_per_class=2, num_classes=6)
    files = layout.find_files(root, 64, "val")
    keras.utils.set_random_seed(0)
    model = models.small_cnn((64, 64, 3), 6, filters=(8,), dense=16)
    logits, labels = predict.predict_in_order(model, files, 64, labeled=True, global_batch=8)
    assert logits.shape == (12, 6) and len(labels) == 12
    honest = model.predict

    def rows_mixed(dataset, **kwargs):  # each row answered with its neighbour's logits
        return np.roll(honest(dataset, **kwargs), 1, axis=0)

    model.predict = rows_mixed
    with pytest.raises(PredictionError, match=r"Row 0 of the distributed predictions differs.*keras \d"):
        predict.predict_in_order(model, files, 64, labeled=True, global_batch=8)
