import csv
import json
from pathlib import Path

import numpy as np
import pytest

from nbkit import atomic, metrics, plots
from nbkit.errors import DataError, ParameterError
from nbkit.images import checks
from nbkit.images.description import Description


def test_confusion_and_macro_scores_by_hand():
    labels, predictions = [0, 0, 1, 1, 2], [0, 1, 1, 1, 0]
    counts = metrics._confusion_matrix(labels, predictions, 4)
    assert counts.tolist() == [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    got = metrics._scores(counts)
    # per class (0, 1, 2): precision 1/2, 2/3, 0; recall 1/2, 1, 0; class 3 never occurs and is left out
    assert got["accuracy"] == pytest.approx(3 / 5)
    assert got["precision_macro"] == pytest.approx((1 / 2 + 2 / 3 + 0) / 3)
    assert got["recall_macro"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert got["f1_macro"] == pytest.approx((0.5 + 0.8 + 0) / 3)
    assert got["metric"] == "accuracy" and "qwk" not in got
    assert metrics.describe(got) == "validation accuracy 0.600 (the competition's metric)"


# An asymmetric case worked by hand: true 0 0 0 1 2, predicted 0 1 1 1 0. counts[true, predicted] =
# [[1, 2, 0], [0, 1, 0], [1, 0, 0]]; per class: predicted 2, 3, 0 times, true 3, 1, 1 times, right 1, 1, 0;
# precision 1/2, 1/3, 0 (macro 5/18); recall 1/3, 1, 0 (macro 4/9); F1 2/5, 1/2, 0 (macro 3/10). Labels and
# predictions swapped would transpose the matrix and exchange precision and recall.
NOTEBOOKS = Path(__file__).parents[1] / "notebooks"
HAND_LABELS = [0, 0, 0, 1, 2]
HAND_PROBABILITIES = np.array(
    [[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.1, 0.5, 0.4], [0.2, 0.5, 0.3], [0.5, 0.1, 0.4]]
)  # argmax 0 1 1 1 0
HAND_COUNTS = [[1, 2, 0], [0, 1, 0], [1, 0, 0]]


def check_hand_scores(found, metric):
    assert found["accuracy"] == pytest.approx(2 / 5)
    assert found["precision_macro"] == pytest.approx(5 / 18) and found["recall_macro"] == pytest.approx(4 / 9)
    assert found["f1_macro"] == pytest.approx(3 / 10) and found["metric"] == metric


def test_of_predictions_counts_rows_of_true_classes_and_columns_of_predictions(tmp_path):
    counts, found = metrics.of_predictions(HAND_LABELS, HAND_PROBABILITIES, "accuracy")
    assert counts.tolist() == HAND_COUNTS
    check_hand_scores(found, "accuracy")
    figure = plots.confusion(counts, ["a", "b", "c"], found, tmp_path / "cm.png")  # as 02, 04, 05 and 08 draw it
    shown = figure.axes[0].images[0].get_array()  # row k: how true class k was predicted
    np.testing.assert_allclose(shown, [[1 / 3, 2 / 3, 0], [0, 1, 0], [1, 0, 0]])
    assert "precision 0.278   recall 0.444" in figure.get_suptitle()


def test_what_02_and_05_score_and_write_to_metrics_json_is_the_hand_worked_answer(tmp_path):
    """`data.score(val_labels, val_probabilities)` is the call 02 and 05 make; 02 writes `**scores` into
    metrics.json (05 into its package's manifest)."""
    dataset = Description(
        title="t", classes=("a", "b", "c"), label_values=(0, 1, 2), image_sizes=(64,), metric="f1_macro"
    )
    data = checks.Data(path=str(tmp_path), reason="given", dataset=dataset, image_size=64, splits={})
    counts, scores = data.score(HAND_LABELS, HAND_PROBABILITIES)
    assert counts.tolist() == HAND_COUNTS
    check_hand_scores(scores, "f1_macro")
    atomic.write_json({**scores, "epochs": 1}, tmp_path / "metrics.json")
    check_hand_scores(json.loads((tmp_path / "metrics.json").read_text()), "f1_macro")
    two, five = ((NOTEBOOKS / name).read_text() for name in ("02_flowers_classifier.py", "05_train_on_tpu.py"))
    assert all("confusion, scores = data.score(val_labels, val_probabilities)" in source for source in (two, five))
    assert "run_record = {\n    **scores," in two and "json.dumps(run_record" in two
    assert "metrics=scores," in five


def test_quadratic_weighted_kappa_against_its_definition():
    # sklearn's cohen_kappa_score(weights="quadratic") on these gives 0.8 (worked by hand below).
    labels, predictions = [0, 1, 2, 2, 3, 3], [0, 1, 2, 3, 3, 1]
    counts = metrics._confusion_matrix(labels, predictions, 4)
    weights = np.array([[(i - j) ** 2 / 9 for j in range(4)] for i in range(4)])
    expected = np.outer(counts.sum(1), counts.sum(0)) / counts.sum()
    kappa = 1 - (weights * counts).sum() / (weights * expected).sum()
    got = metrics._scores(counts, "qwk")
    assert got["qwk"] == pytest.approx(kappa) and got["metric"] == "qwk"
    assert metrics._scores(metrics._confusion_matrix([0, 1, 2], [0, 1, 2], 3), "qwk")["qwk"] == 1.0
    assert metrics._scores(metrics._confusion_matrix([0, 0, 2, 2], [2, 2, 0, 0], 3), "qwk")["qwk"] < -0.9
    assert "validation qwk" in metrics.describe(got) and "; accuracy" in metrics.describe(got)
    with pytest.raises(ParameterError, match="metric='auc' is not one of accuracy, f1_macro, qwk"):
        metrics._scores(counts, "auc")


FLOWERS_LIKE = Description(title="t", classes=tuple("abcd"), label_values=(0, 1, 2, 103), image_sizes=(64,))
CASSAVA_LIKE = Description(
    title="c", classes=("healthy", "sick"), label_values=("H", "S"), image_sizes=(64,), id_column="image_id"
)


def test_submission_has_the_datasets_header_and_label_values(tmp_path):
    path = metrics.write_submission(["b", "a", "c"], np.array([3, 1, 0]), FLOWERS_LIKE, tmp_path / "submission.csv")
    assert path.read_text() == "id,label\nb,103\na,1\nc,0\n"
    assert metrics.read_csv(path) == (["id", "label"], [["b", "103"], ["a", "1"], ["c", "0"]])
    other = metrics.write_submission(["x.jpg", "y.jpg"], [1, 0], CASSAVA_LIKE, tmp_path / "other.csv")
    assert other.read_text() == "image_id,label\nx.jpg,S\ny.jpg,H\n"
    odd = metrics.write_submission(["a,b.jpg", 'say "hi".jpg'], [1, 0], CASSAVA_LIKE, tmp_path / "odd.csv")  # quoted
    with open(odd, newline="") as f:
        assert list(csv.reader(f)) == [["image_id", "label"], ["a,b.jpg", "S"], ['say "hi".jpg', "H"]]


def test_submission_is_checked_against_the_sample_submission(tmp_path):
    from dataclasses import replace

    (tmp_path / "sample.csv").write_text("image_id,label\nx.jpg,H\ny.jpg,H\n")
    dataset = replace(CASSAVA_LIKE, sample_submission=str(tmp_path / "sample.csv"))
    written = metrics.write_submission(["y.jpg", "x.jpg"], [0, 1], dataset, tmp_path / "ok.csv")  # any order
    assert written.read_text() == "image_id,label\ny.jpg,H\nx.jpg,S\n"
    with pytest.raises(DataError, match=r"1 of its ids have no test record \(e.g. \['y.jpg'\]\) and 1 test ids"):
        metrics.write_submission(["x.jpg", "z.jpg"], [0, 1], dataset, tmp_path / "bad.csv")
    with pytest.raises(DataError, match="header would be id,label but .*sample.csv's is image_id,label"):
        metrics.write_submission(["x.jpg", "y.jpg"], [0, 1], replace(dataset, id_column="id"), tmp_path / "bad.csv")
    assert not (tmp_path / "bad.csv").exists()


def test_submission_refuses_mismatch_and_keeps_the_old_file(tmp_path):
    path = metrics.write_submission(["a"], [1], FLOWERS_LIKE, tmp_path / "submission.csv")
    with pytest.raises(DataError, match="2 test ids but 1 predictions"):
        metrics.write_submission(["a", "b"], [1], FLOWERS_LIKE, path)
    with pytest.raises(DataError, match="repeat"):
        metrics.write_submission(["a", "a"], [1, 2], FLOWERS_LIKE, path)
    assert path.read_text() == "id,label\na,1\n"


def test_metrics_json_holds_plain_numbers(tmp_path):
    path = atomic.write_json({"accuracy": np.float32(0.5), "epochs": 3}, tmp_path / "metrics.json")
    assert json.loads(path.read_text()) == {"accuracy": 0.5, "epochs": 3}


def test_predictions_come_in_order_padded_and_are_checked_against_the_same_rows_on_one_device(tmp_path):
    """models.predict returns every row's logits and key in the dataset's order (the last batch padded, the
    padding cut), and stops, before anything is written, on a model whose batched predictions come back with
    rows swapped (what keras 3.8 + jax 0.4.35 did on 8 devices)."""
    import keras
    import tensorflow as tf

    from nbkit import models
    from nbkit.errors import AcceleratorError

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (13, 16, 16, 3), dtype=np.uint8)
    ids = np.array([f"id-{i}" for i in range(13)])
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(), keras.layers.Dense(6)]
    )
    logits, keys = models.predict(model, tf.data.Dataset.from_tensor_slices((images, ids)), global_batch=8)
    assert keys.tolist() == ids.tolist()  # 8 + 5 rows, the second batch padded with 3
    alone = np.stack([np.asarray(model(images[i : i + 1]))[0] for i in range(13)])  # one image at a time
    assert logits.shape == (13, 6) and np.allclose(logits, alone, atol=1e-5)
    labels = np.arange(13) % 6
    _, label_keys = models.predict(model, tf.data.Dataset.from_tensor_slices((images, labels)), global_batch=8)
    assert label_keys.tolist() == labels.tolist()
    honest = model.predict

    def rows_mixed(dataset, **kwargs):  # each row answered with its neighbour's logits
        return np.roll(honest(dataset, **kwargs), 1, axis=0)

    model.predict = rows_mixed
    with pytest.raises(AcceleratorError, match=r"Row \d+ of the distributed predictions differs.*keras \d"):
        models.predict(model, tf.data.Dataset.from_tensor_slices((images, ids)), global_batch=8)


def test_a_process_whose_rows_of_the_last_batch_are_all_padding_predicts_its_share(monkeypatch):
    """Issue 35 #10: with more processes (or a larger global batch) than the test split fills, a process
    whose rows are all padding crashed after training (`need at least one array to stack`): the padding
    is predicted and cut like any other, so any test split size works."""
    import jax
    import keras
    import tensorflow as tf

    from nbkit import models

    images = np.random.default_rng(1).integers(0, 256, (5, 16, 16, 3), dtype=np.uint8)
    ids = np.array([f"id-{i}" for i in range(5)])
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(), keras.layers.Dense(6)]
    )
    fed, batch = [], np.concatenate([images, np.zeros((3, 16, 16, 3), np.uint8)])  # the padded batch all 4 read

    def every_row(model, local):  # what the processes get back: all 8 rows, this process's (the last 2) among them
        fed.append(np.asarray(local))
        return np.asarray(model(batch), np.float64)

    monkeypatch.setattr(models, "_process_count", lambda: 4)
    monkeypatch.setattr(jax, "process_index", lambda: 3)
    monkeypatch.setattr(models, "_gathered", every_row)
    logits, keys = models.predict(model, tf.data.Dataset.from_tensor_slices((images, ids)), global_batch=8)
    assert keys.tolist() == ids.tolist() and logits.shape == (5, 6)
    assert [batch.shape[0] for batch in fed] == [2] and not fed[0].any()  # process 3 fed rows 6-7: padding
