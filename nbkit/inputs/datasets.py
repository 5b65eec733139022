"""Where a Kaggle dataset's or competition's files are read from, and why: DATA_ROOT when given; on Kaggle
the attached input (else kagglehub attaches it); elsewhere kagglehub, else the notebook's stand-in (e.g. the
generated sample).

Kaggle competitions, datasets, models and notebook outputs come through kagglehub (attached on Kaggle,
even offline; mounted in Colab; downloaded elsewhere), its errors as a DataError that says what to do.
NBKIT_KAGGLEHUB=off keeps nbkit from using it (`make test` sets it, so CI and a logged-in machine agree)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit.errors import DataError
from nbkit.params import check_handle


@dataclass(frozen=True)
class DataSource:
    path: str
    reason: str

    def describe(self) -> str:
        return f"{self.path}  ({self.reason})"


def locate(
    data_root: str,
    handle: str,
    *,
    fallback: Callable[[Any], DataSource] | None = None,
    environment: Any = None,
) -> DataSource:
    """Where to read `handle` (a dataset's "owner/slug", or a competition's slug) from.
    `fallback(environment)` gives the stand-in outside Kaggle (else an error)."""
    if data_root != "auto":
        path = Path(data_root).expanduser()
        if path.is_dir():
            return DataSource(str(path), "DATA_ROOT was given")
        what = "is a file, not a folder" if path.is_file() else "does not exist"
        raise DataError(
            f"DATA_ROOT={data_root!r} {what}: give the folder that holds the data (an archive unzipped), or use "
            "DATA_ROOT='auto'."
        )
    environment = environment or nbenv.detect()
    platform, slug = environment.platform, handle.split("/")[-1]
    if platform == "kaggle":  # /kaggle/input/<slug>, or the newer datasets/<owner>/<slug> and competitions/<slug>
        nested = f"datasets/{handle}" if "/" in handle else f"competitions/{slug}"
        for attached in (environment.input_dir / slug, environment.input_dir / nested):
            if attached.is_dir():
                return DataSource(str(attached), f"{handle} is attached in {environment.input_dir}")
    found, why_not = through_kagglehub(handle, platform)
    if found and platform == "kaggle":
        return DataSource(found, f"{handle} was not attached, so kagglehub attached it")
    where = f"not on Kaggle ({platform})"
    if found:
        return DataSource(found, f"{where}, so kagglehub fetched {handle} into {found}")
    if platform == "kaggle":
        private = " (if it is private, only its owner and collaborators can)" if "/" in handle else ""
        raise DataError(
            f"{environment.input_dir / slug} is not there and {why_not}: attach {handle} with 'Add Input'{private}."
        )
    if fallback is None:
        raise DataError(f"{handle} is not here ({platform}) and {why_not}: set DATA_ROOT to a copy of its files.")
    stand_in = fallback(environment)
    return DataSource(stand_in.path, f"{where} and {why_not}, so {stand_in.reason} for {handle}")


def generated_sample(
    environment: Any, folder: str, generator: Callable[[], Callable[[Path], Path]], competition: str, holding: str
) -> DataSource:
    """A notebook's stand-in outside Kaggle: `generator()` imports the sample's writer, which writes it into the
    working folder's `folder` the first time. A kernel bundle leaves the generators out (on Kaggle the data is
    attached): then a DataError says to attach `competition`, or to give DATA_ROOT `holding`."""
    try:
        write = generator()
    except ImportError:
        raise DataError(
            "This notebook's bundled nbkit has no sample generator (a kernel bundle is made for Kaggle, where the data "
            f"is attached): on Kaggle, attach {competition} with 'Add Input'; elsewhere set DATA_ROOT to {holding}."
        ) from None
    path = write(environment.working_dir / folder)
    return DataSource(str(path), f"the generated sample in {path} stands in")


def through_kagglehub(handle: str, platform: str, kind: str = "") -> tuple[str | None, str]:
    """(the folder kagglehub attached, mounted or downloaded, or None; why not): a `kind` of _KINDS, by default
    a dataset (owner/slug) or a competition (slug)."""
    if os.environ.get(_SWITCH, "").lower() == "off":
        return None, f"kagglehub is off ({_SWITCH}=off)"
    try:
        from kagglehub import config
    except ImportError:
        return None, "kagglehub is not installed (pip install kagglehub)"
    if platform == "local":  # a Kaggle notebook attaches without credentials; Colab has its own secrets
        try:
            if not config.get_kaggle_credentials():
                return None, f"no Kaggle credentials for kagglehub ({_LOGIN})"
        except ValueError as error:  # a kaggle.json it cannot read
            return None, f"kagglehub cannot read the Kaggle credentials ({error})"
    try:
        return fetch(kind or ("dataset" if "/" in handle else "competition"), handle), ""
    except DataError as error:
        return None, str(error).rstrip(".")


# ---- kagglehub --------------------------------------------------------------------------------------

_SWITCH = "NBKIT_KAGGLEHUB"
_KINDS = {  # kind -> (kagglehub function, how its handle is written, an example)
    "competition": ("competition_download", "slug", "flower-classification-with-tpus"),
    "dataset": ("dataset_download", "owner/slug[/versions/N]", "alice/flowers-tfrecords"),
    "model": ("model_download", "owner/model/framework/variation[/version]", "alice/flowers-model/keras/default"),
    "notebook output": ("notebook_output_download", "owner/slug[/versions/N]", "alice/flowers-train"),
}
_LOGIN = "kaggle.json, KAGGLE_API_TOKEN, or KAGGLE_USERNAME and KAGGLE_KEY"


def kagglehub_failure(kind: str, handle: str, error: Exception, doing: str = "get") -> str:
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
    function, form, example = _KINDS[kind]
    check_handle(kind, handle, form, example)
    import kagglehub

    try:
        return getattr(kagglehub, function)(handle)
    except Exception as error:  # kagglehub raises requests' errors, its own, and ValueError
        raise DataError(kagglehub_failure(kind, handle, error) + ".") from None
