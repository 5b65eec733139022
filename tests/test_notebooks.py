"""The notebooks themselves: paired sources, documented parameters, papermill runs and bad input.

(`pytest --nbval notebooks` executes each committed .ipynb and compares its outputs; see Makefile.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import papermill
import pytest
from conftest import REPO, execute, text_outputs

from nbkit.images import layout
from nbkit.images import sample as flower_sample

SOURCES = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))
PARAMETER_LINE = re.compile(
    r"^(?P<name>[A-Z][A-Z0-9_]*): (?P<type>str|int|float|bool) = (?P<value>.+?)  # (?P<help>.+)$"
)


def cells(path: Path) -> list[tuple[str, str, list[str]]]:
    notebook = jupytext.read(path)
    return [(c.cell_type, c.source.strip(), c.metadata.get("tags", [])) for c in notebook.cells]


def parameters(source: Path) -> list[re.Match]:
    tagged = [c for c in jupytext.read(source).cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{source.name}: exactly one cell must be tagged 'parameters'"
    lines = [line for line in tagged[0].source.splitlines() if line.strip() and not line.startswith("#")]
    matches = [PARAMETER_LINE.match(line) for line in lines]
    bad = [line for line, m in zip(lines, matches) if m is None]
    assert not bad, f"{source.name}: write parameters as `NAME: type = value  # help`: {bad}"
    # papermill's parameter parser skips any line with a second "=", help text included.
    assert not [m["name"] for m in matches if "=" in m["help"]], f"{source.name}: no '=' in parameter help"
    return matches


def test_there_are_notebooks():
    assert SOURCES, "no notebooks/NN_name.py sources found"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_py_and_ipynb_have_the_same_cells(source):
    twin = source.with_suffix(".ipynb")
    assert twin.exists(), f"{twin.name} is missing: run `make notebooks`"
    assert cells(source) == cells(twin), f"{twin.name} is stale against {source.name}: run `make notebooks`"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_committed_notebook_has_smoke_outputs(source):
    notebook = jupytext.read(source.with_suffix(".ipynb"))
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "every code cell must be executed, or nbval skips it"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_help_notebook_documents_every_parameter(source):
    result = subprocess.run(
        [str(Path(sys.executable).with_name("papermill")), "--help-notebook", str(source.with_suffix(".ipynb"))],
        capture_output=True,
        text=True,
        check=True,
    )
    text = " ".join(result.stdout.split())  # papermill wraps long help lines
    for match in parameters(source):
        assert f"{match['name']}: {match['type']} (default" in text, f"{match['name']} missing:\n{result.stdout}"
        assert " ".join(match["help"].split()) in text, f"help of {match['name']} missing:\n{result.stdout}"


@pytest.mark.parametrize(
    "notebook, params, named",
    [
        ("01_tpu_setup.ipynb", {"PROFILE": "fast"}, "PROFILE='fast'"),
        ("01_tpu_setup.ipynb", {"EPOCHS": -1}, "EPOCHS=-1"),
        ("01_tpu_setup.ipynb", {"BACKEND": "pytorch"}, "BACKEND='pytorch'"),
        ("01_tpu_setup.ipynb", {"SIMULATE_DEVICES": "eight"}, "SIMULATE_DEVICES='eight'"),
        ("02_flowers_classifier.ipynb", {"IMAGE_SIZE": -1}, "IMAGE_SIZE=-1"),
        ("05_train_on_tpu.ipynb", {"RESUME": "maybe"}, "RESUME='maybe'"),
        ("05_train_on_tpu.ipynb", {"SEED": -1}, "SEED=-1"),
        ("05_train_on_tpu.ipynb", {"DATASET_ID": "notaslug"}, "DATASET_ID='notaslug' must be written owner/slug"),
        ("05_train_on_tpu.ipynb", {"MODEL_HANDLE": "alice/flowers-model"}, "MODEL_HANDLE='alice/flowers-model'"),
        ("02_flowers_classifier.ipynb", {"DATA_ROOT": ["a", "b"]}, "DATA_ROOT=['a', 'b'] is a list, not a str"),
        ("02_flowers_classifier.ipynb", {"EPOCHS": 2.5}, "EPOCHS=2.5 is a float, not an int"),
        ("07_make_tfrecords.ipynb", {"FIT": "stretch"}, "FIT='stretch'"),
        ("06_infer_on_gpu.ipynb", {"PER_REPLICA_BATCH": 0}, "PER_REPLICA_BATCH=0"),
        ("06_infer_on_gpu.ipynb", {"BACKEND": "torch"}, "BACKEND='torch'"),
        ("08_text_classifier.ipynb", {"METRIC": "auc"}, "METRIC='auc'"),
        ("08_text_classifier.ipynb", {"TEXT_COLUMNS": "a,b,c"}, "TEXT_COLUMNS='a,b,c': name one text column, or two"),
        ("09_monet_cyclegan.ipynb", {"BACKEND": "tensorflow"}, "BACKEND='tensorflow'"),  # its train_step is JAX's
        # issue 35 #9: the next conversion into DATA_ROOT would delete the outputs
        (
            "02_flowers_classifier.ipynb",
            {"DATA_ROOT": "mine", "OUTPUT_DIR": "mine/run"},
            "lies inside DATA_ROOT='mine'",
        ),
        ("05_train_on_tpu.ipynb", {"DATA_ROOT": "mine", "OUTPUT_DIR": "mine"}, "OUTPUT_DIR='mine' is or lies inside"),
    ],
)
def test_bad_parameter_stops_at_the_first_cell(tmp_path, notebook, params, named):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        execute(tmp_path, notebook, **params)
    assert error.value.ename == "ParameterError"
    assert named in error.value.evalue
    assert "params.check_parameters(" in error.value.source  # the first cell after parameters
    assert (tmp_path / "out.ipynb").exists()  # the executed notebook, with the error, is kept


def edited_notebook(tmp_path: Path, name: str, edits: dict[str, str], appended: str) -> Path:
    """notebooks/`name` with each `edits` key replaced by its value (each must be found once) and a last
    code cell `appended`, written as an .ipynb under tmp_path: what a user who forks the notebook does."""
    notebook = jupytext.read(REPO / "notebooks" / name)
    source = "\n".join(c.source for c in notebook.cells)
    for old, new in edits.items():
        assert source.count(old) == 1, f"{name} no longer holds {old!r} once"
        for cell in notebook.cells:
            cell.source = cell.source.replace(old, new)
    notebook.cells.append(jupytext.reads(appended, fmt="py:percent").cells[0])
    path = tmp_path / name.replace(".py", ".ipynb")
    jupytext.write(notebook, path)
    return path


def test_a_forked_02_runs_its_own_edits_of_the_model_augmentation_schedule_and_tta(tmp_path):
    """02 is the program: an edited build_model (a new layer), augment (every image blanked), lrfn (a constant
    rate) and tta_view (a darker view) are what the run uses. Its data has no test split (converted without
    --test, or a code competition's, issue 35 #22): it trains, validates and writes all but a submission."""
    edits = {
        '    outputs = layers.Dense(dataset.num_classes, dtype="float32")(x)\n    return keras.Model(': (
            '    x = layers.Dense(24, activation="relu", name="my_extra_layer")(x)\n'
            '    outputs = layers.Dense(dataset.num_classes, dtype="float32")(x)\n    return keras.Model('
        ),
        "def augment(image, seed):\n": "def augment(image, seed):\n    return tf.zeros_like(image)\n",
        "def lrfn(epoch):\n": "def lrfn(epoch):\n    return 0.000123\n",
        "def tta_view(image, view):\n": "def tta_view(image, view):\n    return image // (view + 1)\n",
    }
    appended = """# %%
import json
print("EDITED", json.dumps({
    "layers": [layer.name for layer in keras.models.load_model(outputs.folder / "model.keras").layers],
    "lr": history.history["learning_rate"],
    "batch_max": int(images.numpy().max()),
    "decoded_max": int(next(iter(get_dataset(data.train)))[0].numpy().max()),
    "tta_views_differ": bool(abs(val_views[0] - val_views[1]).max() > 0),
}))
"""
    notebook = edited_notebook(tmp_path, "02_flowers_classifier.py", edits, appended)
    data = flower_sample.make_sample(tmp_path / "no-test", 104, train_per_class=2, val_per_class=1, test_images=1)
    shutil.rmtree(layout.split_folder(data, 192, "test"))
    params = dict(DATA_ROOT=str(data), OUTPUT_DIR=str(tmp_path / "run"), EPOCHS=2, STEPS_PER_EPOCH=2, TTA=2)
    out = text_outputs(execute(tmp_path, notebook, AUGMENT="flips", **params))
    assert "No submission.csv: the data has no test split (converted without --test;" in out
    assert "train 208, val 104 images (no test split: no submission)" in out  # said before training too
    written = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"metrics.json", "model.keras", "training_curves.png", "confusion_matrix.png"} <= written
    assert "submission.csv" not in written
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["test_rows"] == 0
    found = json.loads(out.split("EDITED ", 1)[1].splitlines()[0])
    assert "my_extra_layer" in found["layers"]
    assert found["lr"] == pytest.approx([0.000123, 0.000123])
    assert found["tta_views_differ"]
    assert found["batch_max"] == 0 and found["decoded_max"] > 0  # augment blanked every training image
