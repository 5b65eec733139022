"""Look into any TFRecord dataset, local or on GCS: list its files, show a few records' features."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Sequence

from nbkit.errors import DataError


@contextlib.contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """Run a block that may import or start TensorFlow without its harmless C++ start-up lines."""
    from nbkit.accel import quiet_native_logs

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # INFO lines such as TFRecordDataset's buffer size
    with quiet_native_logs():
        yield


def list_files(root: str, suffix: str = ".tfrec") -> list[str]:
    """Every file under `root` (a folder or a gs:// URL) whose name ends with `suffix`, sorted."""
    if root.startswith("gs://"):
        with quiet_tensorflow():
            import tensorflow as tf  # reads gs:// with the credential nbkit.kaggle.gcs_path set

            walk = [(folder, files) for folder, _, files in tf.io.gfile.walk(root)]
    else:
        walk = [(folder, files) for folder, _, files in os.walk(root)]
    found = sorted(f"{folder.rstrip('/')}/{name}" for folder, files in walk for name in files if name.endswith(suffix))
    if not found:
        raise DataError(f"No *{suffix} files under {root}: is it the right dataset, or another file type?")
    return found


def _describe(feature: object) -> str:
    kind = feature.WhichOneof("kind")  # bytes_list, int64_list or float_list
    values = getattr(feature, kind).value if kind else []
    if kind == "bytes_list":
        return "bytes " + ", ".join(f"[{len(v)}]" if len(v) > 40 else repr(v.decode(errors="replace")) for v in values)
    return f"{kind.split('_')[0]} {list(values)[:8]}" if kind else "empty"


def peek(files: Sequence[str], count: int = 3) -> list[dict[str, str]]:
    """The first `count` records of `files`, each as feature name -> short description
    (long byte strings, e.g. JPEGs, by length only). Works for any tf.train.Example records."""
    with quiet_tensorflow():
        import tensorflow as tf

        try:
            raws = [raw.numpy() for raw in tf.data.TFRecordDataset(list(files)).take(count)]
        except tf.errors.OpError as error:
            raise DataError(f"Cannot read records from {Path(files[0]).name} ...: {error.message}") from error
    examples = [tf.train.Example.FromString(raw) for raw in raws]
    return [{name: _describe(f) for name, f in sorted(e.features.feature.items())} for e in examples]
