"""The "your own competition" path as a user takes it: notebook 07 converts a Cassava-style
competition (the generated example: mixed sizes, EXIF-turned, grayscale/RGBA/CMYK/palette/16-bit
pictures, train.csv with integer labels, ids with extensions), then notebook 02 trains on the result
with nothing but DATA_ROOT changed and writes a submission in the competition's form, checked
against its sample submission."""

from __future__ import annotations

import csv
import json

import papermill
import pytest
from conftest import execute, text_outputs

from nbkit.convert import example
from nbkit.images import description


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own")
    source = example.make_example(tmp / "cassava")
    output = tmp / "cassava-tfrecords"
    out = text_outputs(
        execute(
            tmp,
            "07_make_tfrecords.ipynb",
            output="07.ipynb",
            DATA_ROOT=str(source),
            IMAGE_SIZE=64,
            OUTPUT_DIR=str(output),
            METRIC="qwk",
        )
    )
    assert "stratified validation split, 20% of each class, seed 42: train 80, val 20, test 15" in out
    assert "train 80 images checked" in out
    return source, output


def test_notebook_02_trains_on_the_converted_competition_and_submits_in_its_form(converted, tmp_path):
    source, output = converted
    dataset = description.load(output)
    assert (dataset.num_classes, dataset.metric, dataset.id_column) == (5, "qwk", "image_id")
    out = text_outputs(
        execute(tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(output), OUTPUT_DIR=str(tmp_path / "run"))
    )
    assert "Cassava Bacterial Blight (CBB)" in out and "64x64 images: train 80, val 20, test 15 images" in out
    with open(tmp_path / "run" / "submission.csv", newline="") as f:
        rows = list(csv.reader(f))
    with open(source / "sample_submission.csv", newline="") as f:
        sample = list(csv.reader(f))
    assert rows[0] == sample[0] == ["image_id", "label"]
    assert sorted(r[0] for r in rows[1:]) == sorted(r[0] for r in sample[1:])  # every test id, once
    assert {r[1] for r in rows[1:]} <= {"0", "1", "2", "3", "4"}  # the competition's label values
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["metric"] == "qwk" and -1 <= metrics["qwk"] <= 1 and metrics["image_size"] == 64


def test_a_data_root_that_holds_no_data_is_an_error_not_the_sample(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, "02_flowers_classifier.ipynb", DATA_ROOT=str(tmp_path / "empty"))
    assert error.value.ename == "DataError" and "No tfrecords-jpeg-<size>x<size> folder in" in error.value.evalue
    assert not (tmp_path / "work" / "sample-data").exists()  # no silent fall-back
