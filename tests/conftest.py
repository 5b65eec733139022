"""Shared test helpers: running Python in a fresh process (each Keras backend and device split
can be chosen only once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without the variables nbkit reads to choose devices and backends."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS", "ISTPUVM", "TPU_NAME", "COLAB_TPU_ADDR")}
    env.update(extra)
    return env


@pytest.fixture
def run_python():
    """Run a Python snippet in a new interpreter; return the CompletedProcess (stdout+stderr text)."""

    def run(code: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            cwd=REPO, env=clean_env(**env), capture_output=True, text=True, timeout=600,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"snippet failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    return run
