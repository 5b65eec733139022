"""Data, models and notebook outputs through the real kagglehub against a local stub of Kaggle: attach
in a simulated Kaggle notebook, download outside Kaggle with credentials, a competition whose rules
are not accepted, no credentials, Kaggle Models upload and download, RESUME_FROM by handle."""

from __future__ import annotations

import base64
import io
import json
import secrets
import zipfile
from pathlib import Path

import pytest
from kaggle_stub import StubServer
from test_datasets import kaggle_env, local_env

from nbkit.errors import DataError, ParameterError
from nbkit.handoff import ensemble, package, resume_from
from nbkit.images import flowers
from nbkit.inputs import datasets

API = "/api/v1"
COMPETITION = flowers._COMPETITION
STORAGE = "http://storage.example.invalid"  # where Kaggle's 302s point: reached through the stub as proxy
MODEL = "alice/flowers-model/keras/default"
ATTACH = "/kaggle-jwt-handler/AttachDatasourceUsingJwtRequest"


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def redirect(path: str):
    return lambda body, headers: (302, b"", {"Location": STORAGE + path})


def served(data: bytes):
    return lambda body, headers: (200, data, {"Last-Modified": "Mon, 05 Jan 2026 10:00:00 GMT"})


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """kagglehub on (conftest turns it off), pointed at a stub, no credentials, its cache in tmp_path."""
    monkeypatch.delenv("NBKIT_KAGGLEHUB")
    for name in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_KERNEL_RUN_TYPE", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "kaggle-config"))
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(tmp_path / "cache"))
    with StubServer({}) as stub:
        monkeypatch.setenv("KAGGLE_API_ENVIRONMENT", "LOCALHOST")  # http://localhost/api/v1/..., via the proxy
        monkeypatch.setenv("HTTP_PROXY", stub.url)
        yield stub


@pytest.fixture
def credentials(hub, monkeypatch):
    key = secrets.token_hex(16)  # generated per test
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    monkeypatch.setenv("KAGGLE_KEY", key)
    return hub, "Basic " + base64.b64encode(f"alice:{key}".encode()).decode(), key


@pytest.fixture
def in_kaggle_notebook(hub, monkeypatch, tmp_path):
    """A Kaggle notebook's environment: the data proxy is the stub, which mounts what it attaches."""
    token = "jwt-" + secrets.token_hex(8)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("KAGGLE_DATA_PROXY_URL", hub.url)
    monkeypatch.setenv("KAGGLE_USER_SECRETS_TOKEN", token)
    monkeypatch.setenv("KAGGLE_DATA_PROXY_TOKEN", "dp-" + secrets.token_hex(8))
    monkeypatch.setenv("KAGGLE_CACHE_MOUNT_FOLDER", str(tmp_path / "input"))

    def mount(folder: str, files: dict[str, bytes]):
        def attach(body: dict, headers: dict) -> tuple:
            if headers.get("X-Kaggle-Authorization") != f"Bearer {token}":
                return 401, {}
            for name, data in files.items():  # Kaggle mounts it before answering: kagglehub waits for it
                (tmp_path / "input" / folder / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / "input" / folder / name).write_bytes(data)
            return 200, {"wasSuccessful": True, "result": {"mountSlug": folder}}

        hub.routes[ATTACH] = attach

    return hub, mount


def test_a_competition_is_downloaded_outside_kaggle_with_credentials(credentials, tmp_path):
    stub, authorization, key = credentials
    stub.routes[f"{API}/competitions.CompetitionApiService/DownloadDataFiles"] = redirect("/c.zip")
    stub.routes["GET /c.zip"] = served(zipped({"tfrecords-jpeg-192x192/train/00-192x192-8.tfrec": b"records"}))
    found = flowers.locate_data("auto", environment=local_env(tmp_path))
    folder = tmp_path / "cache" / "competitions" / COMPETITION
    assert found.path == str(folder) and (folder / "tfrecords-jpeg-192x192/train/00-192x192-8.tfrec").is_file()
    assert found.reason == f"not on Kaggle (local), so kagglehub fetched {COMPETITION} into {folder}"
    first = stub.requests[0]
    assert first.body == {"competitionName": COMPETITION} and first.headers["Authorization"] == authorization
    assert key not in found.reason


def test_rules_not_accepted_say_where_to_accept_them(credentials, tmp_path, monkeypatch):
    stub, _, _ = credentials
    stub.routes[f"{API}/competitions.CompetitionApiService/DownloadDataFiles"] = lambda body, headers: (
        403,
        {"code": 403, "message": "Permission 'competitions.participate' was denied"},
    )
    from nbkit.images import sample

    monkeypatch.setattr(sample, "make_sample", lambda root, num_classes: root.mkdir(parents=True, exist_ok=True))
    found = flowers.locate_data("auto", environment=local_env(tmp_path))
    assert found.path == str(tmp_path / "out" / "sample-data")
    assert (
        f"not on Kaggle (local) and Kaggle refused {COMPETITION} (403): accept the competition's rules at "
        f"https://www.kaggle.com/competitions/{COMPETITION}/rules with this Kaggle account, then run again, "
        "so the generated sample" in found.reason
    )


def test_without_credentials_nothing_is_asked(hub, tmp_path):
    stand_in = lambda environment: datasets.DataSource(str(tmp_path), "a stand-in")  # noqa: E731
    found = datasets.locate("auto", "alice/my-tfrecords", fallback=stand_in, environment=local_env(tmp_path))
    assert found.reason == (
        "not on Kaggle (local) and no Kaggle credentials for kagglehub (kaggle.json, KAGGLE_API_TOKEN, or "
        "KAGGLE_USERNAME and KAGGLE_KEY), so a stand-in for alice/my-tfrecords"
    )
    assert hub.requests == []


def test_a_missing_dataset_falls_back_with_the_reason(credentials, tmp_path):
    stub, _, _ = credentials
    stub.routes[f"{API}/datasets.DatasetApiService/GetDataset"] = lambda body, headers: (404, {"code": 404})
    stand_in = lambda environment: datasets.DataSource(str(tmp_path), "a stand-in")  # noqa: E731
    found = datasets.locate("auto", "alice/nope", fallback=stand_in, environment=local_env(tmp_path))
    assert "Kaggle has no dataset alice/nope (404): check it against its kaggle.com URL, so a stand-in" in found.reason


def test_in_a_kaggle_notebook_kagglehub_attaches_what_is_not_attached(in_kaggle_notebook, tmp_path):
    stub, mount = in_kaggle_notebook
    mount("my-tfrecords", {"train/part-0.tfrec": b"records"})
    found = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert found.path == str(tmp_path / "input" / "my-tfrecords")
    assert found.reason == "alice/my-tfrecords was not attached, so kagglehub attached it"
    assert [(r.path, r.body) for r in stub.requests] == [
        (ATTACH, {"datasetRef": {"OwnerSlug": "alice", "DatasetSlug": "my-tfrecords"}})
    ]
    again = datasets.locate("auto", "alice/my-tfrecords", environment=kaggle_env(tmp_path, tpu_vm=True))
    assert "is attached" in again.reason and len(stub.requests) == 1  # attached now: read with no request


def test_in_a_kaggle_notebook_a_refused_competition_names_its_rules(in_kaggle_notebook, tmp_path):
    stub, _ = in_kaggle_notebook
    stub.routes[ATTACH] = lambda body, headers: (403, {})
    with pytest.raises(DataError) as error:
        flowers.locate_data("auto", environment=kaggle_env(tmp_path))
    assert f"https://www.kaggle.com/competitions/{COMPETITION}/rules" in str(error.value)
    assert f"attach {COMPETITION} with 'Add Input'" in str(error.value)


def write_package(folder: Path) -> Path:
    """A package as far as read_manifest checks it (the model file's bytes are not loaded here)."""
    from nbkit.images import flowers

    manifest = {
        "format": package.FORMAT,
        "format_version": package._FORMAT_VERSION,
        "model_name": "small_cnn",
        "image_size": 192,
        "input": package._INPUT_FORMAT,
        "dataset": package._dataset_fields(flowers._DATASET),
        "trained_with": {"keras": "3", "keras_backend": "jax"},
        "training": {},
        "metrics": {"f1_macro": 0.5},
        "check": {"logits": []},
    }
    folder.mkdir(parents=True)
    (folder / package.MANIFEST_FILE).write_text(json.dumps(manifest))
    (folder / package.MODEL_FILE).write_bytes(b"keras zip")
    (folder / package._METADATA_FILE).write_text("{}")
    return folder


def package_files(folder: Path) -> dict[str, bytes]:
    """What Kaggle Models holds of a published package: manifest and model."""
    written = write_package(folder)
    return {name: (written / name).read_bytes() for name in (package.MANIFEST_FILE, package.MODEL_FILE)}


def test_a_package_is_published_to_kaggle_models(credentials, tmp_path):
    stub, authorization, _ = credentials
    models = f"{API}/models.ModelApiService"
    stub.routes[f"{models}/GetModel"] = lambda body, headers: (404, {"code": 404, "message": "Model not found"})
    stub.routes[f"{models}/CreateModel"] = lambda body, headers: (200, {"ref": "alice/flowers-model"})
    stub.routes[f"{API}/blobs.BlobApiService/StartBlobUpload"] = lambda body, headers: (
        200,
        {"token": f"token-{body['name']}", "createUrl": f"{STORAGE}/upload/{body['name']}"},
    )
    stub.routes["PUT /upload/*"] = lambda body, headers: (200, {})
    stub.routes[f"{models}/CreateModelInstance"] = lambda body, headers: (200, {"ref": MODEL})
    folder = write_package(tmp_path / "model-package")
    assert package.publish_model(folder, MODEL) == f"https://www.kaggle.com/models/{MODEL}"
    uploaded = {r.path.rsplit("/", 1)[1]: r.raw for r in stub.requests if r.method == "PUT"}
    assert uploaded == {name: (folder / name).read_bytes() for name in (package.MODEL_FILE, package.MANIFEST_FILE)}
    created = next(r for r in stub.requests if r.path.endswith("/CreateModelInstance"))
    assert created.headers["Authorization"] == authorization
    assert (created.body["ownerSlug"], created.body["modelSlug"]) == ("alice", "flowers-model")
    instance = created.body["body"]
    assert (instance["instanceSlug"], instance["licenseName"]) == ("default", "Apache 2.0")
    assert sorted(f["token"] for f in instance["files"]) == ["token-manifest.json", "token-model.keras"]


def test_a_package_is_not_published_under_a_bad_handle_or_unfinished(credentials, tmp_path):
    stub, _, _ = credentials
    with pytest.raises(ParameterError, match="must be written owner/model/framework/variation"):
        package.publish_model(write_package(tmp_path / "p"), "alice/flowers-model")
    with pytest.raises(DataError, match="no manifest.json"):
        package.publish_model(tmp_path, MODEL)
    assert stub.requests == []


@pytest.mark.parametrize("kind", ["dataset", "notebook output"])
@pytest.mark.parametrize("handle", ["alice/train/3", "alice/train/versions/three", "alice/train/version/3"])
def test_a_versioned_handle_is_written_owner_slug_versions_n(kind, handle):
    with pytest.raises(ParameterError, match=r"must be written owner/slug\[/versions/N\]"):
        datasets.fetch(kind, handle)


def test_notebook_06_reads_a_package_by_its_kaggle_models_handle(credentials, tmp_path):
    stub, _, _ = credentials
    files = package_files(tmp_path / "p")
    models = f"{API}/models.ModelApiService"
    stub.routes[f"{models}/GetModelInstance"] = lambda body, headers: (200, {"versionNumber": 2})
    listing = {"files": [{"name": n, "size": len(d)} for n, d in files.items()], "nextPageToken": ""}
    stub.routes[f"{models}/ListModelInstanceVersionFiles"] = lambda body, headers: (200, listing)
    stub.routes[f"{models}/DownloadModelInstanceVersion"] = lambda body, headers: (
        302,
        b"",
        {"Location": f"{STORAGE}/model/{body['path']}"},
    )
    for name, data in files.items():
        stub.routes[f"GET /model/{name}"] = served(data)
    (folder,) = ensemble.find_packages(MODEL, tmp_path / "unused")
    assert folder == tmp_path / "cache" / "models" / "alice" / "flowers-model" / "keras" / "default" / "2"
    assert package.read_manifest(folder)["model_name"] == "small_cnn"
    stub.routes[f"{models}/GetModelInstance"] = lambda body, headers: (404, {"code": 404})
    with pytest.raises(DataError, match="PACKAGES: 'alice/gone/keras/default' is no folder here.*404"):
        ensemble.find_packages("alice/gone/keras/default", tmp_path / "unused")


def test_on_kaggle_a_package_is_attached_by_handle_or_found_attached(in_kaggle_notebook, tmp_path):
    stub, mount = in_kaggle_notebook
    files = package_files(tmp_path / "p")
    mount("flowers-model/keras/default/2", files)
    (folder,) = ensemble.find_packages(MODEL, tmp_path / "unused", tmp_path / "input")
    assert folder == tmp_path / "input" / "flowers-model" / "keras" / "default" / "2"
    assert stub.requests[0].body["modelRef"]["Framework"] == "keras"
    nested = tmp_path / "input2" / "models" / "alice" / "flowers-model" / "keras" / "default" / "1"
    write_package(nested)
    assert ensemble.find_packages("auto", tmp_path / "unused", tmp_path / "input2") == [nested]


def test_resume_from_a_kaggle_notebook_output(credentials, tmp_path):
    stub, _, _ = credentials
    kernels = f"{API}/kernels.KernelsApiService"
    stub.routes[f"{kernels}/GetKernel"] = lambda body, headers: (200, {"metadata": {"currentVersionNumber": 5}})
    stub.routes[f"{kernels}/DownloadKernelOutput"] = redirect("/output.zip")
    stub.routes["GET /output.zip"] = served(zipped({"flowers-train/checkpoints/state.json": b"{}"}))
    found = resume_from.notebook_output("alice/flowers-train", "flowers-train/checkpoints")
    assert Path(found, "state.json").is_file() and "notebooks/alice/flowers-train/output/versions/5" in found
    with pytest.raises(DataError, match="The output of the Kaggle notebook alice/flowers-train has no elsewhere"):
        resume_from.notebook_output("alice/flowers-train", "elsewhere")
    assert resume_from.notebook_output(str(tmp_path), "flowers-train/checkpoints") == str(tmp_path)  # a folder
