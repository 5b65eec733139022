"""Notebooks 02's and 05's own parameters, checked in-process from their sources: TTA refused where
mirroring misleads."""

from __future__ import annotations

import jupytext
import pytest
from conftest import REPO

from nbkit import staging
from nbkit.errors import ParameterError

NOTEBOOKS = ["02_flowers_classifier.py", "05_train_on_tpu.py"]


def setup_cell(name, **overrides):
    """The notebook's parameters (its defaults, then `overrides`) and its first cell, run up to where it takes
    the output folder (staging.start, stopped there): what the cell checks before anything else."""
    cells = [c for c in jupytext.read(REPO / "notebooks" / name).cells if c.cell_type == "code"]
    namespace = {}
    exec(cells[0].source, namespace)  # the parameters cell
    namespace.update(overrides)
    exec(cells[1].source, namespace)


class ReachedStaging(Exception):
    pass


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_tta_is_refused_with_no_augmentation(monkeypatch, name):
    """With AUGMENT="none" (a mirrored picture shows something else: digits, documents) TTA's mirrored views
    would mislead: TTA > 1 stops in the first cell, saying why and what to pass."""

    def start(*args, **kwargs):
        raise ReachedStaging

    monkeypatch.setattr(staging, "start", start)
    for tta in (2, 3, 4):
        with pytest.raises(ParameterError, match=f"TTA={tta} with AUGMENT='none': .* mirrored .* Use TTA=1"):
            setup_cell(name, AUGMENT="none", TTA=tta)
    for augment, tta in (("none", 1), ("flips", 2), ("standard", 4)):
        with pytest.raises(ReachedStaging):
            setup_cell(name, AUGMENT=augment, TTA=tta)
