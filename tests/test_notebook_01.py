"""Notebook 01 is the program: a run of it with its `build_model` edited (a layer added, and a wrapper
that prints a marker) trains the edited model with `fit` and in the custom loop, and the custom loop
learns; its own `strategy.run` cell computes the product on each replica. One papermill run on TensorFlow
with 2 simulated replicas (nbval runs the 8-replica default)."""

from __future__ import annotations

import re

import jupytext
from conftest import REPO, execute, text_outputs

SOURCE = REPO / "notebooks" / "01_tpu_setup.py"
DENSE = '            layers.Dense(64, activation="relu"),\n'
ADDED = '            layers.Dense(32, activation="relu", name="added_by_the_test"),\n'
WRAPPER = """

_build_model_as_written = build_model


def build_model():
    model = _build_model_as_written()
    print(f"EDITED build_model: {[layer.name for layer in model.layers]}")
    return model
"""
EPOCH = re.compile(r"^epoch (\d+)/(\d+): step (\d+), loss ([\d.]+), accuracy ([\d.]+)$", re.MULTILINE)
PARAMETERS = re.compile(r"^mnist_cnn: ([\d,]+) parameters$", re.MULTILINE)


def edited(tmp_path):
    """Notebook 01 with a layer added to `build_model` and the function wrapped, as a user would edit it."""
    notebook = jupytext.read(SOURCE)
    [cell] = [c for c in notebook.cells if c.cell_type == "code" and "def build_model(" in c.source]
    assert DENSE in cell.source, "build_model's dense layer moved: update the test's edit"
    cell.source = cell.source.replace(DENSE, DENSE + ADDED) + WRAPPER
    path = tmp_path / "01_edited.ipynb"
    jupytext.write(notebook, path)
    return path


def test_an_edited_build_model_is_what_fit_and_the_custom_loop_train(tmp_path):
    out = text_outputs(
        execute(tmp_path, edited(tmp_path), SIMULATE_DEVICES=2)
    )  # the same code on 2 replicas (166 s on 8)
    markers = [line for line in out.splitlines() if line.startswith("EDITED build_model:")]
    assert out.count(": [[22.0, 28.0], [49.0, 64.0]]") == 2, out  # the replicated product, once per replica
    assert len(markers) == 2, out  # the model for fit and the custom loop's, each built by the edited function
    assert all("added_by_the_test" in line for line in markers)
    as_written = PARAMETERS.findall(text_outputs(SOURCE.with_suffix(".ipynb")))
    assert as_written and PARAMETERS.findall(out) and PARAMETERS.findall(out) != as_written  # fit's model changed
    assert "learned (validation accuracy above 3x chance): True" in out
    epochs = [(int(e), int(n), int(step), float(loss), float(acc)) for e, n, step, loss, acc in EPOCH.findall(out)]
    assert len(epochs) == 2 and [e for e, *_ in epochs] == [1, 2], out
    steps_per_epoch = epochs[0][2]
    assert steps_per_epoch > 0 and epochs[1][2] == 2 * steps_per_epoch  # the loop ran every step it was given
    assert epochs[-1][3] < epochs[0][3]  # the custom loop's loss fell
    assert epochs[-1][4] > 0.3  # training accuracy above 3x chance
    assert "custom loop learned (loss fell: True, training accuracy above 3x chance: True)" in out
