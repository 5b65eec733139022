"""Kernel bundles: nbkit travels inside the notebook, kernel-metadata.json is checked before anything
is written, a failure keeps the old bundle, and a bundled notebook runs where nbkit is not installed."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
from conftest import REPO
from test_notebook_03 import DATASET, attached_dataset, kaggle_kernel  # noqa: E402, F401  (fixtures)
from test_secrets import FAKE_KAGGLE  # noqa: E402

from nbkit.errors import ParameterError, SecretError
from nbkit.inputs import secrets as kaggle_secrets
from nbkit.publish import bundle

NOTEBOOK_02 = REPO / "notebooks" / "02_flowers_classifier.py"
NOTEBOOK_03 = REPO / "notebooks" / "03_private_dataset.py"
ENGINE_SCRIPT = str(REPO / "nbkit" / "publish" / "engine.py")
DOCUMENTED_FIELDS = [
    "id",
    "title",
    "code_file",
    "language",
    "kernel_type",
    "is_private",
    "enable_gpu",
    "enable_tpu",
    "enable_internet",
    "machine_shape",
    "dataset_sources",
    "competition_sources",
    "kernel_sources",
    "model_sources",
]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_imports_are_followed_through_nbkit_and_its_sub_packages():
    code = "from nbkit import env, accel as a\nimport nbkit.images.layout\nfrom nbkit.images import checks\nimport os"
    assert bundle._imported_modules(code) == {
        "__init__",
        "env",
        "accel/__init__",
        "images/__init__",
        "images/layout",
        "images/checks",
    }
    assert bundle._imported_modules("from nbkit.errors import DataError") == {"__init__", "errors"}
    assert bundle._imported_modules("from nbkit import __version__") == {"__init__"}  # an attribute, not a module
    assert bundle._imported_modules("from nbkit.images.layout import find_files") == {
        "__init__",
        "images/__init__",
        "images/layout",
    }
    needed = bundle._modules_needed(["from nbkit.handoff import package"])
    # Closed under nbkit's own imports, lazy ones inside functions included (package -> datasets -> env -> ...).
    for module in needed:
        assert bundle._imported_modules(bundle.module_file(module).read_text()) - set(bundle._LEFT_OUT) <= set(
            needed
        ), module
    assert {"inputs/datasets", "env", "errors", "params"} <= set(needed)


def test_the_stand_in_sample_stays_out_unless_the_notebook_imports_it():
    needed = bundle._modules_needed(["from nbkit.images import flowers"])
    assert "images/flowers" in needed and not set(bundle._LEFT_OUT) & set(needed)
    assert {"images/sample", "images/writer"} <= set(bundle._modules_needed(["from nbkit.images import sample"]))
    with pytest.raises(ParameterError, match="nbkit.publish"):
        bundle._modules_needed(["from nbkit.publish import scan"])


def bundled_files(cell) -> dict:
    """The {path: source} the bundle cell writes (its NBKIT_FILES literal)."""
    import ast

    assignment = next(
        n for n in ast.parse(cell.source).body if isinstance(n, ast.Assign) and n.targets[0].id == "NBKIT_FILES"
    )
    return ast.literal_eval(assignment.value)


def test_bundle_holds_the_notebook_with_nbkit_inside_one_hidden_cell_and_checked_metadata(tmp_path):
    folder = bundle.write(
        NOTEBOOK_02,
        tmp_path,
        owner="alice",
        accelerator_name="tpu-v5e-8",
        competitions=["flower-classification-with-tpus"],
        internet=False,
    )
    assert folder == tmp_path / "02-flowers-classifier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["02-flowers-classifier"]  # no temporary folders left
    metadata = json.loads((folder / "kernel-metadata.json").read_text())
    assert list(metadata) == DOCUMENTED_FIELDS  # and no docker_image
    assert metadata["id"] == "alice/02-flowers-classifier" and metadata["title"] == "02 flowers classifier"
    assert (metadata["enable_tpu"], metadata["enable_gpu"], metadata["machine_shape"]) == (True, False, "TpuV5E8")
    assert (
        metadata["competition_sources"] == ["flower-classification-with-tpus"] and metadata["enable_internet"] is False
    )
    notebook = nbformat.read(folder / metadata["code_file"], as_version=4)
    bundled = [c for c in notebook.cells if bundle._BUNDLE_TAG in c.metadata.get("tags", [])]
    assert len(bundled) == 1
    cell = bundled[0]
    assert cell.metadata["_kg_hide-input"] is True and cell.metadata["jupyter"] == {"source_hidden": True}
    files = bundled_files(cell)
    assert {
        "nbkit/accel/__init__.py",
        "nbkit/accel/accelerator.py",
        "nbkit/accel/cache.py",
        "nbkit/images/checks.py",
        "nbkit/models.py",
        "nbkit/plots.py",
    } <= set(files)
    assert files["nbkit/images/checks.py"] == (REPO / "nbkit" / "images" / "checks.py").read_text()  # verbatim
    assert not [name for name in files if name.startswith(("nbkit/publish/", "nbkit/pytorch/"))]
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])][0]
    assert notebook.cells.index(cell) == notebook.cells.index(parameters) + 1  # title, intro, parameters first
    assert notebook.cells[0].source.startswith("# Image classifier on TPU")
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


@pytest.mark.parametrize(
    "name, flags",
    [
        ("tpu-v5e-8", (False, True, "TpuV5E8")),
        ("tpu-v6e-8", (False, True, "TpuV6E8")),
        ("gpu-t4x2", (True, False, "NvidiaTeslaT4")),
        ("cpu", (False, False, None)),
        ("TpuV38", (False, True, "TpuV38")),
        ("tpuv5e8", (False, True, "TpuV5E8")),  # shapes in any case, as the kaggle CLI takes them
    ],
)
def test_accelerator_names_map_to_machine_shapes(name, flags):
    metadata = bundle._kernel_metadata("alice", "My TPU kernel", name)
    assert (metadata["enable_gpu"], metadata["enable_tpu"], metadata["machine_shape"]) == flags


@pytest.mark.parametrize(
    "name, instead",
    [
        ("tpu-v3-8", "tpu-v5e-8 (TpuV5E8)"),
        ("tpu-vm-v3-8", "tpu-v5e-8 (TpuV5E8)"),
        ("gpu-p100", "gpu-t4x2 (NvidiaTeslaT4)"),
        ("NvidiaTeslaP100", "gpu-t4x2 (NvidiaTeslaT4)"),
    ],
)
def test_retired_accelerators_are_accepted_with_a_warning_naming_what_runs(name, instead):
    assert bundle._kernel_metadata("alice", "My TPU kernel", name)["machine_shape"]
    assert f"is retired on Kaggle: sessions that ask for it run on {instead} instead" in bundle.retired(name)
    assert name not in bundle.CURRENT


def test_current_accelerators_have_no_warning_and_come_first_in_the_help():
    assert bundle.CURRENT == ["tpu-v5e-8", "tpu-v6e-8", "gpu-t4x2", "cpu"]
    assert not [name for name in bundle.CURRENT if bundle.retired(name)]
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "bundle", "--help"], capture_output=True, text=True, check=True
    )
    assert "one of tpu-v5e-8, tpu-v6e-8, gpu-t4x2, cpu (default" in " ".join(result.stdout.split())


def test_docker_image_only_when_asked():
    assert "docker_image" not in bundle._kernel_metadata("alice", "My TPU kernel")
    pinned = bundle._kernel_metadata("alice", "My TPU kernel", docker_image="gcr.io/kaggle-images/python")
    assert pinned["docker_image"] == "gcr.io/kaggle-images/python"


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"accelerator_name": "tpu-v9"},
            "Unknown accelerator 'tpu-v9': use one of tpu-v5e-8, tpu-v6e-8, gpu-t4x2, cpu",
        ),
        ({"title": "abc"}, "Title 'abc' has 3 characters; Kaggle needs 5 to 50"),
        ({"title": "x" * 51}, "has 51 characters"),
        ({"owner": "not a user"}, "--owner='not a user' must be written a user name"),
        ({"title": "-- ** --"}, "has no letters or digits for the kernel's id"),
        ({"datasets": ["just-a-slug"]}, "--dataset='just-a-slug' must be written owner/slug"),
        (
            {"models": ["keras/efficientnet"]},
            "--model='keras/efficientnet' must be written owner/model/framework/variation",
        ),
        ({"competitions": ["Flower Classification"]}, "must be slugs as in the URL"),
    ],
)
def test_bad_input_is_refused_and_the_old_bundle_is_kept(tmp_path, monkeypatch, options, message):
    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-config"))
    kept = bundle.write(NOTEBOOK_03, tmp_path / "kernels", owner="alice", title="03 private dataset")
    before = snapshot(tmp_path / "kernels")
    with pytest.raises(ParameterError, match=message):
        bundle.write(NOTEBOOK_03, tmp_path / "kernels", **{"owner": "alice", "title": "03 private dataset", **options})
    assert snapshot(tmp_path / "kernels") == before and kept.is_dir()


def test_a_bundle_needs_no_kaggle_login(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE")}
    env.update(HOME=str(tmp_path / "home"), KAGGLE_CONFIG_DIR=str(tmp_path / "no-config"))
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "bundle", str(NOTEBOOK_02), "--out", str(tmp_path / "kernels")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    folder = tmp_path / "kernels" / "02-flowers-classifier"
    assert f"import {folder / '02-flowers-classifier.ipynb'} into Kaggle with File -> Import Notebook" in result.stdout
    assert "To push it, bundle again with --owner <your Kaggle user name> (or log in first)." in result.stdout
    metadata = json.loads((folder / "kernel-metadata.json").read_text())
    assert metadata["id"] == "INSERT_USERNAME_HERE/02-flowers-classifier" and metadata["machine_shape"] == "TpuV5E8"
    assert nbformat.read(folder / "02-flowers-classifier.ipynb", as_version=4).cells


def visible_code_lines(cells) -> int:
    """Lines of code a reader sees: code cells whose code Kaggle's editor does not hide."""
    return sum(
        len(c.source.splitlines()) for c in cells if c.cell_type == "code" and not c.metadata.get("_kg_hide-input")
    )


@pytest.mark.parametrize("notebook", sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py")), ids=lambda p: p.name)
def test_a_bundle_reads_like_its_notebook(notebook):
    import jupytext

    source = jupytext.read(notebook)
    bundled, modules = bundle.bundled_notebook(notebook)
    assert modules and abs(visible_code_lines(bundled.cells) - visible_code_lines(source.cells)) <= 15
    hidden = [i for i, c in enumerate(bundled.cells) if c.metadata.get("_kg_hide-input")]
    uses_nbkit = [i for i, c in enumerate(bundled.cells) if c.cell_type == "code" and "nbkit" in c.source]
    assert len(hidden) == 1 and hidden[0] < min(set(uses_nbkit) - set(hidden))  # runs before any nbkit import
    parameters = next(i for i, c in enumerate(bundled.cells) if "parameters" in c.metadata.get("tags", []))
    assert hidden[0] == parameters + 1 and bundled.cells[0].cell_type == "markdown"  # title, intro, parameters first


def test_missing_notebook_is_a_clear_error(tmp_path):
    with pytest.raises(ParameterError, match="does not exist: give a notebook"):
        bundle.write(tmp_path / "nope.py", tmp_path, owner="alice")


def test_a_notebook_that_leaks_is_not_bundled(tmp_path):
    value = "fake-" + secrets.token_hex(16)
    kaggle_secrets._remember("NBKIT_BUNDLE_TEST", value)
    leaky = tmp_path / "04_leaky.py"
    leaky.write_text(NOTEBOOK_03.read_text() + f"\n# %%\nprint('{value}')\n")
    with pytest.raises(SecretError, match="04_leaky.py: file: the value of secret NBKIT_BUNDLE_TEST") as error:
        bundle.write(leaky, tmp_path / "kernels", owner="alice")
    assert value not in str(error.value) and not (tmp_path / "kernels").exists()


def test_rebundling_replaces_the_old_bundle(tmp_path):
    first = bundle.write(NOTEBOOK_03, tmp_path, owner="alice")
    (first / "stale.txt").write_text("from an older bundle")
    second = bundle.write(NOTEBOOK_03, tmp_path, owner="alice", accelerator_name="gpu-t4x2")
    assert second == first and not (second / "stale.txt").exists()
    assert json.loads((second / "kernel-metadata.json").read_text())["machine_shape"] == "NvidiaTeslaT4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["03-private-dataset"]


@pytest.fixture
def fresh_python(tmp_path):
    """A new virtual environment without nbkit: it sees the project venv's packages through a .pth
    line (a plain path: the .pth files inside it, nbkit's editable install among them, are not run)."""
    venv = tmp_path / "fresh-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "project-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    kernel = tmp_path / "jupyter" / "kernels" / "fresh"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "fresh",
                "language": "python",
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), PYTHONNOUSERSITE="1")
    return python, env


def test_bundled_notebook_runs_on_kaggle_where_nbkit_is_not_installed(tmp_path, kaggle_kernel, fresh_python):
    # kaggle_kernel first: fresh_python copies the environment it set (a Kaggle kernel with the dataset attached)
    python, env = fresh_python
    run_dir = tmp_path / "run"  # not the repository, so nbkit cannot come from the current folder
    run_dir.mkdir()
    no_nbkit = subprocess.run([python, "-c", "import nbkit"], cwd=run_dir, env=env, capture_output=True, text=True)
    assert "No module named 'nbkit'" in no_nbkit.stderr  # the environment really lacks it
    folder = bundle.write(NOTEBOOK_03, tmp_path / "kernels", owner="alice")
    executed = run_dir / "out.ipynb"
    run = subprocess.run(
        [
            python,
            ENGINE_SCRIPT,  # papermill's command line, kernels on socket files; a script: no nbkit needed
            str(folder / "03-private-dataset.ipynb"),
            str(executed),
            "-k",
            "fresh",
            "--cwd",
            str(run_dir),
            "--no-progress-bar",
            "-p",
            "DATASET",
            DATASET,
        ],
        cwd=run_dir,
        env={**env, "PYTHONPATH": str(FAKE_KAGGLE)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    text = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells for o in c.get("outputs", []))
    assert "nbkit 0.2.0 from this notebook's bundle: " in text and "/nbkit-bundle-" in text
    assert "platform=kaggle" in text and f"{DATASET} is attached in " in text
    assert "record 3: {'id': " in text and str(REPO) not in text


def test_a_bundle_off_kaggle_says_it_has_no_sample_generator(tmp_path, fresh_python):
    python, env = fresh_python
    folder = bundle.write(NOTEBOOK_03, tmp_path / "kernels", owner="alice")
    run = subprocess.run(
        [
            python,
            ENGINE_SCRIPT,  # papermill's command line, kernels on socket files; a script: no nbkit needed
            str(folder / "03-private-dataset.ipynb"),
            str(tmp_path / "out.ipynb"),
            "-k",
            "fresh",
            "--cwd",
            str(tmp_path),
            "--no-progress-bar",
        ],
        cwd=tmp_path,
        env={**env, "NBKIT_WORKING_DIR": str(tmp_path / "work")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode != 0
    assert "DataError" in run.stderr and "bundled nbkit has no sample generator" in run.stderr


@pytest.mark.parametrize(
    "line, missing",
    [
        ("from nbkit import doesnotexist", "there is no module or name doesnotexist in nbkit"),
        ("from nbkit.images import nosuchmodule", "there is no module or name nosuchmodule in nbkit.images"),
        ("from nbkit.images.layout import nosuchname", "there is no name nosuchname in nbkit.images.layout"),
        ("import nbkit.images.nope", "there is no module nbkit.images.nope"),
        ("def later():\n    from nbkit.nope import x", "there is no module nbkit.nope"),
    ],
)
def test_a_notebook_importing_what_nbkit_lacks_is_not_bundled(tmp_path, line, missing):
    source = tmp_path / "07_typo.py"
    source.write_text(f"# %% [markdown]\n# # A title\n\n# %%\nx = 1\n\n# %%\nfrom nbkit import params, accel\n{line}\n")
    with pytest.raises(ParameterError) as error:
        bundle.write(source, tmp_path / "kernels", owner="alice")
    where = f"cell 3, line {1 + len(line.splitlines())}"  # after the cell's first import
    assert str(error.value).startswith(f"{source}: {where}: `{line.splitlines()[-1].strip()}`: {missing}. ")
    assert str(error.value).endswith("the bundled notebook would stop there with an ImportError on Kaggle.")
    assert not (tmp_path / "kernels").exists()


def test_the_bundle_command_refuses_an_import_nbkit_lacks(tmp_path):
    source = tmp_path / "07_typo.py"
    source.write_text("# %%\nfrom nbkit.images import nosuchmodule\n")
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "bundle", str(source), "--out", str(tmp_path / "kernels")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "nbkit bundle: ParameterError: " in result.stderr
    assert "cell 1, line 1: `from nbkit.images import nosuchmodule`: there is no module or name" in result.stderr
