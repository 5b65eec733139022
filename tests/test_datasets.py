"""Where data is read from (nbkit.inputs.datasets, and the flowers notebooks' DATA_ROOT in
nbkit.competitions.flowers): a given folder, the attached Kaggle input, its GCS copy with the credential
flow of Kaggle's TPU docs, or the generated sample outside Kaggle."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest
from test_secrets import SECRETS_ENDPOINT, fake_value, on_kaggle  # noqa: F401  (fixture)

from nbkit.competitions import flowers
from nbkit.env import _Environment
from nbkit.errors import DataError, ParameterError, SecretError
from nbkit.inputs import datasets
from nbkit.inputs import secrets as kaggle_secrets
from nbkit.publish import scan

GCS_ENDPOINT = "/requests/CopyDatasetVersionToKnownGcsBucketRequest"


def kaggle_env(tmp_path: Path, tpu_vm: bool = False, tpu_address: str | None = None) -> _Environment:
    return _Environment("kaggle", tmp_path / "input", tmp_path / "working", tpu_vm, tpu_address)


def local_env(tmp_path: Path) -> _Environment:
    return _Environment("local", tmp_path / "data", tmp_path / "out", False, None)


def test_dataset_attached_on_kaggle_is_read_from_kaggle_input(tmp_path):
    (tmp_path / "input" / "my-tfrecords").mkdir(parents=True)
    found = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / "my-tfrecords") and not found.credentials
    assert "a TPU VM reads /kaggle/input directly" in found.reason
    gpu = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path))
    assert "GPU/CPU kernel" in gpu.reason


def test_a_dataset_in_the_newer_mount_folder_is_found(tmp_path):
    (tmp_path / "input" / "datasets" / "alice" / "my-tfrecords").mkdir(parents=True)
    found = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path))
    assert found.path == str(tmp_path / "input" / "datasets" / "alice" / "my-tfrecords")


def test_dataset_not_attached_on_kaggle_says_add_input(tmp_path):
    with pytest.raises(DataError, match="attach alice/missing with 'Add Input' \\(a private dataset"):
        datasets.locate("auto", "alice/missing", credential=lambda: None, environment=kaggle_env(tmp_path))


def test_explicit_data_root_and_bad_choices(tmp_path):
    assert datasets.locate(str(tmp_path), "a/b").reason == "DATA_ROOT was given"
    assert datasets.locate("gs://bucket/x", "a/b").path == "gs://bucket/x"
    with pytest.raises(DataError, match="does not exist"):
        datasets.locate(str(tmp_path / "nope"), "a/b")
    with pytest.raises(ParameterError, match="USE_GCS='maybe'"):
        datasets.locate("auto", "a/b", use_gcs="maybe")


def test_outside_kaggle_the_fallback_stands_in_or_it_is_an_error(tmp_path):
    stand_in = lambda environment: datasets.DataSource(str(tmp_path), "a stand-in")  # noqa: E731
    found = datasets.locate("auto", "alice/x", fallback=stand_in, environment=local_env(tmp_path))
    assert found.path == str(tmp_path)
    assert found.reason == "not on Kaggle (local) and kagglehub is off (NBKIT_KAGGLEHUB=off), so a stand-in for alice/x"
    with pytest.raises(DataError, match="alice/x is not here \\(local\\) and kagglehub is off .*: set DATA_ROOT"):
        datasets.locate("auto", "alice/x", environment=local_env(tmp_path))


@pytest.mark.parametrize("use_gcs, tpu_address", [("yes", None), ("auto", "grpc://10.0.0.2:8470")])
def test_private_gcs_path_runs_the_credential_flow_of_the_tpu_docs(on_kaggle, tmp_path, use_gcs, tpu_address):  # noqa: F811
    stub, served, routes = on_kaggle
    credential = json.dumps({"type": "authorized_user", "refresh_token": fake_value(), "client_id": "fake"})
    served["__gcloud_sdk_auth__"] = credential
    routes[GCS_ENDPOINT] = lambda body, headers: (
        200,
        {"wasSuccessful": True, "result": {"destinationBucket": f"gs://kds-fake/{body['MountSlug']}"}},
    )
    found = datasets.locate(
        "auto",
        "alice/my-tfrecords",
        use_gcs=use_gcs,
        credential=kaggle_secrets.use_gcloud_credential,
        environment=kaggle_env(tmp_path, tpu_address=tpu_address),
    )
    assert found.path == "gs://kds-fake/my-tfrecords" and found.credentials
    assert [r.path for r in stub.requests] == [SECRETS_ENDPOINT, GCS_ENDPOINT]
    assert Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text() == credential  # set_tensorflow_credential
    assert scan.known_secrets(environ={})[credential] == kaggle_secrets._GCLOUD_CREDENTIAL


def test_gcs_path_without_a_google_cloud_credential(on_kaggle, tmp_path):  # noqa: F811
    with pytest.raises(SecretError, match="Add-ons -> Google Cloud Services"):
        datasets.locate(
            "auto",
            "alice/x",
            use_gcs="yes",
            credential=kaggle_secrets.use_gcloud_credential,
            environment=kaggle_env(tmp_path),
        )


def test_public_data_for_a_remote_tpu_needs_no_credential(tmp_path, monkeypatch):
    fake = types.ModuleType("kaggle_datasets")
    fake.KaggleDatasets = lambda: types.SimpleNamespace(get_gcs_path=lambda slug: f"gs://kds-fake/{slug}")
    monkeypatch.setitem(sys.modules, "kaggle_datasets", fake)
    found = flowers.locate_data("auto", remote_tpu=True, environment=kaggle_env(tmp_path))
    assert found.path == f"gs://kds-fake/{flowers._COMPETITION}" and "GCS" in found.reason and not found.credentials


@pytest.mark.parametrize("mount", [flowers._COMPETITION, f"competitions/{flowers._COMPETITION}"])
def test_flowers_data_on_kaggle_is_the_attached_competition(tmp_path, mount):
    (tmp_path / "input" / mount).mkdir(parents=True)
    found = flowers.locate_data("auto", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / mount) and "is attached" in found.reason
    with pytest.raises(DataError, match="Add Input"):
        flowers.locate_data("auto", environment=kaggle_env(tmp_path / "elsewhere"))


def test_flowers_sample_is_generated_once_outside_kaggle(tmp_path, monkeypatch):
    from nbkit.images import sample

    made = []
    monkeypatch.setattr(
        sample, "make_sample", lambda root, num_classes: made.append(root) or (root / "written").touch()
    )
    first = flowers.locate_data("auto", environment=local_env(tmp_path))
    second = flowers.locate_data("sample", environment=local_env(tmp_path))
    assert len(made) == 1 and first.path == second.path == str(tmp_path / "out" / "sample-data")
    assert "generated sample" in first.reason and second.reason.startswith(
        "DATA_ROOT='sample', so the generated sample"
    )
