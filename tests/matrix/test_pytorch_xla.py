"""Notebook 04 through torch_xla on the CPU (PJRT_DEVICE=CPU), in whatever environment runs this file (the matrix
environment of Kaggle's TPU image, whose torch_xla 2.8 is the floor nbkit supports): what a TPU runs, bfloat16
autocast on the XLA device, the standard augmentation and the four test-time views. The float32 default through
the current torch_xla is nbval's run of the committed notebook; bfloat16 on it, tests/xla/test_runtime.py."""

from __future__ import annotations

import os
from unittest import mock

from conftest import check_04_learned_and_submitted, execute, text_outputs

from nbkit.images import sample as flower_sample


def test_04_trains_through_torch_xla_in_bfloat16_and_submits(tmp_path):
    # The sample at 48 px, what the notebook pools 192 px down to (the same network): bfloat16 is emulated on a CPU.
    sample = flower_sample.make_sample(tmp_path / "sample", 104, image_sizes=(48,))
    output_dir = tmp_path / "flowers"
    with mock.patch.dict(os.environ, {"PJRT_DEVICE": "CPU"}):
        out = text_outputs(
            execute(
                tmp_path,
                "04_pytorch_xla.ipynb",
                DATA_ROOT=str(sample),
                OUTPUT_DIR=str(output_dir),
                PRECISION="mixed_bfloat16",
                AUGMENT="standard",
                TTA=4,
            )
        )
    assert "PyTorch/XLA on CPU: torch_xla is installed, PJRT_DEVICE=CPU" in out
    assert "precision mixed_bfloat16 (PRECISION='mixed_bfloat16' was asked for)" in out
    assert "core 0 of 1: xla:0" in out  # printed by the worker process torch_xla.launch forked
    assert "trained on xla:0 x 1 core(s), global batch 16" in out
    metrics = check_04_learned_and_submitted(sample, out, output_dir, image_size=48)
    assert (metrics["device"], metrics["hardware"], metrics["cores"], metrics["epochs"]) == ("xla", "CPU", 1, 8)
    assert (metrics["precision"], metrics["augment"], metrics["tta"]) == ("mixed_bfloat16", "standard", 4)
