"""Push with the real kaggle CLI against a local stub of Kaggle's API.

kaggle 2.x ignores KAGGLE_API_ENVIRONMENT=TEST (its CLI builds the client with an explicit
environment: PROD, or http://localhost:80 for KAGGLE_API_ENVIRONMENT=LOCALHOST), so the CLI runs
with LOCALHOST and reaches the stub as an HTTP proxy; the stub sees the exact requests Kaggle would.
`test_kaggle_cli_still_ignores_the_test_environment` notices when that changes upstream.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys

import pytest
from conftest import REPO
from kaggle_stub import StubServer

from nbkit.errors import RunError, SecretError
from nbkit.publish import bundle, push

SAVE = "/api/v1/kernels.KernelsApiService/SaveKernel"
STATUS = "/api/v1/kernels.KernelsApiService/GetKernelSessionStatus"
NOTEBOOK_03 = REPO / "notebooks" / "03_private_dataset.py"


def saved(body: dict, headers: dict) -> tuple:
    owner, slug = body["slug"].split("/")
    return 200, {
        "ref": f"/code/{owner}/{slug}",
        "url": f"https://www.kaggle.com/code/{owner}/{slug}",
        "versionNumber": 4,
    }


def queued(body: dict, headers: dict) -> tuple:
    return 200, {"status": "QUEUED"}


@pytest.fixture
def kaggle_api(monkeypatch, tmp_path):
    """A stub Kaggle API, the CLI pointed at it, fake credentials in the environment, an empty HOME."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kaggle-config"))
    for name in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "XDG_CONFIG_HOME", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with StubServer({SAVE: saved, STATUS: queued}) as stub:
        monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "LOCALHOST")
        monkeypatch.setenv("HTTP_PROXY", stub.url)
        yield stub


@pytest.fixture
def logged_in(kaggle_api, monkeypatch):
    key = secrets.token_hex(16)  # shaped like a real key, generated per test
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    monkeypatch.setenv("KAGGLE_KEY", key)
    return kaggle_api, key


def bundle_03(tmp_path, **options):
    options = {"accelerator_name": "tpu-v5e-8", "datasets": ["alice/my-tfrecords"], "internet": False, **options}
    return bundle.write(NOTEBOOK_03, tmp_path / "kernels", owner="alice", **options)


@pytest.fixture
def bundled(tmp_path):
    return bundle_03(tmp_path)


def snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_push_sends_the_bundle_and_reports_url_and_status(logged_in, bundled):
    stub, key = logged_in
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "push", str(bundled)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (
        "pushed alice/03-private-dataset version 4: https://www.kaggle.com/code/alice/03-private-dataset"
        in result.stdout
    )
    assert "status: queued" in result.stdout
    assert [r.path for r in stub.requests] == [SAVE, STATUS]
    request = stub.requests[0]
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(f"alice:{key}".encode()).decode()
    body = request.body
    assert (body["slug"], body["newTitle"], body["language"], body["kernelType"]) == (
        "alice/03-private-dataset",
        "03 private dataset",
        "python",
        "notebook",
    )
    assert (body["enableTpu"], body["machineShape"], body["enableInternet"]) == (True, "TpuV5E8", False)
    assert body["datasetDataSources"] == ["alice/my-tfrecords"] and "dockerImage" not in body
    sent = json.loads(body["text"])  # the notebook itself, nbkit inside
    local = json.loads((bundled / "03-private-dataset.ipynb").read_text())
    assert [c["source"] for c in sent["cells"]] == ["".join(c["source"]) for c in local["cells"]]
    assert any("'nbkit/inputs/secrets.py': r" in c["source"] for c in sent["cells"])
    assert stub.requests[1].body == {"userName": "alice", "kernelSlug": "03-private-dataset"}
    assert key not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "answer, message",
    [
        ((400, {"code": 400, "message": "Kernel title is already in use"}), "Kernel title is already in use"),
        ((200, {"error": "Notebook exceeds the size limit"}), "Kernel push error: Notebook exceeds the size limit"),
        ((500, {"code": 500, "message": "Internal error"}), "Internal error"),
    ],
)
def test_server_error_reaches_the_user_and_the_bundle_is_kept(logged_in, bundled, answer, message):
    stub, _ = logged_in
    stub.routes[SAVE] = lambda body, headers: answer
    before = snapshot(bundled)
    with pytest.raises(RunError, match=message) as error:
        push.push(bundled)
    assert f"The bundle in {bundled} is kept" in str(error.value)
    assert snapshot(bundled) == before and [r.path for r in stub.requests] == [SAVE]


def test_push_without_login_says_how_to_log_in(kaggle_api, bundled):
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "push", str(bundled)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1
    assert "RunError: Not logged in to Kaggle: run `kaggle auth login`" in result.stderr
    assert kaggle_api.requests == [] and (bundled / "kernel-metadata.json").exists()


def test_a_leaking_bundle_is_not_pushed(logged_in, bundled):
    stub, key = logged_in
    notebook = bundled / "03-private-dataset.ipynb"
    notebook.write_text(notebook.read_text().replace("your-name/your-private-tfrecords", key, 1))
    with pytest.raises(
        SecretError, match="03-private-dataset.ipynb: cell .* source: the value of secret KAGGLE_KEY"
    ) as error:
        push.push(bundled)
    assert key not in str(error.value) and stub.requests == []


def test_push_of_a_folder_without_a_bundle(tmp_path):
    with pytest.raises(RunError, match="give a bundle folder, which `python -m nbkit bundle"):
        push.push(tmp_path)


def test_status_reports_a_failure_message(logged_in):
    stub, _ = logged_in
    stub.routes[STATUS] = lambda body, headers: (
        200,
        {"status": "ERROR", "failureMessage": "Your notebook tried to allocate more memory"},
    )
    assert push.status("alice/my-kernel") == "error: Your notebook tried to allocate more memory"


def test_kaggle_cli_still_ignores_the_test_environment(logged_in, monkeypatch, bundled):
    stub, _ = logged_in
    monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "TEST")  # kagglesdk maps it to http://localhost:7777 ...
    monkeypatch.setenv("HTTPS_PROXY", stub.url)  # ... but the CLI goes to api.kaggle.com (caught here, never sent)
    with pytest.raises(RunError, match="is kept; fix the problem and push again"):
        push.push(bundled)
    assert [(r.method, r.path) for r in stub.requests] == [("CONNECT", "api.kaggle.com:443")], (
        "the kaggle CLI now honours KAGGLE_API_ENVIRONMENT=TEST: test against localhost:7777 directly"
    )


@pytest.mark.parametrize(
    "invalid, kind",
    [
        ({"invalidCompetitionSources": ["flower-classification-with-tpu"]}, "competition"),
        ({"invalidDatasetSources": ["alice/my-tfrecords"]}, "dataset"),
        ({"invalidKernelSources": ["bob/gone"]}, "kernel"),
    ],
)
def test_a_rejected_source_is_an_error_not_a_success(logged_in, bundled, invalid, kind):
    stub, _ = logged_in
    stub.routes[SAVE] = lambda body, headers: (200, {**saved(body, headers)[1], **invalid})
    before = snapshot(bundled)
    with pytest.raises(RunError) as error:
        push.push(bundled)
    message = str(error.value)
    names = next(iter(invalid.values()))
    assert f"Kaggle did not attach these sources: {kind} {names}" in message
    assert "Kaggle made a version anyway (https://www.kaggle.com/code/alice/03-private-dataset)" in message
    assert f"The following are not valid {kind} sources" in message  # what the CLI said, verbatim
    assert f"The bundle in {bundled} is kept" in message and snapshot(bundled) == before
    assert [r.path for r in stub.requests] == [SAVE]  # no status asked for a broken push


def test_lines_nbkit_does_not_know_reach_the_user(logged_in, bundled):
    stub, _ = logged_in
    # The CLI compares its version with this header and prints a warning nbkit has no rule for.
    stub.routes[SAVE] = lambda body, headers: (*saved(body, headers), {"X-Kaggle-APIVersion": "99.0.0"})
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "push", str(bundled)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "Warning: Looks like you're using an outdated `kaggle` version" in result.stdout
    assert "(99.0.0)" in result.stdout and "status: queued" in result.stdout


def test_a_retired_accelerator_is_pushed_as_asked_with_a_warning(logged_in, tmp_path):
    stub, _ = logged_in
    pushed = push.push(bundle_03(tmp_path, accelerator_name="tpu-v3-8"))
    assert stub.requests[0].body["machineShape"] == "TpuV38"  # Kaggle decides; nbkit says what it will do
    assert (
        "warning: TpuV38 is retired on Kaggle: sessions that ask for it run on tpu-v5e-8 (TpuV5E8) instead. "
        "Ask for --accelerator tpu-v5e-8."
    ) in pushed.splitlines()


def test_push_output_of_kaggle_2_2_5_keeps_its_warnings():
    # Exact text of kaggle 2.2.5 (stdout + stderr) for a retired machine shape; 2.2.4, installed here, prints none.
    output = (
        "⚠ Warning: 'TpuV38' is retired.\n  Sessions run on the default TPU (TpuV5E8) instead.\n"
        "Kernel version 7 successfully pushed.  Please check progress at https://www.kaggle.com/code/alice/x\n"
    )
    url, version, others = push._read_push_output(output)
    assert (url, version) == ("https://www.kaggle.com/code/alice/x", 7)
    assert others == ["⚠ Warning: 'TpuV38' is retired.", "Sessions run on the default TPU (TpuV5E8) instead."]
    with pytest.raises(RunError, match="Kernel push error: Competition not found"):
        push._read_push_output("Kernel push error: Competition not found\n")


def test_a_bundle_without_owner_is_not_pushed(logged_in, tmp_path, monkeypatch):
    stub, _ = logged_in
    monkeypatch.delenv("KAGGLE_USERNAME")
    folder = bundle.write(NOTEBOOK_03, tmp_path / "kernels")
    with pytest.raises(RunError, match="has no owner yet .id INSERT_USERNAME_HERE/03-private-dataset.: a kernel id"):
        push.push(folder)
    assert stub.requests == []


def test_push_of_a_folder_that_does_not_exist(tmp_path):
    from nbkit.publish import cli

    with pytest.raises(RunError) as error:
        cli._run(cli._parser().parse_args(["push", str(tmp_path / "nope")]))
    assert str(error.value) == (
        f"No readable {tmp_path / 'nope' / 'kernel-metadata.json'} (FileNotFoundError): give a bundle folder, "
        "which `python -m nbkit bundle <notebook>` writes as build/kernels/<slug>."
    )
