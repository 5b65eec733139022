"""Scan notebooks and bundles for the secret values this session knows and credential-shaped strings (a
finding names the file, the cell and the kind, never the value); redact known values from output."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from nbkit.errors import ParameterError, SecretError
from nbkit.inputs.account import kaggle_json
from nbkit.inputs.secrets import MIN_LENGTH, dotenv_values, remembered

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

# Credential shapes, found even when this session never saw the value.
_PATTERNS = {
    "a private key (GCP service-account JSON or PEM)": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "a GCP service-account JSON": re.compile(r'"type"\s*:\s*"service_account"'),
    "a Google OAuth refresh token": re.compile(r'"refresh_token"\s*:\s*"[^"]{20,}"'),
    "a Google OAuth access token": re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"),
    "a Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "a Kaggle API token (KGAT_...)": re.compile(r"\bKGAT_[0-9a-fA-F]{32}\b"),
    "a Kaggle kaggle.json key": re.compile(r'"key"\s*:\s*"[0-9a-f]{32}"'),
}


def _dotenv_files(paths: Iterable[str | Path] = ()) -> list[Path]:
    """The .env files a scan of `paths` reads: the current folder's, each scanned folder's and its parent's."""
    folders = [Path.cwd()]
    for path in map(Path, paths):
        folder = path if path.is_dir() else path.parent
        folders += [folder, folder.parent]
    return list(dict.fromkeys(folder.resolve() / ".env" for folder in folders))


def known_secrets(environ: Mapping[str, str] | None = None, dotenv: Iterable[str | Path] = (".env",)) -> dict[str, str]:
    """Secret values this session knows, value -> name: read through nbkit, in secret-named environment
    variables, in the `dotenv` files, and the kaggle.json key."""
    environ = os.environ if environ is None else environ
    found = {v: n for file in dotenv for n, v in dotenv_values(file).items()}
    # A path is where a secret lives (GOOGLE_APPLICATION_CREDENTIALS), not the secret.
    found.update({v: n for n, v in environ.items() if _SECRET_NAME.search(n) and not os.path.exists(v)})
    key = kaggle_json(environ).get("key")
    if key:
        found[key] = "the key in kaggle.json"
    found.update(remembered())
    return {v: n for v, n in found.items() if v and len(v) >= MIN_LENGTH}


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every known secret value replaced by [REDACTED]."""
    for value in sorted(known_secrets() if secrets is None else secrets, key=len, reverse=True):
        text = text.replace(value, "[REDACTED]")
    return text


class _Finding(NamedTuple):
    file: str
    where: str  # e.g. "cell 4 (code) output", "notebook metadata"
    kind: str


def _scan_text(text: str, secrets: Mapping[str, str]) -> list[str]:
    kinds = [f"the value of secret {name}" for value, name in secrets.items() if value in text]
    return kinds + [kind for kind, pattern in _PATTERNS.items() if pattern.search(text)]


def _strings(value: object) -> str:
    """Every string inside a JSON value, one per line (so escaped quotes do not hide a JSON credential)."""
    if isinstance(value, str):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return "\n".join(_strings(item) for item in items)


def _notebook_parts(notebook: Mapping) -> Iterator[tuple[str, str]]:
    for index, cell in enumerate(notebook.get("cells", []), start=1):
        label = f"cell {index} ({cell.get('cell_type', '?')})"
        source = cell.get("source", "")
        yield f"{label} source", "".join(source) if isinstance(source, list) else source
        outputs = cell.get("outputs", [])
        if outputs:
            yield f"{label} output", _strings(outputs)  # text, data, error values and tracebacks
        if cell.get("metadata"):
            yield f"{label} metadata", _strings(cell["metadata"])
    yield "notebook metadata", _strings(notebook.get("metadata", {}))  # papermill keeps parameters here


def _scan(paths: Iterable[str | Path], secrets: Mapping[str, str] | None = None) -> list[_Finding]:
    """Findings in every file under `paths`, by default for the secrets this session knows."""
    paths = list(map(Path, paths))
    for path in paths:
        if not path.exists():  # else a misspelt path would pass as "no secrets found"
            raise ParameterError(
                f"{path} does not exist: give notebooks, bundles or folders of them to scan, e.g. "
                "`python -m nbkit scan notebooks build/kernels`."
            )
    secrets = known_secrets(dotenv=_dotenv_files(paths)) if secrets is None else secrets
    findings = []
    for file in (f for path in paths for f in (sorted(path.rglob("*")) if path.is_dir() else [path]) if f.is_file()):
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (images, models) are not scanned
        parts: Iterable[tuple[str, str]] = [("file", text)]
        if file.suffix == ".ipynb":
            try:
                parts = _notebook_parts(json.loads(text))
            except ValueError:
                pass  # not JSON: scan it as text
        findings += [_Finding(str(file), where, kind) for where, part in parts for kind in _scan_text(part, secrets)]
    return findings


def check(paths: Iterable[str | Path], secrets: Mapping[str, str] | None = None) -> None:
    """Raise SecretError listing every finding (file and cell) if anything under `paths` leaks."""
    findings = _scan(paths, secrets)
    if findings:
        lines = "\n".join(f"  {': '.join(finding)}" for finding in findings)
        raise SecretError(
            f"Secrets found; remove them (clear the outputs, or stop printing the value) and try again:\n{lines}"
        )
