"""Notebook 04 under papermill: with torch_xla blocked (plain torch), with its machine-learning code edited, and
with bad parameters or data. Runs in .venv-xla. Through torch_xla: nbval's run of the committed notebook (float32)
here, and tests/matrix/test_pytorch_xla.py in Kaggle's TPU image (bfloat16, the standard augmentation, TTA)."""

from __future__ import annotations

import os
import re
from unittest import mock

import jupytext
import nbformat
import papermill
import pytest
from conftest import BAD_DATA_CASES, REPO, check_04_learned_and_submitted, execute, text_outputs
from test_runtime import WITHOUT_TORCH_XLA

from nbkit.images import sample as flower_sample

NOTEBOOK = "04_pytorch_xla.ipynb"


@pytest.mark.parametrize(
    "params, named",
    [
        ({"PROFILE": "fast"}, "PROFILE='fast'"),
        ({"EPOCHS": -1}, "EPOCHS=-1"),
        ({"PER_CORE_BATCH": "16"}, "PER_CORE_BATCH='16'"),
        ({"IMAGE_SIZE": -1}, "IMAGE_SIZE=-1"),
        ({"DEVICE": "tpu"}, "DEVICE='tpu'"),
        ({"PRECISION": "mixed_float16"}, "PRECISION='mixed_float16'"),
        ({"EPOCH": 3}, "EPOCH (did you mean EPOCHS?)"),
    ],
)
def test_bad_parameter_stops_at_the_first_cell(tmp_path, params, named):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, NOTEBOOK, **params)
    assert error.value.ename == "ParameterError"
    assert named in error.value.evalue
    assert "params.check_parameters(globals()" in error.value.source  # the first cell after parameters
    assert (tmp_path / "out.ipynb").exists()  # the executed notebook, with the error, is kept


def test_bad_data_stops_before_training(tmp_path):
    """A DATA_ROOT that does not exist stops a whole run before training; a size the data lacks stops
    `layout.choose_size`, which 04 calls after locating the data and before checking every record and
    training (the order checked in its source)."""
    (params, message), (size_params, size_message) = BAD_DATA_CASES
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, NOTEBOOK, OUTPUT_DIR=str(tmp_path / "o"), **params)
    assert error.value.ename == "DataError" and message in error.value.evalue
    assert "xla.launch" not in error.value.source
    from nbkit.errors import DataError
    from nbkit.images import layout, sample

    made = sample.make_sample(tmp_path / "sample", 104, train_per_class=1, val_per_class=1, test_images=8)
    with pytest.raises(DataError, match=re.escape(size_message)):
        layout.choose_size(str(made), size_params["IMAGE_SIZE"])
    source = (REPO / "notebooks" / "04_pytorch_xla.py").read_text()
    calls = ["flowers.locate_data(", "layout.choose_size(", "checks.check_splits(", "runtime.launch("]
    positions = [source.find(call) for call in calls]
    assert -1 not in positions and positions == sorted(positions), dict(zip(calls, positions))


# Edits a user makes, each put in its cell before the line given: a model with one more layer (counting
# its builds), a constant learning rate, and a look at the augmentation AUGMENT chose.
EDITS = {
    "torch.manual_seed(SEED)\nmodel = build_model()": """
original_build_model, builds = build_model, []


def build_model():
    builds.append(1)
    return nn.Sequential(original_build_model(), nn.ReLU(), nn.Linear(dataset.num_classes, dataset.num_classes))


""",
    "figure = plots.learning_rate([lrfn(": """
def lrfn(epoch, cores=1):
    return 1e-3


""",
    "train_set = TFRecordImages(": """print("augmentation:", [type(step).__name__ for step in augmentation.transforms])
""",
}


def test_without_torch_xla_it_trains_on_the_cpu_with_the_notebooks_own_edited_functions(tmp_path):
    """One run asserting both: plain torch on the CPU when torch_xla is missing, and a user's edits of the
    notebook's functions (model, schedule, augmentation) are what the run used."""
    notebook = jupytext.read(REPO / "notebooks" / NOTEBOOK)
    for line, addition in EDITS.items():
        (cell,) = [cell for cell in notebook.cells if cell.cell_type == "code" and line in cell.source]
        cell.source = cell.source.replace(line, addition + line)
    notebook.cells.append(nbformat.v4.new_code_cell('print(f"build_model calls: {len(builds)}")'))
    edited = tmp_path / "edited.ipynb"
    jupytext.write(notebook, edited)
    output_dir = tmp_path / "flowers"
    # The sample at 48 px, what the notebook pools 192 px down to (the same network, a sixteenth of the decoding).
    sample = flower_sample.make_sample(tmp_path / "sample", 104, image_sizes=(48,))
    # Before whatever else is on the path (a checkout's own nbkit, extra packages); eager CPU is slower: 5 epochs
    # suffice.
    path = os.pathsep.join(filter(None, [WITHOUT_TORCH_XLA, os.environ.get("PYTHONPATH")]))
    with mock.patch.dict(os.environ, {"PYTHONPATH": path}):
        out = text_outputs(
            execute(tmp_path, edited, DATA_ROOT=str(sample), OUTPUT_DIR=str(output_dir), EPOCHS=5, AUGMENT="none")
        )
    assert "PyTorch on the CPU: no torch_xla and no GPU, so the CPU" in out
    assert "trained on cpu x 1 core(s)" in out and "xla:0" not in out
    metrics = check_04_learned_and_submitted(sample, out, output_dir, image_size=48)
    assert (metrics["device"], metrics["epochs"]) == ("cpu", 5)
    plain = 332_040  # the notebook's small CNN for 104 classes at 48x48 (192 px pooled to 48: the same)
    assert f"build_model: {plain + 104 * 104 + 104:,} parameters" in out  # the extra layer was built and trained
    assert "augmentation: ['Identity']" in out  # AUGMENT="none": nothing changes the training images
    assert out.count("learning_rate 0.001 (") == 5  # every epoch at the edited schedule's rate
    assert "build_model calls: 2" in out  # the model cell, and the check that model.pt loads into the edited model
    assert metrics["parameters"] == plain + 104 * 104 + 104
