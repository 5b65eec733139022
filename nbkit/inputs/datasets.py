"""Where a Kaggle dataset's or competition's files are read from, and why: DATA_ROOT when given; on Kaggle
the attached input (else kagglehub attaches it), or its GCS copy where a remote TPU reads files itself;
elsewhere kagglehub, else the notebook's stand-in (e.g. the generated sample)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit import storage
from nbkit.errors import DataError
from nbkit.inputs import kaggle_hub
from nbkit.params import check_choice

GCS_CHOICES = ("auto", "yes", "no")


@dataclass(frozen=True)
class DataSource:
    path: str
    reason: str
    credentials: bool = False  # the GCS credential flow ran

    def describe(self) -> str:
        return f"{self.path}  ({self.reason})"


def locate(
    data_root: str,
    handle: str,
    *,
    use_gcs: str = "auto",
    remote_tpu: bool | None = None,
    credential: Callable[[], object] | None = None,
    fallback: Callable[[Any], DataSource] | None = None,
    environment: Any = None,
) -> DataSource:
    """Where to read `handle` (a dataset's "owner/slug", or a competition's slug) from. `use_gcs`: "yes", or
    "auto" for a `remote_tpu` (None: one the environment advertises); a private dataset's GCS copy needs
    the `credential` flow. `fallback(environment)` gives the stand-in outside Kaggle (else an error)."""
    check_choice("USE_GCS", use_gcs, GCS_CHOICES)
    if data_root != "auto":
        path = storage.user_path(data_root)
        if storage.is_remote(path) or storage.is_dir(path):
            return DataSource(path, "DATA_ROOT was given")
        raise DataError(
            f"DATA_ROOT={data_root!r} does not exist: give the folder (or gs:// URL) that holds the data, "
            "or use DATA_ROOT='auto'."
        )
    environment = environment or nbenv.detect()
    slug = handle.split("/")[-1]
    if remote_tpu is None:
        remote_tpu = environment.tpu_address is not None and not environment.tpu_vm
    if environment.platform == "kaggle":
        return _on_kaggle(handle, slug, environment, use_gcs, remote_tpu, credential)
    where = f"not on Kaggle ({environment.platform})"
    found, why_not = _through_kagglehub(handle, environment.platform)
    if found:
        return DataSource(found, f"{where}, so kagglehub fetched {handle} into {found}")
    if fallback is None:
        raise DataError(
            f"{handle} is not here ({environment.platform}) and {why_not}: set DATA_ROOT to a copy of its files."
        )
    stand_in = fallback(environment)
    return DataSource(stand_in.path, f"{where} and {why_not}, so {stand_in.reason} for {handle}")


def _through_kagglehub(handle: str, platform: str) -> tuple[str | None, str]:
    """(the folder kagglehub attached, mounted or downloaded, or None; why not)."""
    why_not = kaggle_hub.unavailable(platform)
    if why_not:
        return None, why_not
    try:
        return kaggle_hub.fetch("dataset" if "/" in handle else "competition", handle), ""
    except DataError as error:
        return None, str(error).rstrip(".")


def _attached_path(input_dir: Path, handle: str) -> Path | None:
    """/kaggle/input/<slug>, or the newer competitions/<slug> and datasets/<owner>/<slug>, where attached."""
    slug = handle.split("/")[-1]
    nested = f"datasets/{handle}" if "/" in handle else f"competitions/{slug}"
    return next((p for p in (input_dir / slug, input_dir / nested) if p.is_dir()), None)


def _on_kaggle(
    handle: str, slug: str, environment: Any, use_gcs: str, remote_tpu: bool, credential: Callable[[], object] | None
) -> DataSource:
    if use_gcs == "yes" or (use_gcs == "auto" and remote_tpu):
        why = "USE_GCS='yes'" if use_gcs == "yes" else "a remote TPU reads the files itself"
        if credential is None:
            return DataSource(_gcs_path(slug), f"{why}, so the GCS copy")
        credential()  # TensorFlow here and the TPU then read gs:// with it
        return DataSource(_gcs_path(slug), f"{why}, so the GCS copy, with this kernel's credential", True)
    attached = _attached_path(environment.input_dir, handle)
    if attached:
        machine = "a TPU VM" if environment.tpu_vm else "this GPU/CPU kernel"
        return DataSource(str(attached), f"{handle} is attached and {machine} reads /kaggle/input directly")
    found, why_not = _through_kagglehub(handle, "kaggle")
    if found:
        return DataSource(found, f"{handle} was not attached, so kagglehub attached it")
    private_note = " (a private dataset: only its owner and collaborators can)" if credential else ""
    raise DataError(
        f"{environment.input_dir / slug} is not there and {why_not}: attach {handle} with 'Add Input'{private_note}."
    )


def _gcs_path(slug: str) -> str:
    from kaggle_datasets import KaggleDatasets

    return KaggleDatasets().get_gcs_path(slug)
