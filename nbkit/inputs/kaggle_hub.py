"""Kaggle competitions, datasets, models and notebook outputs through kagglehub (attached on Kaggle, even
offline; mounted in Colab; downloaded elsewhere), its errors as a DataError that says what to do.
NBKIT_KAGGLEHUB=off keeps nbkit from using it (`make test` sets it, so CI and a logged-in machine agree)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from nbkit import storage
from nbkit.errors import DataError, ParameterError
from nbkit.params import check_handle

_SWITCH = "NBKIT_KAGGLEHUB"
_KINDS = {  # kind -> (kagglehub function, how its handle is written)
    "competition": ("competition_download", "slug"),
    "dataset": ("dataset_download", "owner/slug[/versions/N]"),
    "model": ("model_download", "owner/model/framework/variation[/version]"),
    "notebook output": ("notebook_output_download", "owner/slug[/versions/N]"),
}
_NOTEBOOK_OUTPUT = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(/versions/\d+)?$")
_LOGIN = "kaggle.json, KAGGLE_API_TOKEN, or KAGGLE_USERNAME and KAGGLE_KEY"
_MODEL_LICENSE = "Apache 2.0"  # of a model nbkit publishes; change it on the model's Kaggle page


def unavailable(platform: str) -> str | None:
    """Why kagglehub cannot be used on `platform` ("kaggle", "colab", "local"); None when it can."""
    if os.environ.get(_SWITCH, "").lower() == "off":
        return f"kagglehub is off ({_SWITCH}=off)"
    try:
        from kagglehub import config
    except ImportError:
        return "kagglehub is not installed (pip install kagglehub)"
    if platform != "local":  # a Kaggle notebook attaches without credentials; Colab has its own secrets
        return None
    try:
        found = config.get_kaggle_credentials()
    except ValueError as error:  # a kaggle.json it cannot read
        return f"kagglehub cannot read the Kaggle credentials ({error})"
    return None if found else f"no Kaggle credentials for kagglehub ({_LOGIN})"


def _why(kind: str, handle: str, error: Exception, doing: str = "get") -> str:
    name = type(error).__name__
    code = getattr(getattr(error, "response", None), "status_code", None)
    if name == "UnauthenticatedError":
        return f"kagglehub has no Kaggle credentials: set up {_LOGIN}"
    if code in (401, 403) and kind == "competition":
        return (
            f"Kaggle refused {handle} ({code}): accept the competition's rules at "
            f"https://www.kaggle.com/competitions/{handle}/rules with this Kaggle account, then run again"
        )
    if code in (401, 403):
        return f"Kaggle refused the {kind} {handle} ({code}): it is private to another account, or needs consent"
    if code == 404:
        return f"Kaggle has no {kind} {handle} (404): check it against its kaggle.com URL"
    if name in ("ConnectionError", "ProxyError", "Timeout", "ConnectTimeout"):
        return f"kagglehub could not reach Kaggle for {handle} (internet off?)"
    return f"kagglehub could not {doing} the {kind} {handle}: {name}: {error}"


def fetch(kind: str, handle: str) -> str:
    """The local folder of a Kaggle `kind` (see _KINDS) with this handle, from kagglehub."""
    function, form = _KINDS[kind]
    if kind == "competition":
        check_handle("competition", handle, form, "flower-classification-with-tpus")
    elif kind == "model":
        check_handle("model", handle, form, "alice/flowers-model/keras/default")
    elif not _NOTEBOOK_OUTPUT.match(handle):
        raise ParameterError(f"{kind} {handle!r} must be written {form}, for example 'alice/flowers-train'.")
    import kagglehub

    try:
        return getattr(kagglehub, function)(handle)
    except Exception as error:  # kagglehub raises requests' errors, its own, and ValueError
        raise DataError(_why(kind, handle, error) + ".") from None


def notebook_output(location: str, inside: str) -> str:
    """`location` if it is a folder here, else a Kaggle notebook's output (owner/slug[/versions/N]) fetched by
    kagglehub: the folder `inside` it."""
    local = storage.user_path(location)
    if Path(local).exists() or not _NOTEBOOK_OUTPUT.match(location):
        return local
    found = Path(fetch("notebook output", location)) / inside
    if not found.is_dir():
        raise DataError(f"The output of the Kaggle notebook {location} has no {inside}: is it the right notebook?")
    return str(found)


def upload_model(handle: str, folder: str | Path, version_notes: str = "", ignore: Any = None) -> str:
    """Publish `folder` as a Kaggle Models variation (a new version, or a private model); the model's URL."""
    check_handle("model", handle, "owner/model/framework/variation", "alice/flowers-model/keras/default")
    import kagglehub

    try:
        kagglehub.model_upload(handle, str(folder), _MODEL_LICENSE, version_notes, ignore_patterns=ignore)
    except Exception as error:  # as in fetch
        raise DataError(_why("model", handle, error, "publish") + ".") from None
    return f"https://www.kaggle.com/models/{handle}"
