"""Quiet start-up: drop TensorFlow's known-harmless C++ log lines, keep everything else."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# Native log lines TensorFlow prints on every machine without a GPU; anything else is kept.
_HARMLESS_NATIVE_LOGS = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|cudart_stub\.cc.*Could not find cuda drivers"
    r"|failed call to cuInit"
    r"|This TensorFlow binary is optimized to use available CPU instructions"
    r"|To enable the following instructions: .* rebuild TensorFlow"
    r"|oneDNN custom operations are on"  # printed before absl logging starts, whatever TF_CPP_MIN_LOG_LEVEL says
)


@contextlib.contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """Run a block that may import or start TensorFlow without its INFO lines and its known-harmless C++
    start-up lines, written straight to file descriptor 2 before TF_CPP_MIN_LOG_LEVEL applies (so only a
    redirect of the descriptor catches them); pass on the rest."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # INFO/WARNING lines such as TFRecordDataset's buffer size
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (some embedded interpreters): nothing to filter
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if not _HARMLESS_NATIVE_LOGS.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
