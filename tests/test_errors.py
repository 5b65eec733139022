"""Six exception classes, one per kind of mistake, across the package: a value the user passed is a
ParameterError; bad data, a bad saved model, package or checkpoint a DataError; the accelerator and
Keras/JAX set-up an AcceleratorError; secrets a SecretError; running elsewhere a RunError. Each row
is a bad input, the error type it must raise, and words its message must contain."""

from __future__ import annotations

import pytest
from conftest import record_items
from test_accel_detect import PLAIN
from test_launch import stand_in

from nbkit import accel, errors, params
from nbkit.accel import accelerator
from nbkit.convert import run as convert
from nbkit.handoff import package, resume
from nbkit.images import layout, sample, writer
from nbkit.inputs import account, datasets, digits, secrets
from nbkit.publish import bundle, launch, push, scan


def bad_state(tmp_path):
    (tmp_path / resume._STATE_FILE).write_text("{not json")
    return resume.TrainingRun(tmp_path, {})


def mixed_rows(tmp_path):
    import numpy as np

    from nbkit import models as predict

    images = np.arange(4, dtype="float32").reshape(4, 1)
    honest = lambda x, training=False: x * 2.0  # noqa: E731  (a "model": one logit per row)
    predict.check_rows(honest, images, logits=np.roll(honest(images), 1, axis=0))


def leaking_file(tmp_path):
    (tmp_path / "nb.txt").write_text("-----BEGIN PRIVATE KEY-----")
    scan.check([tmp_path / "nb.txt"], secrets={})


def tfrecord_of_garbage(tmp_path):
    path = writer.write_records(tmp_path / "00-8x8-1.tfrec", [b"\x0a\xff"])
    record_items([str(path)], labeled=True)


def a_bad_weights_file(tmp_path):
    from nbkit import backbones

    backbones.backbone("MobileNetV2", (96, 96, 3), weights=str(tmp_path / "missing.weights.h5"))


def importing_what_nbkit_lacks(tmp_path):
    (tmp_path / "07_typo.py").write_text("# %%\nfrom nbkit import params\nfrom nbkit import doesnotexist\n")
    bundle.write(tmp_path / "07_typo.py", tmp_path / "kernels", owner="alice")


def kernel_globals(**injected):
    """A kernel's globals after the parameters cell, papermill's injected cell and the checking cell."""
    cells = [
        "EPOCHS: int = 0\nNUM_CLASSES = 104\n",
        "# Parameters\n" + "".join(f"{n} = {v!r}\n" for n, v in injected.items()),
    ]
    return {"EPOCHS": 0, "NUM_CLASSES": 104, **injected, "In": ["", *cells, "params.check_parameters(globals())"]}


def truncated_gzip_records(tmp_path):
    import gzip

    plain = writer.write_records(tmp_path / "plain.tfrec", [writer.encode_example({"image": b"x" * 999, "class": 1})])
    (tmp_path / "00-8x8-1.tfrec").write_bytes(gzip.compress(plain.read_bytes())[:40])
    record_items([tmp_path / "00-8x8-1.tfrec"], labeled=True)


def a_record_with(tmp_path, labeled, **features):
    path = writer.write_records(tmp_path / "00-8x8-1.tfrec", [writer.encode_example(features)])
    record_items([path], labeled=labeled)


def read_only_output_dir(tmp_path):
    import errno
    from pathlib import Path
    from unittest import mock

    from nbkit import staging

    with mock.patch.object(Path, "mkdir", side_effect=OSError(errno.EROFS, "Read-only file system")):
        staging.start(tmp_path / "out")


def a_remote_tpu(tmp_path):
    from unittest import mock

    from nbkit import accel

    with (
        mock.patch.dict("os.environ", {"COLAB_TPU_ADDR": "10.0.0.2:8470"}),
        mock.patch.object(accel.env, "is_tpu_vm", lambda: False),
    ):
        accel.setup()


def a_bundle_without_owner_run(tmp_path):
    (tmp_path / "kernel-metadata.json").write_text('{"id": "INSERT_USERNAME_HERE/my-kernel"}')
    push.push(tmp_path, command="run")


def a_kernel_that_is_no_handle(tmp_path):
    from nbkit.publish import cli

    cli._kernel("follow", "notaslug")


CASES = [
    # (what is wrong, the call, error type, words of the message)
    (
        "a value not among the choices",
        lambda t: params.check_choice("PROFILE", "fast", params._PROFILES),
        errors.ParameterError,
        "PROFILE='fast' is not allowed",
    ),
    ("a number below its minimum", lambda t: params.check_int("EPOCHS", -1), errors.ParameterError, "EPOCHS=-1"),
    ("a split name", lambda t: layout.split_folder(t, 192, "training"), errors.ParameterError, "split='training'"),
    ("a class count", lambda t: sample.make_sample(t, num_classes=0), errors.ParameterError, "num_classes=0"),
    ("no generated digits", lambda t: digits.generate(0, 1), errors.ParameterError, "num_train=0"),
    ("nothing to write", lambda t: writer.write_split([], t, 8, "train"), errors.ParameterError, "No records to write"),
    (
        "a dataset id",
        lambda t: account.dataset_metadata("Flowers Model", "Flowers model"),
        errors.ParameterError,
        "DATASET_ID='Flowers Model' must be written owner/slug",
    ),
    (
        "a kernel owner",
        lambda t: bundle._kernel_metadata("not a user", "My kernel"),
        errors.ParameterError,
        "--owner='not a user' must be written a user name",
    ),
    (
        "an accelerator",
        lambda t: bundle._kernel_metadata("alice", "My kernel", "tpu-v9"),
        errors.ParameterError,
        "Unknown accelerator",
    ),
    (
        "a gs:// URL for a folder",
        lambda t: params.check_parameters({"OUTPUT_DIR": "gs://b/out", "__annotations__": {"OUTPUT_DIR": "str"}}),
        errors.ParameterError,
        "OUTPUT_DIR='gs://b/out': nbkit reads and writes local folders, not Google Cloud Storage",
    ),
    ("a secret name", lambda t: secrets.secret(""), errors.ParameterError, "A secret name is needed"),
    ("a picture size", lambda t: convert.convert(t, t / "out", 8), errors.ParameterError, "--size 8"),
    (
        "a class folder without pictures",
        lambda t: [(t / "src" / c).mkdir(parents=True) for c in "ab"] and convert.convert(t / "src", t / "out", 32),
        errors.DataError,
        "holds no pictures",
    ),
    ("a backend", lambda t: accel._choose_backend("pytorch", **PLAIN), errors.ParameterError, "backend='pytorch'"),
    (
        "a missing data folder",
        lambda t: layout.find_files(t / "nowhere", 192, "train"),
        errors.DataError,
        "does not exist",
    ),
    ("a missing DATA_ROOT", lambda t: datasets.locate(str(t / "nowhere"), "a/b"), errors.DataError, "DATA_ROOT='"),
    ("a record that is not an Example", tfrecord_of_garbage, errors.DataError, "record 0 is not a tf.train.Example"),
    ("a missing weights file", a_bad_weights_file, errors.DataError, "no such file"),
    ("a missing package", lambda t: package.read_manifest(t / "none"), errors.DataError, "No model package at"),
    (
        "a precision the hardware cannot do",
        lambda t: accelerator._precision("mixed_float16", "cpu", None),
        errors.ParameterError,
        "PRECISION='mixed_float16' on a CPU",
    ),
    (
        "predictions that belong to other rows",
        mixed_rows,
        errors.AcceleratorError,
        "differs from the same image predicted alone",
    ),
    ("an unreadable training state", bad_state, errors.DataError, "is not a readable training state"),
    (
        "a missing local secret",
        lambda t: secrets.secret("NBKIT_SURELY_UNSET", platform="local", dotenv=t / ".env"),
        errors.SecretError,
        "not found in environment variables",
    ),
    ("a leaking file", leaking_file, errors.SecretError, "a private key"),
    (
        "a scan path that does not exist",
        lambda t: scan.check([t / "notebok"], secrets={}),
        errors.ParameterError,
        "notebok does not exist: give notebooks, bundles or folders of them to scan",
    ),
    (
        "a notebook importing a name nbkit lacks",
        importing_what_nbkit_lacks,
        errors.ParameterError,
        "cell 1, line 2: `from nbkit import doesnotexist`: there is no module or name doesnotexist in nbkit",
    ),
    (
        "a parameter the notebook lacks",
        lambda t: params.check_parameters(kernel_globals(EPOCH=3)),
        errors.ParameterError,
        "Unknown parameter EPOCH (did you mean EPOCHS?): this notebook's parameters are EPOCHS, NUM_CLASSES",
    ),
    (
        "a parameter of the wrong type",
        lambda t: params.check_parameters(kernel_globals(EPOCHS=2.5)),
        errors.ParameterError,
        "Parameter EPOCHS=2.5 is a float, not an int as declared (`EPOCHS: int`): pass a whole number. "
        "With papermill: `-p EPOCHS 0`",
    ),
    ("a truncated GZIP file", truncated_gzip_records, errors.DataError, "00-8x8-1.tfrec: its GZIP data breaks off"),
    (
        "a test id that is an int64",
        lambda t: a_record_with(t, False, image=b"jpeg", id=7),
        errors.DataError,
        "record 0: feature 'id' holds 1 int64 value, but a test record needs one bytes value (UTF-8 text)",
    ),
    (
        "a class that is bytes",
        lambda t: a_record_with(t, True, image=b"jpeg", **{"class": b"3"}),
        errors.DataError,
        "record 0: feature 'class' holds 1 bytes value, but a labeled record needs one int64 value",
    ),
    (
        "an OUTPUT_DIR on a read-only file system",
        read_only_output_dir,
        errors.ParameterError,
        "out' cannot be written (Read-only file system): give a writable folder (on Kaggle: under /kaggle/working)",
    ),
    (
        "a remote TPU (TPU Node)",
        a_remote_tpu,
        errors.AcceleratorError,
        "This runtime advertises a remote TPU (COLAB_TPU_ADDR=10.0.0.2:8470: a legacy TPU Node)",
    ),
    (
        "a kernel that is no handle",
        a_kernel_that_is_no_handle,
        errors.ParameterError,
        "'notaslug' is neither a bundle folder here nor a kernel handle",
    ),
    (
        "a run without a Kaggle owner",
        a_bundle_without_owner_run,
        errors.RunError,
        "pass --owner <you> to `python -m nbkit run`, then run again",
    ),
    (
        "a notebook that is not there",
        lambda t: bundle.write(t / "nope.py", t, owner="alice"),
        errors.ParameterError,
        "does not exist",
    ),
    (
        "a folder without a bundle",
        lambda t: push.push(t),
        errors.RunError,
        "kernel-metadata.json (FileNotFoundError): give a bundle folder",
    ),
    (
        "a bundle folder not there",
        lambda t: push.push(t / "nope"),
        errors.RunError,
        "nope/kernel-metadata.json (FileNotFoundError): give a bundle folder",
    ),
    (
        "a kernel that failed on Kaggle",
        lambda t: push._check_outputs(push._Session("error", "Out of memory", ()), t, [], "alice/k"),
        errors.RunError,
        "alice/k ended with status error: Out of memory",
    ),
    (
        "a launched process that fails",
        lambda t: launch.launch(stand_in(t, "fail"), 1, 1, [("MODE", "fail")], t / "out"),
        errors.RunError,
        "process 0 failed (exit code 1)",
    ),
    (
        "a Keras backend already chosen",
        lambda t: accel._choose_backend("jax", **{**PLAIN, "loaded": "tensorflow"}),
        errors.AcceleratorError,
        "Restart the kernel",
    ),
]


@pytest.mark.parametrize("case, call, error, words", CASES, ids=[c[0] for c in CASES])
def test_each_bad_input_raises_its_one_error(tmp_path, case, call, error, words):
    with pytest.raises(errors.NbkitError) as raised:
        call(tmp_path)
    assert type(raised.value) is error, f"{case}: {type(raised.value).__name__}: {raised.value}"
    assert words in str(raised.value)


def test_every_error_class_has_a_row():
    used = {error for _, _, error, _ in CASES}
    defined = {cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.NbkitError)}
    assert defined - used == {errors.NbkitError}


def test_there_are_six_error_classes_and_what_the_standard_library_catches():
    defined = {name for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, Exception)}
    assert defined == {"NbkitError", "ParameterError", "DataError", "AcceleratorError", "SecretError", "RunError"}
    # What callers that know only the standard library catch.
    builtin = {
        errors.ParameterError: ValueError,
        errors.DataError: OSError,
        errors.AcceleratorError: RuntimeError,
        errors.SecretError: LookupError,
        errors.RunError: RuntimeError,
    }
    for cls, base in builtin.items():
        assert cls.__bases__ == (errors.NbkitError, base) and cls.__doc__, cls
