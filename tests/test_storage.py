"""gs:// through TensorFlow's gfile (nbkit.storage): its errors become DataErrors that say which
(no such bucket or path, no permission, no network), checked with a fake gfile raising TensorFlow's
own error classes; and `~` in the paths a user gives."""

from __future__ import annotations

import types

import pytest

from nbkit import storage
from nbkit.errors import DataError
from nbkit.images import layout
from nbkit.inputs import records

# What TensorFlow 2.21's gfile raised on this machine (no network) for gs://<any bucket>/a/b.
OFFLINE = (
    "Error executing an HTTP request: libcurl code 6 meaning 'Could not resolve hostname', error details: "
    "Could not resolve host: www.googleapis.com\n\t when reading metadata of gs://no-bucket/a/b"
)


def fake_gfile(monkeypatch, errors: dict[str, Exception], folders=()):
    """A gfile whose stat raises errors[path] (or errors["*"]), knows `folders`, and has no files."""

    def stat(path):
        error = errors.get(path, errors.get("*"))
        if error is not None:
            raise error
        return types.SimpleNamespace(is_directory=path.rstrip("/") in folders or path.endswith("/"), length=0)

    gfile = types.SimpleNamespace(
        stat=stat,
        listdir=lambda path: [],
        walk=lambda path, onerror=None: iter([(path, [], [])]),
        GFile=lambda path, mode: open("/dev/null", "rb"),
    )
    monkeypatch.setattr(storage, "_gfile", lambda: gfile)


@pytest.fixture
def tf_errors():
    import tensorflow as tf

    return tf.errors


def test_no_network_is_said_so_not_missing_files(monkeypatch, tf_errors):
    fake_gfile(monkeypatch, {"*": tf_errors.FailedPreconditionError(None, None, OFFLINE)})
    for call in (
        lambda: layout.find_files("gs://no-bucket/a/b", 192, "train"),
        lambda: records.list_files("gs://no-bucket/a/b"),
        lambda: storage.exists("gs://no-bucket/a/b/x.tfrec"),
    ):
        with pytest.raises(DataError) as error:
            call()
        assert str(error.value).startswith("Cannot reach Google Cloud Storage for gs://no-bucket/a/b")
        assert "is the internet on?" in str(error.value)
    fake_gfile(monkeypatch, {"*": tf_errors.UnavailableError(None, None, "connection reset")})
    with pytest.raises(DataError, match="Cannot reach Google Cloud Storage for gs://b/x .UnavailableError"):
        storage.is_dir("gs://b/x")


def test_a_bucket_that_does_not_exist(monkeypatch, tf_errors):
    missing = tf_errors.NotFoundError(None, None, "The specified bucket gs://no-bucket/ was not found.")
    fake_gfile(monkeypatch, {"*": missing})
    with pytest.raises(DataError) as error:
        records.list_files("gs://no-bucket/data")
    assert str(error.value).startswith(
        "gs://no-bucket/: no such bucket or path in Google Cloud Storage (The specified bucket gs://no-bucket/ was "
        "not found.). Check the gs:// URL"
    )


def test_a_path_that_does_not_exist_in_a_bucket(monkeypatch, tf_errors):
    fake_gfile(monkeypatch, {"gs://bucket/data": tf_errors.NotFoundError(None, None, "not found")})
    assert not storage.is_dir("gs://bucket/data") and not storage.exists("gs://bucket/data")
    with pytest.raises(DataError, match="Data root gs://bucket/data does not exist"):
        layout.find_files("gs://bucket/data", 192, "train")
    with pytest.raises(DataError, match="gs://bucket/data: no such bucket or path in Google Cloud Storage"):
        records.list_files("gs://bucket/data")


@pytest.mark.parametrize("error_class", ["PermissionDeniedError", "UnauthenticatedError"])
def test_no_permission_says_attach_or_set_up_the_credential(monkeypatch, tf_errors, error_class):
    fake_gfile(monkeypatch, {"*": getattr(tf_errors, error_class)(None, None, "403 Forbidden")})
    with pytest.raises(DataError) as error:
        layout.find_files("gs://kds-private/x", 192, "train")
    assert str(error.value).startswith("No permission to read gs://kds-private/x")
    assert f"({error_class}): attach the dataset" in str(error.value)
    assert "Google Cloud Services" in str(error.value)


def test_other_gfile_errors_are_named_and_other_exceptions_pass(monkeypatch, tf_errors):
    fake_gfile(monkeypatch, {"*": tf_errors.InternalError(None, None, "boom\nmore")})
    with pytest.raises(DataError, match=r"^Google Cloud Storage cannot give gs://b/x: InternalError: boom$"):
        storage.size("gs://b/x")
    error = ValueError("not gfile's")
    assert storage._gcs_error("gs://b/x", error) is error


def test_folders_and_files_that_are_there(monkeypatch):
    fake_gfile(monkeypatch, {}, folders={"gs://bucket/data"})
    assert storage.is_dir("gs://bucket/data") and storage.list_folder("gs://bucket/data") == []
    with storage.open_binary("gs://bucket/data/00-8x8-0.tfrec") as f:
        assert f.read() == b""


def test_a_leading_tilde_is_the_home_folder_wherever_a_user_gives_a_path(monkeypatch, tmp_path):
    from nbkit.handoff import package
    from nbkit.inputs import datasets
    from nbkit.publish import cli

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "data").mkdir()
    assert storage.user_path("~/data") == str(tmp_path / "data")
    assert storage.user_path("gs://b/~x") == "gs://b/~x" and storage.user_path("alice/x") == "alice/x"
    assert datasets.locate("~/data", "alice/flowers").path == str(tmp_path / "data")  # DATA_ROOT
    assert datasets.notebook_output("~/data", "flowers-train") == str(tmp_path / "data")  # RESUME_FROM
    assert package.find_packages("~/data", "unused") == [tmp_path / "data"]  # PACKAGES
    arguments = cli._parser().parse_args(["run", "~/nb.py", "--out", "~/k", "--outputs", "~/o"])
    assert (arguments.notebook, arguments.out, arguments.outputs) == tuple(
        str(tmp_path / n) for n in ("nb.py", "k", "o")
    )
    assert cli._parser().parse_args(["scan", "~/data"]).paths == [str(tmp_path / "data")]
    # OUTPUT_DIR: tests/test_atomic.py
