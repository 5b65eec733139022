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

from nbkit.convert import example
from nbkit.images import description, layout, oof

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
    held_out_count = layout.count_items(dataset.folds[0])  # the records in fold 0's files, by their names
    assert "Cassava Bacterial Blight (CBB)" in out
    assert f"64x64 images: train {100 - held_out_count}, val {held_out_count}, test 15 images" in out
    submission, sample = rows(tmp_path / "run" / "submission.csv"), rows(source / "sample_submission.csv")
    assert submission[0] == sample[0] == ["image_id", "label"]
    assert sorted(r[0] for r in submission[1:]) == sorted(r[0] for r in sample[1:])  # every test id, once
    assert {r[1] for r in submission[1:]} <= {"0", "1", "2", "3", "4"}  # the competition's label values
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["metric"] == "qwk" and -1 <= metrics["qwk"] <= 1 and metrics["image_size"] == 64
    assert (metrics["fold"], metrics["tta"]) == (0, 2)
    held_out = oof._read(tmp_path / "run" / "oof.csv", dataset)
    assert set(held_out.folds.tolist()) == {0} and len(set(held_out.ids)) == len(held_out.ids) == held_out_count


def test_each_fold_validates_on_its_own_pictures_and_the_oof_score_covers_every_one(converted, folds_trained, tmp_path):
    source, output = converted
    dataset = description.load(output)
    held_out = [oof._read(run / "oof.csv", dataset).ids for run in folds_trained]
    labeled = [r[0] for r in rows(source / "train.csv")[1:]]  # ids as the CSV writes them
    assert sorted(sum(held_out, [])) == sorted(labeled)  # every picture validates in exactly one fold
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "oof", *map(str, folds_trained), "--data", str(output), "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    gathered = json.loads((tmp_path / "metrics.json").read_text())
    expected = oof.gather([run / "oof.csv" for run in folds_trained], dataset).scores("qwk")
    assert gathered["qwk"] == pytest.approx(expected["qwk"]) and (gathered["folds"], gathered["pictures"]) == (3, 100)
    assert "out of fold, 3 folds, 100 pictures" in done.stdout
    assert len(rows(tmp_path / "oof.csv")) == 101


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
    np.testing.assert_allclose(saved["ensemble"], saved["members"].mean(axis=0))
    # Each model predicts here what it did in 05 (fold 2 trained without the test split: it submitted nothing).
    for member, run in zip(saved["members"][:2], folds_trained):
        labels = {r[0]: int(r[1]) for r in rows(run / "submission.csv")[1:]}
        chosen = member[np.arange(len(member)), [labels[i] for i in saved["ids"]]]
        # 05's class is 06's most likely one (up to rounding between batch sizes: these models barely trained)
        np.testing.assert_allclose(chosen, member.max(axis=1), atol=1e-5)
    submission = {r[0]: r[1] for r in rows(tmp_path / "run" / "submission.csv")[1:]}
    assert [submission[i] for i in saved["ids"]] == [str(p) for p in saved["ensemble"].argmax(axis=1)]
    assert rows(tmp_path / "run" / "submission.csv")[0] == ["image_id", "label"]


def test_a_data_root_that_holds_no_data_is_an_error_not_the_sample(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(tmp_path / "empty"))
    assert error.value.ename == "DataError" and "No tfrecords-jpeg-<size>x<size> folder in" in error.value.evalue
    assert not (tmp_path / "work" / "sample-data").exists()  # no silent fall-back
