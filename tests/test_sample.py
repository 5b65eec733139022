"""The generated sample: the competition's layout and names, deterministic, the same drawings at every
size, learnable classes, and never half written."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import check_data

from nbkit import tfrecord
from nbkit.errors import DataError, ParameterError
from nbkit.images import description, flowers, layout, sample


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    return sample.make_sample(
        root, image_sizes=(64, 96), train_per_class=3, val_per_class=1, test_images=7, num_classes=5
    )


def test_the_flowers_competition_has_104_distinct_classes_and_no_description_file(made):
    assert len(flowers._CLASSES) == 104 == len(set(flowers._CLASSES)) == flowers._DATASET.num_classes
    assert flowers._DATASET.label_values == tuple(range(104)) and flowers._DATASET.metric == "f1_macro"
    read = flowers.load_description(made)
    assert read == flowers._DATASET and "read as Kaggle's flowers competition" in read.describe()
    with pytest.raises(DataError, match="No nbkit-dataset.json in .*python -m nbkit tfrecords"):
        description.load(made)  # generic code knows no competition


def test_flowers_reads_a_description_where_there_is_one(tmp_path):
    converted = replace(flowers._DATASET, title="Flowers, converted", image_sizes=(64,))
    description.write(tmp_path, converted)
    read = flowers.load_description(str(tmp_path))
    assert read == converted and read.origin == f"from {tmp_path / description.DESCRIPTION_FILE}"


def test_sample_has_the_competition_layout_and_names(made):
    for size in (64, 96):
        for split in layout.SPLITS:
            names = [p.rsplit("/", 1)[-1] for p in layout.find_files(made, size, split)]
            assert names and all(layout._COUNT_IN_NAME.search(n) for n in names), names
            assert names[0].startswith(f"00-{size}x{size}-")
    assert sum(1 for f in layout.find_files(made, 64, "train") for _ in tfrecord.read_records(f)) == 15


def test_sample_is_deterministic_and_the_same_at_every_size(made, tmp_path):
    again = sample.make_sample(
        tmp_path, image_sizes=(64,), train_per_class=3, val_per_class=1, test_images=7, num_classes=5
    )
    first = check_data(made, 64, 5, keep_items=True)
    assert [s.items for s in first.values()] == [s.items for s in check_data(again, 64, 5, keep_items=True).values()]
    ids = [key for _, key in check_data(made, 96, 5, names=["test"], keep_items=True)["test"].items]
    assert ids == [key for _, key in first["test"].items] and len(set(ids)) == 7


def test_sample_images_are_told_apart_by_class():
    rng = np.random.default_rng(0)
    a, b = sample._sample_image(0, 32, rng), sample._sample_image(1, 32, rng)
    assert a.dtype == np.uint8 and a.shape == (32, 32, 3) and np.abs(a.astype(int) - b).mean() > 20


def test_num_classes_out_of_range_is_a_parameter_error(tmp_path):
    with pytest.raises(ParameterError, match="num_classes=0 must be at least 1"):
        sample.make_sample(tmp_path, num_classes=0)


def test_ensure_sample_writes_once_and_never_half(tmp_path, monkeypatch):
    folder = tmp_path / "sample-data"
    calls = []

    def failing(root, *args, **kwargs):
        calls.append(root)
        (root / "tfrecords-jpeg-192x192").mkdir()
        raise KeyboardInterrupt  # killed half way

    monkeypatch.setattr(sample, "make_sample", failing)
    with pytest.raises(KeyboardInterrupt):  # raised by the stand-in above: it has no message
        sample.ensure_sample(folder, 3)
    assert not folder.exists() and list(tmp_path.iterdir()) == []  # nothing half written stays
    monkeypatch.setattr(sample, "make_sample", lambda root, *a, **k: calls.append(root) or (root / "done").touch())
    assert sample.ensure_sample(folder, 3) == folder and (folder / "done").exists()
    assert sample.ensure_sample(folder, 3) == folder and len(calls) == 2  # the second call reuses it
