"""Notebooks 02's and 05's own input pipeline and TTA parameters, run in-process from their sources
(bench/notebook.py executes a notebook's imports, constants and functions, not the run): the decoded-image
cache (CACHE), batches that depend only on SEED and the epoch, and TTA refused where mirroring misleads (and in 04)."""

from __future__ import annotations

import importlib.util
import shutil
from types import SimpleNamespace

import jupytext
import numpy as np
import pytest
from conftest import REPO

from nbkit import staging
from nbkit.errors import ParameterError
from nbkit.images import checks, layout, sample

NOTEBOOKS = ["02_flowers_classifier.py", "05_train_on_tpu.py"]
SIZE, BATCH, STEPS, EPOCHS = 32, 8, 3, 3  # 40 training images: an epoch of 3 batches leaves some out


def bench_notebook():
    """bench/notebook.py, by its path (`notebook` alone could be Jupyter's package)."""
    spec = importlib.util.spec_from_file_location("bench_notebook", REPO / "bench" / "notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train_files(tmp_path_factory):
    """A generated sample's training files: 10 classes x 4 images at 32 px, in 14 files (read interleaved)."""
    root = sample.make_sample(tmp_path_factory.mktemp("data"), 10, (SIZE,), 4, 1, 1)
    return layout.find_files(root, SIZE, "train")


def pipeline(name, files, fits=True, **config):
    """The notebook's `get_dataset` and a checked split of `files`, its data fitting in memory or not."""
    import tensorflow as tf

    split = checks.check_splits({"train": files}, SIZE, 10)["train"]
    data = SimpleNamespace(fits_in_memory=lambda s: fits and s is split)
    namespace = bench_notebook().load(
        10, REPO / "notebooks" / name, image_size=SIZE, GLOBAL_BATCH=BATCH, steps_per_epoch=STEPS, data=data, **config
    )
    tf.random.set_seed(namespace["SEED"])  # as the notebook's keras.utils.set_random_seed(SEED) does
    return namespace["get_dataset"], split


def batches(dataset):
    return [(images.numpy(), labels.numpy()) for images, labels in dataset]


def same(a, b):
    """The same batches: images and labels, in order."""
    pairs = zip(a, b)
    return len(a) == len(b) and all(np.array_equal(ia, ib) and np.array_equal(la, lb) for (ia, la), (ib, lb) in pairs)


def copies(files, folder):
    """Copies of `files` in `folder` (their names kept: they hold the record counts), for a test to move away."""
    folder.mkdir()
    return [shutil.copy(name, folder) for name in files]


def moved_away(files, folder):
    """Move `files` into `folder`: a pipeline that still reads them fails, one that kept the images does not."""
    folder.mkdir()
    for name in files:
        shutil.move(name, folder)


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("cache, fits", [("auto", True), ("memory", False)])
def test_training_images_are_decoded_once_and_kept_when_cached(tmp_path, train_files, name, cache, fits):
    files = copies(train_files, tmp_path / "data")
    get_dataset, split = pipeline(name, files, fits, CACHE=cache, EPOCHS=EPOCHS)
    train = get_dataset(split, training=True)
    moved_away(files, tmp_path / "elsewhere")  # every epoch comes from memory now
    assert len(batches(train)) == EPOCHS * STEPS


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("cache, fits", [("auto", False), ("none", True)])
def test_training_images_are_read_every_epoch_when_not_cached(tmp_path, train_files, name, cache, fits):
    import tensorflow as tf

    files = copies(train_files, tmp_path / "data")
    get_dataset, split = pipeline(name, files, fits, CACHE=cache, EPOCHS=EPOCHS)
    train = get_dataset(split, training=True)
    moved_away(files, tmp_path / "elsewhere")
    with pytest.raises(tf.errors.NotFoundError):
        batches(train)


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("augment", ["flips", "standard"])
def test_each_epoch_depends_only_on_seed_and_epoch_cached_or_not(train_files, name, augment):
    """Epoch e's batches are the same in every run, cached or not (a resumed run may decide CACHE="auto"
    otherwise), resumed at e or not (notebook 05 resumes on it); another SEED gives others."""
    runs = {}
    for cache in ("memory", "none"):
        get_dataset, split = pipeline(name, train_files, CACHE=cache, EPOCHS=EPOCHS, AUGMENT=augment)
        runs[cache] = [batches(get_dataset(split, training=True)) for _ in range(2)]
        runs[cache, "resumed"] = batches(get_dataset(split, training=True, first_epoch=1))
    get_dataset, split = pipeline(name, train_files, CACHE="memory", EPOCHS=EPOCHS, AUGMENT=augment, SEED=7)
    other_seed = batches(get_dataset(split, training=True))

    first = runs["memory"][0]
    assert len(first) == EPOCHS * STEPS
    assert same(first, runs["memory"][1]) and same(first, runs["none"][0]) and same(first, runs["none"][1])
    assert same(first[STEPS:], runs["memory", "resumed"]) and same(first[STEPS:], runs["none", "resumed"])
    assert not same(first[:STEPS], first[STEPS : 2 * STEPS])  # epochs differ from one another
    assert not same(first, other_seed)


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


@pytest.mark.parametrize("name", [*NOTEBOOKS, "04_pytorch_xla.py"])
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
