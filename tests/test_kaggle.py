"""nbkit.kaggle: one call for a secret on Kaggle, Colab or locally, and the private-dataset path."""

from __future__ import annotations

import json
import secrets
import sys
import types
from pathlib import Path

import pytest

from kaggle_stub import StubServer
from nbkit import kaggle, leaks
from nbkit.env import Environment
from nbkit.errors import DataError, ParameterError, SecretError

FAKE_KAGGLE = Path(__file__).parent / "fake_kaggle"
SECRETS_ENDPOINT = "/requests/GetUserSecretByLabelRequest"
GCS_ENDPOINT = "/requests/CopyDatasetVersionToKnownGcsBucketRequest"


def fake_value() -> str:
    return "fake-" + secrets.token_hex(16)  # generated per test: nothing real, nothing committed


def secrets_route(served: dict[str, str], token: str):
    """Kaggle's user-secrets service: the value for an attached label, an error otherwise."""

    def route(body: dict, headers: dict) -> tuple[int, dict]:
        if headers.get("Authorization") != f"Bearer {token}" or body.get("JWE") != token:
            return 401, {}
        if body["Label"] not in served:
            return 200, {"wasSuccessful": False, "errors": ["No user secrets exist for kernel"]}
        return 200, {"wasSuccessful": True, "result": {"secret": served[body["Label"]]}}

    return route


@pytest.fixture
def on_kaggle(monkeypatch, tmp_path):
    """Kaggle's secret clients (test copies) on sys.path, talking to a stub KAGGLE_URL_BASE."""
    token = fake_value()
    served: dict[str, str] = {}
    routes = {SECRETS_ENDPOINT: secrets_route(served, token)}
    with StubServer(routes) as stub:
        monkeypatch.syspath_prepend(str(FAKE_KAGGLE))
        for name in ("kaggle_secrets", "kaggle_datasets"):
            monkeypatch.delitem(sys.modules, name, raising=False)
        monkeypatch.setenv("KAGGLE_URL_BASE", stub.url)
        monkeypatch.setenv("KAGGLE_USER_SECRETS_TOKEN", token)
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
        yield stub, served, routes


def test_local_secret_from_the_environment_is_found_and_never_shown(monkeypatch):
    value = fake_value()
    monkeypatch.setenv("NBKIT_TEST_TOKEN", value)
    found = kaggle.secret("NBKIT_TEST_TOKEN", platform="local")
    assert found.found and found.value == value
    assert found.source == "environment variables and ./.env"
    for shown in (repr(found), str(found), found.describe()):
        assert value not in shown
    assert f"{len(value)} characters" in found.describe()
    assert leaks.known_secrets(environ={})[value] == "NBKIT_TEST_TOKEN"  # remembered for scans


def test_local_secret_from_a_dotenv_file(monkeypatch, tmp_path):
    value = fake_value()
    monkeypatch.delenv("NBKIT_DOTENV_TOKEN", raising=False)
    (tmp_path / ".env").write_text(f"# comment\nexport NBKIT_DOTENV_TOKEN='{value}'\nOTHER=1\n")
    assert kaggle.secret("NBKIT_DOTENV_TOKEN", platform="local", dotenv=tmp_path / ".env").value == value


def test_missing_local_secret_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("NBKIT_ABSENT_TOKEN", raising=False)
    with pytest.raises(SecretError, match=r"not found in environment variables and \./\.env.*export NBKIT_ABSENT_TOKEN="):
        kaggle.secret("NBKIT_ABSENT_TOKEN", platform="local", dotenv=tmp_path / ".env")
    optional = kaggle.secret("NBKIT_ABSENT_TOKEN", required=False, platform="local", dotenv=tmp_path / ".env")
    assert not optional.found and optional.value is None and "export NBKIT_ABSENT_TOKEN" in optional.describe()


def test_empty_secret_name_is_a_parameter_error():
    with pytest.raises(ParameterError, match="secret name"):
        kaggle.secret("")


def test_kaggle_secret_comes_from_the_user_secrets_service(on_kaggle):
    stub, served, _ = on_kaggle
    served["NBKIT_TEST_TOKEN"] = value = fake_value()
    found = kaggle.secret("NBKIT_TEST_TOKEN", platform="kaggle")
    assert found.value == value and found.source == "Kaggle user secrets"
    assert [(r.path, r.body["Label"]) for r in stub.requests] == [(SECRETS_ENDPOINT, "NBKIT_TEST_TOKEN")]


def test_missing_kaggle_secret_says_to_attach_it(on_kaggle):
    with pytest.raises(SecretError, match=r"not found in Kaggle user secrets.*Add-ons -> Secrets, add NBKIT_NOT_ATTACHED"):
        kaggle.secret("NBKIT_NOT_ATTACHED", platform="kaggle")


def test_unexpected_kaggle_answer_never_reaches_the_message(on_kaggle):
    _, _, routes = on_kaggle
    token = leaks.os.environ["KAGGLE_USER_SECRETS_TOKEN"]
    # The client's own error would quote this answer, token included.
    routes[SECRETS_ENDPOINT] = lambda body, headers: (200, {"wasSuccessful": True, "result": {"echo": body["JWE"]}})
    with pytest.raises(SecretError) as error:
        kaggle.secret("NBKIT_TEST_TOKEN", platform="kaggle")
    assert "Add-ons -> Secrets" in str(error.value) and token not in str(error.value)


def test_unreachable_kaggle_service_is_a_secret_error_without_the_chain(on_kaggle, monkeypatch):
    monkeypatch.setenv("KAGGLE_URL_BASE", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(SecretError, match="could not return NBKIT_TEST_TOKEN: ConnectionError") as error:
        kaggle.secret("NBKIT_TEST_TOKEN", platform="kaggle")
    assert error.value.__cause__ is None and error.value.__suppress_context__  # the request held the token


def test_outside_kaggle_the_kaggle_client_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "kaggle_secrets", None)  # `import kaggle_secrets` fails
    with pytest.raises(SecretError, match="run this notebook on Kaggle"):
        kaggle.secret("ANY_NAME", platform="kaggle")


@pytest.fixture
def colab(monkeypatch):
    """google.colab.userdata as Colab has it: get(name), or its own error classes."""
    userdata = types.ModuleType("google.colab.userdata")

    class SecretNotFoundError(Exception):
        pass

    class TimeoutException(Exception):
        pass

    stored: dict[str, object] = {}

    def get(name):
        if isinstance(stored.get(name), Exception):
            raise stored[name]
        if name not in stored:
            raise SecretNotFoundError(name)
        return stored[name]

    userdata.get, userdata.SecretNotFoundError, userdata.TimeoutException = get, SecretNotFoundError, TimeoutException
    package = types.ModuleType("google.colab")
    package.userdata = userdata
    monkeypatch.setitem(sys.modules, "google.colab", package)
    monkeypatch.setitem(sys.modules, "google.colab.userdata", userdata)
    return stored, TimeoutException


def test_colab_secrets(colab):
    stored, timeout = colab
    stored["NBKIT_TEST_TOKEN"] = value = fake_value()
    assert kaggle.secret("NBKIT_TEST_TOKEN", platform="colab").value == value
    with pytest.raises(SecretError, match="key icon"):
        kaggle.secret("NBKIT_MISSING", platform="colab")
    stored["NBKIT_HEADLESS"] = timeout("no frontend")
    with pytest.raises(SecretError, match="headless run cannot answer"):
        kaggle.secret("NBKIT_HEADLESS", platform="colab")


def kaggle_env(tmp_path: Path, tpu_vm: bool = False, tpu_address: str | None = None) -> Environment:
    return Environment("kaggle", tmp_path / "input", tmp_path / "working", tpu_vm, tpu_address, internet=False)


def test_dataset_attached_on_kaggle_is_read_from_kaggle_input(tmp_path):
    (tmp_path / "input" / "my-tfrecords").mkdir(parents=True)
    found = kaggle.dataset_path("alice/my-tfrecords", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / "my-tfrecords") and not found.credentials
    assert "a TPU VM reads /kaggle/input directly" in found.reason
    gpu = kaggle.dataset_path("alice/my-tfrecords", environment=kaggle_env(tmp_path))
    assert "GPU/CPU kernel" in gpu.reason


def test_dataset_not_attached_on_kaggle_says_add_input(tmp_path):
    with pytest.raises(DataError, match="attach the dataset alice/missing with 'Add Input'"):
        kaggle.dataset_path("alice/missing", environment=kaggle_env(tmp_path))


def test_explicit_data_root_and_bad_choices(tmp_path):
    assert kaggle.dataset_path("a/b", str(tmp_path)).reason == "DATA_ROOT was given"
    assert kaggle.dataset_path("a/b", "gs://bucket/x").path == "gs://bucket/x"
    with pytest.raises(DataError, match="does not exist"):
        kaggle.dataset_path("a/b", str(tmp_path / "nope"))
    with pytest.raises(ParameterError, match="use_gcs='maybe'"):
        kaggle.dataset_path("a/b", use_gcs="maybe")


@pytest.mark.parametrize("use_gcs, tpu_address", [("yes", None), ("auto", "grpc://10.0.0.2:8470")])
def test_gcs_path_runs_the_credential_flow_of_the_tpu_docs(on_kaggle, tmp_path, use_gcs, tpu_address):
    stub, served, routes = on_kaggle
    credential = json.dumps({"type": "authorized_user", "refresh_token": fake_value(), "client_id": "fake"})
    served["__gcloud_sdk_auth__"] = credential
    routes[GCS_ENDPOINT] = lambda body, headers: (200, {"wasSuccessful": True, "result": {"destinationBucket": f"gs://kds-fake/{body['MountSlug']}"}})
    found = kaggle.dataset_path("alice/my-tfrecords", use_gcs=use_gcs, environment=kaggle_env(tmp_path, tpu_address=tpu_address))
    assert found.path == "gs://kds-fake/my-tfrecords" and found.credentials
    assert [r.path for r in stub.requests] == [SECRETS_ENDPOINT, GCS_ENDPOINT]
    assert Path(leaks.os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text() == credential  # set_tensorflow_credential
    assert leaks.known_secrets(environ={})[credential] == kaggle.GCLOUD_CREDENTIAL


def test_gcs_path_without_a_google_cloud_credential(on_kaggle, tmp_path):
    with pytest.raises(SecretError, match="Add-ons -> Google Cloud Services"):
        kaggle.dataset_path("alice/x", use_gcs="yes", environment=kaggle_env(tmp_path))
