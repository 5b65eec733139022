"""Kaggle in a notebook: user secrets and private datasets, the same call on Kaggle, Colab or a laptop.

`kaggle_secrets` and `kaggle_datasets` exist only inside Kaggle's image and `google.colab` only in
Colab, so they are imported inside the functions that need them. Secret values are kept out of
`repr`, messages and outputs; read them with `.value`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit import leaks
from nbkit.errors import DataError, ParameterError, SecretError

GCS_CHOICES = ("auto", "yes", "no")
GCLOUD_CREDENTIAL = "the Google Cloud credential of this kernel"
WHERE = {
    "kaggle": "Kaggle user secrets",
    "colab": "Colab secrets (google.colab.userdata)",
    "local": "environment variables and ./.env",
}
HOW_TO_ADD = {
    "kaggle": "attach the secret in the notebook editor: Add-ons -> Secrets, add {name} and tick it for this notebook",
    "colab": "add {name} in the key icon (Secrets) of the left sidebar and turn on 'Notebook access'",
    "local": "export {name}=... before starting Jupyter, or add a line {name}=... to ./.env (never commit .env)",
}


@dataclass(frozen=True)
class Secret:
    """A secret looked up by name: where it was looked for and, if found, its value (hidden from repr)."""

    name: str
    source: str  # where it was looked for: Kaggle user secrets, Colab secrets, environment/.env
    value: str | None = field(default=None, repr=False)
    hint: str = ""  # how to add it, when it was not found

    @property
    def found(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        """One line for the notebook, without the value."""
        if self.found:
            return f"{self.name}: found in {self.source} ({len(self.value)} characters, value hidden)"
        return f"{self.name}: not found in {self.source}; to add it, {self.hint}"


def username() -> str | None:
    """The Kaggle user name, from KAGGLE_USERNAME or kaggle.json (only the name is used)."""
    return os.environ.get("KAGGLE_USERNAME") or leaks.kaggle_json().get("username")


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
        raise SecretError(
            f"Kaggle user secrets could not return {name}: {type(error).__name__}: {leaks.redact(str(error))}. "
            "Turn on the secret for this notebook (Add-ons -> Secrets), check that the session is running."
        ) from None  # the chained exception holds the request, and the request holds a token


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


def _from_local(name: str, dotenv: str | Path) -> str | None:
    return os.environ.get(name) or leaks.dotenv_values(dotenv).get(name) or None


def secret(name: str, required: bool = True, platform: str | None = None, dotenv: str | Path = ".env") -> Secret:
    """Look up secret `name` where this notebook runs: Kaggle user secrets, Colab secrets, or the
    environment / a .env file. Missing and `required`: a SecretError saying where to add it."""
    if not name:
        raise ParameterError("A secret name is needed (e.g. 'WANDB_API_KEY').")
    platform = platform or nbenv.platform()
    if platform == "kaggle":
        value = _from_kaggle(name)
    elif platform == "colab":
        value = _from_colab(name)
    else:
        value = _from_local(name, dotenv)
    found = Secret(name, WHERE[platform], value, HOW_TO_ADD[platform].format(name=name))
    if value is not None:
        leaks.remember(name, value)
    elif required:
        raise SecretError(f"Secret {found.describe()}.")
    return found


@dataclass(frozen=True)
class DatasetPath:
    """Where a dataset's files are read from, and why there."""

    path: str  # a local folder or a gs:// URL
    reason: str
    credentials: bool = False  # the GCS credential flow ran

    def describe(self) -> str:
        return f"{self.path}  ({self.reason})"


def gcs_path(slug: str) -> str:
    """The gs:// path of a (private) Kaggle dataset, after the credential flow of Kaggle's TPU docs."""
    from kaggle_datasets import KaggleDatasets  # only inside Kaggle
    from kaggle_secrets import UserSecretsClient

    client = UserSecretsClient()
    try:
        credential = client.get_gcloud_credential()
    except Exception as error:  # NotFoundError when no Google Cloud account is attached
        raise SecretError(
            f"No Google Cloud credential for this kernel ({type(error).__name__}): attach one in "
            "Add-ons -> Google Cloud Services (Cloud Storage), or make the dataset public."
        ) from None
    leaks.remember(GCLOUD_CREDENTIAL, credential)
    client.set_tensorflow_credential(credential)  # TensorFlow here and the TPU read gs:// with it
    return KaggleDatasets().get_gcs_path(slug.split("/")[-1])


def dataset_path(
    dataset: str,
    data_root: str = "auto",
    use_gcs: str = "auto",
    sample_dir: str | Path | None = None,
    environment: Any = None,
) -> DatasetPath:
    """Where to read Kaggle dataset `dataset` ("owner/slug" or "slug") from, and why.

    data_root: "auto", or a folder / gs:// URL to use as is.
    use_gcs: "yes" runs the GCS credential flow of Kaggle's TPU docs and returns a gs:// path;
    "auto" does so only for a remote TPU (it reads files itself, so /kaggle/input is useless to it);
    TPU VMs and GPU/CPU kernels read /kaggle/input/<slug>. Outside Kaggle: the local sample data.
    """
    if use_gcs not in GCS_CHOICES:
        raise ParameterError(f"use_gcs={use_gcs!r}: use one of {', '.join(map(repr, GCS_CHOICES))}.")
    if data_root != "auto":
        if data_root.startswith("gs://") or Path(data_root).is_dir():
            return DatasetPath(data_root, "DATA_ROOT was given")
        raise DataError(f"DATA_ROOT={data_root!r} does not exist: give a folder or gs:// URL, or 'auto'.")
    environment = environment or nbenv.detect(probe_internet=lambda: False)
    slug = dataset.split("/")[-1]
    if environment.platform == "kaggle":
        remote_tpu = environment.tpu_address is not None and not environment.tpu_vm
        if use_gcs == "yes" or (use_gcs == "auto" and remote_tpu):
            why = "use_gcs='yes'" if use_gcs == "yes" else "a remote TPU reads the files itself"
            return DatasetPath(gcs_path(dataset), f"{why}, so the GCS copy, with this kernel's credential", True)
        attached = environment.input_dir / slug
        if attached.is_dir():
            machine = "a TPU VM" if environment.tpu_vm else "this GPU/CPU kernel"
            return DatasetPath(str(attached), f"the dataset is attached and {machine} reads /kaggle/input directly")
        raise DataError(f"{attached} is not there: attach the dataset {dataset} with 'Add Input' (it is private, so only its owner and collaborators can).")
    from nbkit import data, records

    sample = Path(sample_dir) if sample_dir else environment.working_dir / "sample-data"
    with records.quiet_tensorflow():  # the sample is written with TensorFlow, once
        root = data.resolve_root("sample", sample_dir=sample)
    return DatasetPath(root.path, f"not on Kaggle ({environment.platform}), so the local sample data stands in for {dataset}")
