"""Notebook 04's smoke run through torch_xla on the CPU (PJRT_DEVICE=CPU), in whatever environment
runs this file (the matrix environment of Kaggle's TPU image, whose torch_xla 2.8 is the floor nbkit supports)."""

from __future__ import annotations

import os
from unittest import mock

from conftest import check_submission, execute, text_outputs


def test_04_trains_through_torch_xla_and_submits(tmp_path):
    with mock.patch.dict(os.environ, {"PJRT_DEVICE": "CPU"}):
        out = text_outputs(execute(tmp_path, "04_pytorch_xla.ipynb", OUTPUT_DIR=str(tmp_path / "flowers")))
    assert "PyTorch/XLA on CPU: torch_xla is installed" in out and "trained on xla:0 x 1 core(s)" in out
    assert "learned (validation accuracy above 3x chance): True" in out
    check_submission(tmp_path / "work" / "sample-data", tmp_path / "flowers", ("model.pt",))
