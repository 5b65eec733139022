"""Secret hygiene: scans find known values and credential shapes, name the cell, never print the value."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import nbformat
import pytest
from conftest import REPO

from nbkit.errors import SecretError
from nbkit.inputs import secrets as kaggle_secrets
from nbkit.publish import scan as leaks


def fake_value() -> str:
    return "fake-" + secrets.token_hex(16)


def notebook(path, *cells, metadata=None):
    """Write a notebook whose cells are (source, outputs) pairs."""
    nb = nbformat.v4.new_notebook(metadata=metadata or {})
    for index, (source, outputs) in enumerate(cells, start=1):
        nb.cells.append(nbformat.v4.new_code_cell(source, outputs=outputs, execution_count=index))
    nbformat.write(nb, path)
    return path


def stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def fake_service_account() -> str:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "fake-project",
            "private_key_id": secrets.token_hex(20),
            "private_key": "-----BEGIN PRIVATE KEY-----\n"
            + secrets.token_urlsafe(48)
            + "\n-----END PRIVATE KEY-----\n",
            "client_email": "fake@fake-project.iam.gserviceaccount.com",
        }
    )


def test_known_value_in_an_output_is_found_by_cell_and_name(tmp_path):
    value = fake_value()
    path = notebook(tmp_path / "nb.ipynb", ("x = 1", []), ("print(token)", [stream(f"token is {value}\n")]))
    findings = leaks._scan([path], secrets={value: "WANDB_API_KEY"})
    assert [(f.where, f.kind) for f in findings] == [("cell 2 (code) output", "the value of secret WANDB_API_KEY")]
    with pytest.raises(SecretError) as error:
        leaks.check([path], secrets={value: "WANDB_API_KEY"})
    assert "cell 2 (code) output" in str(error.value) and value not in str(error.value)


def test_values_in_source_tracebacks_and_papermill_parameters_are_found(tmp_path):
    value = fake_value()
    error = nbformat.v4.new_output("error", ename="SecretError", evalue=f"bad {value}", traceback=[f"line {value}"])
    path = notebook(
        tmp_path / "nb.ipynb",
        (f"TOKEN = '{value}'", []),
        ("fail()", [error]),
        metadata={"papermill": {"parameters": {"TOKEN": value}}},
    )
    wheres = [f.where for f in leaks._scan([path], secrets={value: "TOKEN"})]
    assert wheres == ["cell 1 (code) source", "cell 2 (code) output", "notebook metadata"]


@pytest.mark.parametrize(
    "text, kind",
    [
        (fake_service_account(), "a GCP service-account JSON"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIfake", "a private key (GCP service-account JSON or PEM)"),
        (json.dumps({"username": "alice", "key": secrets.token_hex(16)}), "a Kaggle kaggle.json key"),
        ("KAGGLE_API_TOKEN=KGAT_" + secrets.token_hex(16), "a Kaggle API token (KGAT_...)"),
        (json.dumps({"refresh_token": "1//" + secrets.token_urlsafe(30)}), "a Google OAuth refresh token"),
        ("Bearer ya29." + secrets.token_urlsafe(30), "a Google OAuth access token"),
    ],
)
def test_credential_shapes_are_found_without_knowing_the_value(tmp_path, text, kind):
    path = notebook(tmp_path / "nb.ipynb", ("print(creds)", [stream(text)]))
    findings = leaks._scan([path], secrets={})
    assert kind in [f.kind for f in findings] and findings[0].where == "cell 1 (code) output"


def test_plain_files_and_folders_are_scanned_too(tmp_path):
    value = fake_value()
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "kernel-metadata.json").write_text(json.dumps({"title": value}))
    (tmp_path / "bundle" / "image.png").write_bytes(b"\x89PNG\xff\xfe")  # binary: skipped, no crash
    findings = leaks._scan([tmp_path / "bundle"], secrets={value: "X"})
    assert [(f.file.endswith("kernel-metadata.json"), f.where) for f in findings] == [(True, "file")]


def test_known_secrets_come_from_nbkit_env_names_dotenv_and_kaggle_json(tmp_path):
    values = [fake_value() for _ in range(4)]
    (tmp_path / ".env").write_text(f"MY_PASSWORD={values[0]}\n")
    (tmp_path / "kaggle").mkdir()
    (tmp_path / "kaggle" / "kaggle.json").write_text(json.dumps({"username": "alice", "key": values[1]}))
    kaggle_secrets._remember("FROM_NBKIT", values[2])
    environ = {
        "SERVICE_API_KEY": values[3],
        "KAGGLE_CONFIG_DIR": str(tmp_path / "kaggle"),
        "HOME_DIR": values[3] + "x",
        "SHORT_TOKEN": "abc",
        "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / ".env"),
    }
    known = leaks.known_secrets(environ, dotenv=[tmp_path / ".env"])
    assert known[values[0]] == "MY_PASSWORD" and known[values[1]] == "the key in kaggle.json"
    assert known[values[2]] == "FROM_NBKIT" and known[values[3]] == "SERVICE_API_KEY"
    assert values[3] + "x" not in known and "abc" not in known  # not secret-named; too short to scan for
    assert str(tmp_path / ".env") not in known  # a path to a credential file is not the credential


def test_redact_replaces_every_known_value():
    value = fake_value()
    assert leaks.redact(f"a {value} b {value}", [value]) == "a [REDACTED] b [REDACTED]"


def test_committed_notebooks_leak_nothing():
    assert leaks._scan(sorted((REPO / "notebooks").glob("*.ipynb")), secrets={}) == []


def test_scan_command_fails_naming_the_cell(tmp_path):
    leaky = notebook(tmp_path / "leaky.ipynb", ("print(key)", [stream(fake_service_account())]))
    clean = notebook(tmp_path / "clean.ipynb", ("print(1)", [stream("1\n")]))
    bad = subprocess.run(
        [sys.executable, "-m", "nbkit", "scan", str(clean), str(leaky)], capture_output=True, text=True
    )
    assert bad.returncode == 1
    assert "SecretError" in bad.stderr and "leaky.ipynb: cell 1 (code) output: a GCP service-account JSON" in bad.stderr
    good = subprocess.run([sys.executable, "-m", "nbkit", "scan", str(clean)], capture_output=True, text=True)
    assert good.returncode == 0 and "no secrets found" in good.stdout


def test_scan_finds_a_token_from_the_dotenv_beside_the_notebooks(tmp_path, monkeypatch):
    # The .env line has an inline comment: the value is what stands before it.
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    value = fake_value()
    (project / ".env").write_text(f"NBKIT_EXAMPLE_TOKEN={value} # the example token\n")
    leaky = notebook(project / "notebooks" / "leaky.ipynb", ("print(token.value)", [stream(value + "\n")]))
    monkeypatch.chdir(tmp_path)  # not the project: its .env is found beside the notebooks
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "scan", str(project / "notebooks")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout
    assert "leaky.ipynb: cell 1 (code) output: the value of secret NBKIT_EXAMPLE_TOKEN" in result.stderr
    assert value not in result.stderr + result.stdout
    assert [f.kind for f in leaks._scan([leaky])] == ["the value of secret NBKIT_EXAMPLE_TOKEN"]


def test_scan_of_a_path_that_does_not_exist_fails_naming_it(tmp_path):
    clean = notebook(tmp_path / "clean.ipynb", ("print(1)", [stream("1\n")]))
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "scan", str(clean), str(tmp_path / "notebok")], capture_output=True, text=True
    )
    assert result.returncode == 1 and "no secrets found" not in result.stdout
    assert result.stderr.strip() == (
        f"nbkit scan: ParameterError: {tmp_path / 'notebok'} does not exist: give notebooks, bundles or folders of "
        "them to scan, e.g. `python -m nbkit scan notebooks build/kernels`."
    )
