"""Notebook 03 run by papermill as if on Kaggle: the secret comes from a stub of Kaggle's user-secrets
service through a test copy of kaggle_secrets, and the executed notebook never contains it."""

from __future__ import annotations

import json
import os
import secrets

import papermill
import pytest
from conftest import ENGINE, REPO
from kaggle_stub import StubServer
from test_secrets import FAKE_KAGGLE, SECRETS_ENDPOINT, secrets_route

from nbkit.publish import scan as leaks

NOTEBOOK = REPO / "notebooks" / "03_private_dataset.ipynb"
DATASET = "alice/my-private-tfrecords"


@pytest.fixture(scope="module")
def attached_dataset(tmp_path_factory):
    """A Kaggle input folder with DATASET attached: a few TFRecords in the competition layout."""
    from nbkit.images import sample

    input_dir = tmp_path_factory.mktemp("kaggle-input")
    sample.make_sample(
        input_dir / DATASET.split("/")[1], num_classes=4, train_per_class=1, val_per_class=1, test_images=4
    )
    return input_dir


@pytest.fixture
def kaggle_kernel(monkeypatch, tmp_path, attached_dataset):
    """The environment of a Kaggle kernel, inherited by papermill's kernel; returns (stub, served secrets)."""
    token = "fake-jwt-" + secrets.token_hex(16)
    served: dict[str, str] = {}
    with StubServer({SECRETS_ENDPOINT: secrets_route(served, token)}) as stub:
        monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
        monkeypatch.setenv("KAGGLE_URL_BASE", stub.url)
        monkeypatch.setenv("KAGGLE_USER_SECRETS_TOKEN", token)
        # kaggle_secrets as in Kaggle's image, before the nbkit under test (a worktree's, not the installed one)
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(FAKE_KAGGLE), os.environ.get("PYTHONPATH")]))
        )
        monkeypatch.setenv("NBKIT_INPUT_DIR", str(attached_dataset))
        monkeypatch.setenv("NBKIT_WORKING_DIR", str(tmp_path / "working"))
        yield stub, served


def run(tmp_path, **params):
    output = tmp_path / "03.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(output),
        parameters={"DATASET": DATASET, **params},
        kernel_name="python3",
        engine_name=ENGINE,
        cwd=str(tmp_path),
        progress_bar=False,
    )
    return output


def outputs(path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_kaggle_secret_reaches_the_notebook_and_never_its_outputs(tmp_path, kaggle_kernel, attached_dataset):
    stub, served = kaggle_kernel
    served["NBKIT_TEST_TOKEN"] = value = "fake-" + secrets.token_hex(16)
    executed = run(tmp_path, SECRET_NAME="NBKIT_TEST_TOKEN", SECRET_REQUIRED=True)
    text = outputs(executed)
    assert "platform=kaggle" in text
    assert f"NBKIT_TEST_TOKEN: found in Kaggle user secrets ({len(value)} characters, value hidden)" in text
    assert [r.body["Label"] for r in stub.requests] == ["NBKIT_TEST_TOKEN"]  # asked Kaggle's service once
    assert f"{DATASET} is attached in " in text  # read from the Kaggle input folder, not fetched
    files = len(list(attached_dataset.rglob("*.tfrec")))
    assert f"{files} .tfrec files" in text and "record 1: {'id': \"bytes '000200000'\", 'image': 'bytes [" in text
    assert value not in executed.read_text()  # nowhere: outputs, sources, metadata
    assert leaks._scan([executed], secrets={value: "NBKIT_TEST_TOKEN"}) == []


def test_missing_required_kaggle_secret_stops_with_where_to_add_it(tmp_path, kaggle_kernel):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        run(tmp_path, SECRET_NAME="NBKIT_NOT_ATTACHED", SECRET_REQUIRED=True)
    assert error.value.ename == "SecretError"
    assert (
        "not found in Kaggle user secrets; to add it, attach the secret in the notebook editor: Add-ons -> Secrets"
        in error.value.evalue
    )
    assert (tmp_path / "03.ipynb").exists()


def test_missing_optional_secret_is_reported_and_the_notebook_goes_on(tmp_path, kaggle_kernel):
    text = outputs(run(tmp_path, SECRET_NAME="NBKIT_NOT_ATTACHED", RECORDS=1))
    assert "NBKIT_NOT_ATTACHED: not found in Kaggle user secrets; to add it" in text
    assert "record 1: " in text and "record 2: " not in text


def test_bad_parameter_stops_at_the_first_cell(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError) as error:
        run(tmp_path, DATA_ROOT="gs://bucket/my-private-tfrecords")
    assert error.value.ename == "ParameterError" and "nbkit reads and writes local folders" in error.value.evalue
