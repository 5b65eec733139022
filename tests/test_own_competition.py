"""The "your own competition" path as a user takes it: notebook 07 converts a Cassava-style
competition (the generated example: mixed sizes, EXIF-turned, grayscale/RGBA/CMYK/palette/16-bit
pictures, train.csv with integer labels, ids with extensions) into 3 folds; notebook 02 trains on
fold 0's complement with nothing but DATA_ROOT, FOLD and TTA changed and writes a submission in the
competition's form, checked against its sample submission; notebook 05 trains one model per fold,
`python -m nbkit oof` scores the folds' out-of-fold predictions as one, and notebook 06 averages the
three models with test-time augmentation."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import numpy as np
import papermill
import pytest
from conftest import REPO, execute, text_outputs

from nbkit import tfrecord
from nbkit.convert import example
from nbkit.images import description

SMALL_RUN = {"EPOCHS": 2, "STEPS_PER_EPOCH": 2, "TTA": 2}  # a few steps: these runs check the flow, not learning


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own")
    source = example._make_example(tmp / "cassava")
    output = tmp / "cassava-tfrecords"
    out = text_outputs(
        execute(
            tmp,
            "07_make_tfrecords.ipynb",
            output="07.ipynb",
            DATA_ROOT=str(source),
            IMAGE_SIZE=64,
            FOLDS=3,
            OUTPUT_DIR=str(output),
            METRIC="qwk",
        )
    )
    assert "3 stratified folds, seed 42: train 100, test 15" in out and "(3 folds: 6, 6, 6 files)" in out
    assert "train 100 images checked" in out
    return source, output


@pytest.fixture(scope="module")
def folds_trained(converted, tmp_path_factory):
    """Notebook 05 once per fold: each run's output folder. Fold 2 trains on the data without its test
    split, as in a code competition (whose test pictures appear only when Kaggle reruns notebook 06)."""
    _, output = converted
    no_test = shutil.copytree(
        output, tmp_path_factory.mktemp("no-test") / "data", ignore=shutil.ignore_patterns("test")
    )
    runs = []
    for fold in (0, 1, 2):
        tmp = tmp_path_factory.mktemp(f"fold{fold}")
        data = output if fold < 2 else no_test
        execute(tmp, "05_train_on_tpu.ipynb", DATA_ROOT=str(data), FOLD=fold, OUTPUT_DIR=str(tmp / "run"), **SMALL_RUN)
        runs.append(tmp / "run")
    return runs


def rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def read_records(output, split, names=None):
    """(ids, JPEG bytes) of a split's records (of the files `names`, else all), in file order."""
    folder = output / "tfrecords-jpeg-64x64" / split
    files = [folder / name for name in names] if names is not None else sorted(folder.glob("*.tfrec"))
    found = [tfrecord.decode_example(raw) for f in files for raw in tfrecord.read_records(f)]
    return [r["id"][0].decode() for r in found], [r["image"][0] for r in found]


def record_ids(output, split, names=None):
    return read_records(output, split, names)[0]


def clear_choices(probabilities, chosen):
    """The rows' `chosen` classes where the most likely class leads the next by more than rounding."""
    top = np.sort(probabilities, axis=1)
    return [str(c) for c, clear in zip(chosen, top[:, -1] - top[:, -2] > 5e-3) if clear]


def qwk(labels, predicted):
    """Quadratic weighted kappa in plain NumPy: 1 - mean squared miss / mean squared miss of every pairing."""
    labels, predicted = np.asarray(labels, float), np.asarray(predicted, float)
    return 1 - np.mean((labels - predicted) ** 2) / np.mean((labels[:, None] - predicted[None, :]) ** 2)


def check_oof(path, fold, ids, source, scores):
    """An oof.csv, read with csv: one row per id of `ids` (in order), the labels of train.csv, its fold,
    probabilities in [0, 1] summing to 1, whose qwk and accuracy are `scores`' (the run's metrics.json)."""
    header, *table = rows(path)
    assert header == ["id", "label", "fold", "p:0", "p:1", "p:2", "p:3", "p:4"]
    label_of = dict(rows(source / "train.csv")[1:])
    assert [(r[0], r[1], r[2]) for r in table] == [(i, label_of[i], str(fold)) for i in ids]
    probabilities = np.array([[float(p) for p in r[3:]] for r in table])
    assert (probabilities >= 0).all() and np.allclose(probabilities.sum(axis=1), 1, atol=1e-5)
    labels, predicted = [int(r[1]) for r in table], probabilities.argmax(axis=1)
    assert scores["qwk"] == pytest.approx(qwk(labels, predicted), abs=1e-9)
    assert scores["accuracy"] == pytest.approx(np.mean(predicted == labels), abs=1e-9)
    labels, present = np.array(labels), sorted(set(labels) | set(predicted.tolist()))  # classes seen on either side
    right = [np.sum((labels == k) & (predicted == k)) for k in present]
    precision = [r / max(1, np.sum(predicted == k)) for r, k in zip(right, present)]  # of the rows predicted k
    recall = [r / max(1, np.sum(labels == k)) for r, k in zip(right, present)]  # of the rows truly k
    assert (scores["precision_macro"], scores["recall_macro"]) == pytest.approx((np.mean(precision), np.mean(recall)))
    return table


def test_notebook_02_trains_on_a_fold_of_the_converted_competition_and_submits_in_its_form(converted, tmp_path):
    source, output = converted
    dataset = description.load(output)
    assert (dataset.num_classes, dataset.metric, dataset.id_column, len(dataset.folds)) == (5, "qwk", "image_id", 3)
    files = [name for fold in dataset.folds for name in fold]
    assert len(set(files)) == len(files) == 18  # each file holds one fold's pictures
    out = text_outputs(
        execute(
            tmp_path,
            "02_flowers_classifier.ipynb",
            DATA_ROOT=str(output),
            FOLD=0,
            OUTPUT_DIR=str(tmp_path / "run"),
            **SMALL_RUN,
        )
    )
    held_out, val_jpegs = read_records(output, "train", dataset.folds[0])  # fold 0's pictures, from its files
    held_out_count = len(held_out)
    assert "Cassava Bacterial Blight (CBB)" in out
    assert f"64x64 images: train {100 - held_out_count}, val {held_out_count}, test 15 images" in out
    submission, sample = rows(tmp_path / "run" / "submission.csv"), rows(source / "sample_submission.csv")
    assert submission[0] == sample[0] == ["image_id", "label"]
    assert sorted(r[0] for r in submission[1:]) == sorted(r[0] for r in sample[1:])  # every test id, once
    assert {r[1] for r in submission[1:]} <= {"0", "1", "2", "3", "4"}  # the competition's label values
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["metric"] == "qwk" and -1 <= metrics["qwk"] <= 1 and metrics["image_size"] == 64
    assert (metrics["fold"], metrics["tta"]) == (0, 2)
    table = check_oof(tmp_path / "run" / "oof.csv", 0, held_out, source, metrics)  # its scores are its rows'
    by_hand = predict_by_hand(tmp_path / "run", val_jpegs)
    np.testing.assert_allclose([[float(p) for p in r[3:]] for r in table], by_hand, atol=2e-3)  # the model's
    test_ids, jpegs = read_records(output, "test")
    test_probabilities = predict_by_hand(tmp_path / "run", jpegs)
    assert [r[0] for r in submission[1:]] == test_ids  # in the test files' order
    chosen = [r[1] for r in submission[1:]]
    assert clear_choices(test_probabilities, chosen) == clear_choices(test_probabilities, test_probabilities.argmax(1))


def test_each_fold_validates_on_its_own_pictures_and_the_oof_score_covers_every_one(converted, folds_trained, tmp_path):
    source, output = converted
    dataset = description.load(output)
    labeled = [r[0] for r in rows(source / "train.csv")[1:]]  # ids as the CSV writes them
    tables = []
    for fold, run in enumerate(folds_trained):
        manifest = json.loads((run / "model-package" / "manifest.json").read_text())  # 05's scores are there
        ids = record_ids(output, "train", dataset.folds[fold])
        tables += check_oof(run / "oof.csv", fold, ids, source, manifest["metrics"])
        assert manifest["training"]["fold"] == fold and manifest["metrics"]["metric"] == "qwk"
        assert manifest["dataset"]["label_values"] == [0, 1, 2, 3, 4]
        package_id = json.loads((run / "model-package" / "dataset-metadata.json").read_text())["id"]
        assert package_id.endswith(f"-fold{fold}-model"), package_id  # each fold's package its own dataset
    assert sorted(r[0] for r in tables) == sorted(labeled)  # every picture validates in exactly one fold
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "oof", *map(str, folds_trained), "--data", str(output), "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert rows(tmp_path / "oof.csv")[1:] == tables  # the folds' rows, each with its own fold
    gathered = json.loads((tmp_path / "metrics.json").read_text())
    labels = [int(r[1]) for r in tables]
    predicted = np.array([[float(p) for p in r[3:]] for r in tables]).argmax(axis=1)
    assert gathered["qwk"] == pytest.approx(qwk(labels, predicted), abs=1e-9)
    assert (gathered["folds"], gathered["pictures"]) == (3, 100)
    assert "out of fold, 3 folds, 100 pictures" in done.stdout


def predict_by_hand(package, jpegs):
    """Class probabilities of a package's model.keras over 2 views (as is, flipped left to right), with the
    test pictures decoded by Pillow and the softmax in NumPy: not 06's code path."""
    import io

    import keras
    from PIL import Image

    model = keras.models.load_model(package / "model.keras")
    images = np.stack([np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")) for jpeg in jpegs])
    views = []
    for view in (images, images[:, :, ::-1]):
        logits = np.asarray(model.predict(view, verbose=0), np.float64)
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        views.append(exp / exp.sum(axis=1, keepdims=True))
    return np.mean(views, axis=0)


def test_05_without_a_test_split_writes_scores_oof_and_the_package_but_no_submission(folds_trained):
    """Issue 35 #22: data converted without --test (a code competition's) stopped 05: "the test split is missing"."""
    run = folds_trained[2]
    out = text_outputs(run.parent / "out.ipynb")
    assert "No submission.csv: the data has no test split (converted without --test;" in out
    assert {"oof.csv", "model-package", "confusion_matrix.png"} <= {p.name for p in run.iterdir()}
    assert not (run / "submission.csv").exists() and (run / "model-package" / "model.keras").is_file()


def test_notebook_06_averages_the_fold_models_and_submits_what_each_predicted(converted, folds_trained, tmp_path):
    source, output = converted
    packages = ",".join(str(run / "model-package") for run in folds_trained)
    execute(
        tmp_path,
        "06_infer_on_gpu.ipynb",
        PACKAGES=packages,
        DATA_ROOT=str(output),
        TTA=2,
        OUTPUT_DIR=str(tmp_path / "run"),
    )
    out = text_outputs(tmp_path / "out.ipynb")
    assert all(f"from {run / 'model-package'}, checked" in out for run in folds_trained)  # each package named
    saved = np.load(tmp_path / "run" / "test_probabilities.npz")
    assert saved["members"].shape == (3, 15, 5)
    ids, jpegs = read_records(output, "test")
    assert saved["ids"].tolist() == ids  # the test files' order
    by_hand = np.stack([predict_by_hand(run / "model-package", jpegs) for run in folds_trained])
    np.testing.assert_allclose(saved["members"], by_hand, atol=2e-3)  # JPEG decoders differ by a level or so
    np.testing.assert_allclose(saved["ensemble"], by_hand.mean(axis=0), atol=2e-3)
    np.testing.assert_allclose(saved["ensemble"].sum(axis=1), 1, atol=1e-5)
    submission = rows(tmp_path / "run" / "submission.csv")
    assert submission[0] == ["image_id", "label"] and [r[0] for r in submission[1:]] == ids
    ensemble = by_hand.mean(axis=0)
    assert clear_choices(ensemble, [r[1] for r in submission[1:]]) == clear_choices(ensemble, ensemble.argmax(1))
    # 05's submission is its model's most likely class too (fold 2 trained without the test split: none)
    for member, run in zip(by_hand[:2], folds_trained[:2]):
        labels = dict(rows(run / "submission.csv")[1:])
        assert clear_choices(member, [labels[i] for i in ids]) == clear_choices(member, member.argmax(1))


def test_a_data_root_that_holds_no_data_is_an_error_not_the_sample(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(tmp_path / "empty"))
    assert error.value.ename == "DataError" and "No tfrecords-jpeg-<size>x<size> folder in" in error.value.evalue
    assert not (tmp_path / "work" / "sample-data").exists()  # no silent fall-back
