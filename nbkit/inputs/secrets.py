"""Secrets in a notebook: one call on Kaggle, Colab or a laptop, and a memory of the values read so what is
published can be scanned for them. Values stay out of `repr`, messages and outputs; read `.value`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nbkit import env as nbenv
from nbkit.errors import ParameterError, SecretError

MIN_LENGTH = 8  # shorter values (e.g. "true", "1234") would match everywhere
_WHERE = {
    "kaggle": "Kaggle user secrets",
    "colab": "Colab secrets (google.colab.userdata)",
    "local": "environment variables and ./.env",
}
_HOW_TO_ADD = {
    "kaggle": "attach the secret in the notebook editor: Add-ons -> Secrets, add {name} and tick it for this notebook",
    "colab": "add {name} in the key icon (Secrets) of the left sidebar and turn on 'Notebook access'",
    "local": "export {name}=... before starting Jupyter, or add a line {name}=... to ./.env (never commit .env)",
}

_known: dict[str, str] = {}  # value -> a name to report it by


@dataclass(frozen=True)
class _Secret:
    name: str
    source: str  # where it was looked for: Kaggle user secrets, Colab secrets, environment/.env
    value: str | None = field(default=None, repr=False)
    hint: str = ""  # how to add it, when it was not found

    @property
    def found(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        if self.found:
            return f"{self.name}: found in {self.source} ({len(self.value)} characters, value hidden)"
        return f"{self.name}: not found in {self.source}; to add it, {self.hint}"


def secret(name: str, required: bool = True, platform: str | None = None, dotenv: str | Path = ".env") -> _Secret:
    """Secret `name` from Kaggle user secrets, Colab secrets, or the environment / .env; missing and
    `required`: a SecretError saying where to add it."""
    if not name:
        raise ParameterError("A secret name is needed (e.g. 'WANDB_API_KEY').")
    platform = platform or nbenv.platform()
    if platform == "kaggle":
        value = _from_kaggle(name)
    elif platform == "colab":
        value = _from_colab(name)
    else:
        value = os.environ.get(name) or dotenv_values(dotenv).get(name) or None
    found = _Secret(name, _WHERE[platform], value, _HOW_TO_ADD[platform].format(name=name))
    if value is not None:
        _remember(name, value)
    elif required:
        raise SecretError(f"Secret {found.describe()}.")
    return found


def _from_kaggle(name: str) -> str | None:
    try:
        from kaggle_secrets import UserSecretsClient  # only inside Kaggle's image
    except ImportError as error:
        raise SecretError("Kaggle's kaggle_secrets module is missing: run this notebook on Kaggle.") from error
    try:
        return UserSecretsClient().get_secret(name)
    except Exception as error:  # kaggle_secrets' classes share no base to catch
        if type(error).__name__ in ("BackendError", "CredentialError", "NotFoundError"):
            return None  # not attached to this notebook: Kaggle answers with an error, not an empty value
        # Only the error's type: its text and the chained exception can hold the request, and with it a token.
        raise SecretError(
            f"Kaggle user secrets could not return {name}: {type(error).__name__}. "
            "Turn on the secret for this notebook (Add-ons -> Secrets), check that the session is running."
        ) from None


def _from_colab(name: str) -> str | None:
    from google.colab import userdata  # only inside Colab

    try:
        return userdata.get(name)
    except Exception as error:  # SecretNotFoundError, NotebookAccessError, TimeoutException (headless)
        if type(error).__name__ == "SecretNotFoundError":
            return None
        raise SecretError(
            f"Colab could not return {name} ({type(error).__name__}): grant this notebook access in the "
            "Secrets panel; a headless run cannot answer Colab's prompt, so pass the value in an environment variable."
        ) from None


def dotenv_values(path: str | Path = ".env") -> dict[str, str]:
    """The NAME=value lines of a .env file ({} if none), by python-dotenv's rules (`export`, quotes, ` #`)."""
    path = Path(path)
    if not path.is_file():
        return {}
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.removeprefix("export ").split("=", 1)
        values[name.strip()] = _dotenv_value(value.strip())
    return values


def _dotenv_value(text: str) -> str:
    """Quoted up to the closing quote (escapes in double quotes), else up to a ` #` comment."""
    if text[:1] in ("'", '"'):
        quote, value, index = text[0], [], 1
        while index < len(text) and text[index] != quote:
            if quote == '"' and text[index] == "\\" and index + 1 < len(text):
                index += 1
                value.append({"n": "\n", "t": "\t", "r": "\r"}.get(text[index], text[index]))
            else:
                value.append(text[index])
            index += 1
        return "".join(value)
    for marker in (" #", "\t#"):
        text = text.split(marker, 1)[0]
    return text.strip()


def _remember(name: str, value: str) -> None:
    if value and len(value) >= MIN_LENGTH:
        _known[value] = name


def remembered() -> dict[str, str]:
    """The secret values read through nbkit in this session, value -> name."""
    return dict(_known)
