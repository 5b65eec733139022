"""nbkit.inputs.secrets: one call for a secret on Kaggle, Colab or locally; values remembered, never shown."""

from __future__ import annotations

import os
import secrets
import sys
import types
from pathlib import Path

import pytest
from kaggle_stub import StubServer

from nbkit.errors import ParameterError, SecretError
from nbkit.inputs import secrets as kaggle
from nbkit.publish import scan

FAKE_KAGGLE = Path(__file__).parent / "fake_kaggle"
SECRETS_ENDPOINT = "/requests/GetUserSecretByLabelRequest"


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
        monkeypatch.delitem(sys.modules, "kaggle_secrets", raising=False)
        monkeypatch.setenv("KAGGLE_URL_BASE", stub.url)
        monkeypatch.setenv("KAGGLE_USER_SECRETS_TOKEN", token)
        monkeypatch.setenv("HOME", str(tmp_path))
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
    assert scan.known_secrets(environ={})[value] == "NBKIT_TEST_TOKEN"  # remembered for scans


def test_local_secret_from_a_dotenv_file(monkeypatch, tmp_path):
    value = fake_value()
    monkeypatch.delenv("NBKIT_DOTENV_TOKEN", raising=False)
    (tmp_path / ".env").write_text(f"# comment\nexport NBKIT_DOTENV_TOKEN='{value}'\nOTHER=1\n")
    assert kaggle.secret("NBKIT_DOTENV_TOKEN", platform="local", dotenv=tmp_path / ".env").value == value


def test_missing_local_secret_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("NBKIT_ABSENT_TOKEN", raising=False)
    with pytest.raises(
        SecretError, match=r"not found in environment variables and \./\.env.*export NBKIT_ABSENT_TOKEN="
    ):
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
    with pytest.raises(
        SecretError, match=r"not found in Kaggle user secrets.*Add-ons -> Secrets, add NBKIT_NOT_ATTACHED"
    ):
        kaggle.secret("NBKIT_NOT_ATTACHED", platform="kaggle")


def test_unexpected_kaggle_answer_never_reaches_the_message(on_kaggle):
    _, _, routes = on_kaggle
    token = os.environ["KAGGLE_USER_SECRETS_TOKEN"]
    # The client's own error would quote this answer, token included.
    routes[SECRETS_ENDPOINT] = lambda body, headers: (200, {"wasSuccessful": True, "result": {"echo": body["JWE"]}})
    with pytest.raises(SecretError) as error:
        kaggle.secret("NBKIT_TEST_TOKEN", platform="kaggle")
    assert "Add-ons -> Secrets" in str(error.value) and token not in str(error.value)


def test_unreachable_kaggle_service_is_a_secret_error_without_the_chain(on_kaggle, monkeypatch):
    monkeypatch.setenv("KAGGLE_URL_BASE", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(SecretError, match="could not return NBKIT_TEST_TOKEN: ConnectionError.") as error:
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


DOTENV_LINES = """NBKIT_EXAMPLE_TOKEN=abc123secretvalue # comment
export EXPORTED=exported-value
SPACED = spaced value here
SINGLE='single # not a comment'
DOUBLE="double \\"quoted\\" \\n newline"
HASHED=no#comment-here
EMPTY=
TABBED=tabbed\t# tab comment
QUOTED_COMMENT="value" # comment after quotes
URL=https://example.com/path?x=1#frag
KEY_WITH_EQUALS=a=b=c
  INDENTED=indented
# a comment line
"""


def test_dotenv_is_read_by_python_dotenvs_rules(tmp_path):
    import dotenv

    (tmp_path / ".env").write_text(DOTENV_LINES)
    assert kaggle.dotenv_values(tmp_path / ".env") == dotenv.dotenv_values(tmp_path / ".env")
    assert kaggle.dotenv_values(tmp_path / ".env")["NBKIT_EXAMPLE_TOKEN"] == "abc123secretvalue"


def test_a_secret_with_an_inline_comment_is_the_value_before_it(monkeypatch, tmp_path):
    monkeypatch.delenv("NBKIT_EXAMPLE_TOKEN", raising=False)
    (tmp_path / ".env").write_text("NBKIT_EXAMPLE_TOKEN=abc123secretvalue # the example token\n")
    assert kaggle.secret("NBKIT_EXAMPLE_TOKEN", platform="local", dotenv=tmp_path / ".env").value == "abc123secretvalue"
