"""The PyTorch side of the flowers notebooks: images from the TFRecords, the CNN, ordered predictions.
On the CPU, in this process (the XLA path is exercised by test_xla.py and notebook 04)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from conftest import check_data
from PIL import Image

from nbkit.errors import DataError
from nbkit.images import augment, sample
from nbkit.pytorch import classifier
from nbkit.pytorch import runtime as xla


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    root = sample.make_sample(
        tmp_path_factory.mktemp("sample"), train_per_class=2, val_per_class=1, test_images=5, num_classes=4
    )
    return {name: split.items for name, split in check_data(root, 192, 4, keep_items=True).items()}


def test_images_are_uint8_channels_first_with_their_class_or_position(items):
    train, test = classifier.ImageRecords(items["train"], 192), classifier.ImageRecords(items["test"], 192)
    image, label = train[3]
    assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 192, 192)
    assert label == items["train"][3][1]
    expected = np.asarray(Image.open(io.BytesIO(items["train"][3][0])).convert("RGB"))
    assert np.array_equal(image.numpy().transpose(1, 2, 0), expected)
    assert [test[i][1] for i in range(len(test))] == list(range(5))  # test items: their position, for the ids


def test_augmentation_is_notebook_02s_flip_for_seed_epoch_and_index(items):
    plain = classifier.ImageRecords(items["train"], 192)
    for epoch in (0, 1):
        flipped = classifier.ImageRecords(items["train"], 192, recipe="flips", seed=1)
        flipped.set_epoch(epoch)
        for i in range(len(plain)):
            expected = plain[i][0].flip(2) if augment.flips(1, epoch, i) else plain[i][0]  # left-right, nothing else
            assert torch.equal(flipped[i][0], expected)
    assert 0 < sum(augment.flips(1, 0, i) for i in range(len(plain))) < len(plain)


def test_a_wrong_image_size_is_named(items):
    with pytest.raises(DataError, match="item 0 is 192x192, not 224x224"):
        classifier.ImageRecords(items["train"], 224)[0]


@pytest.mark.parametrize("size", [192, 331])
def test_small_cnn_gives_logits_for_uint8_images(size):
    model = classifier.small_cnn(size, 104)
    logits = model(torch.zeros((2, 3, size, size), dtype=torch.uint8))
    assert tuple(logits.shape) == (2, 104) and logits.dtype == torch.float32


def test_predictions_come_back_in_dataset_order(items):
    cpu = xla.select("cpu")
    torch.manual_seed(0)
    model = classifier.small_cnn(192, 4).eval()
    dataset = classifier.ImageRecords(items["train"], 192)
    logits = classifier.predict(cpu, model, dataset, batch_size=3, tag="t")
    with torch.no_grad():
        expected = model(torch.stack([dataset[i][0] for i in range(len(dataset))])).numpy()
    assert logits.shape == (8, 4)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_one_epoch_on_the_cpu_reports_loss_and_accuracy(items):
    cpu = xla.select("cpu")
    torch.manual_seed(0)
    model = classifier.small_cnn(192, 4)
    dataset = classifier.ImageRecords(items["train"], 192, recipe="flips")
    sampler, batches = classifier.batches(cpu, dataset, 4, shuffle=True, drop_last=True)
    before = [p.detach().clone() for p in model.parameters()]
    scores = classifier.train_epoch(cpu, model, batches, torch.optim.Adam(model.parameters(), 1e-3), epoch=0)
    assert 0 <= scores["accuracy"] <= 1 and np.isfinite(scores["loss"]) and scores["loss"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_loader_workers_leave_the_cpu_to_training():
    assert classifier.loader_workers(xla.TorchAccelerator("cpu", "cpu", "cpu", "")) == 0
    assert classifier.loader_workers(xla.TorchAccelerator("gpu", "cuda", "Tesla T4", ""), cpus=4) == 3
    assert classifier.loader_workers(xla.TorchAccelerator("gpu", "cuda", "Tesla T4", ""), cpus=64) == 4


def conv_output_dtypes(model, run):
    """The dtypes the model's convolutions produced while `run()` ran."""
    seen = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: seen.append(str(o.dtype)))
        for m in model.modules()
        if isinstance(m, torch.nn.Conv2d)
    ]
    try:
        result = run()
    finally:
        for hook in hooks:
            hook.remove()
    return set(seen), result


def test_bfloat16_autocast_computes_convolutions_in_bfloat16_and_keeps_the_loss_and_logits_float32(items):
    cpu = xla.select("cpu")
    torch.manual_seed(0)
    model = classifier.small_cnn(192, 4)
    dataset = classifier.ImageRecords(items["train"], 192)
    _, batches = classifier.batches(cpu, dataset, 4, shuffle=False, drop_last=True)
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    dtypes, scores = conv_output_dtypes(
        model, lambda: classifier.train_epoch(cpu, model, batches, optimizer, 0, precision="mixed_bfloat16")
    )
    assert dtypes == {"torch.bfloat16"} and np.isfinite(scores["loss"])
    dtypes, logits = conv_output_dtypes(
        model,
        lambda: classifier.predict(cpu, model, dataset, batch_size=4, tag="t", precision="mixed_bfloat16"),
    )
    assert dtypes == {"torch.bfloat16"} and logits.dtype == np.float32
    assert conv_output_dtypes(model, lambda: classifier.predict(cpu, model, dataset, batch_size=4, tag="t"))[0] == {
        "torch.float32"
    }


def test_precision_choices():
    cpu = xla.select("cpu")
    assert xla.precision(cpu, "auto")[0] == "float32"
    assert xla.precision(xla.TorchAccelerator("tpu", "xla", "TPU", ""), "auto")[0] == "mixed_bfloat16"
    assert xla.precision(cpu, "mixed_bfloat16")[1].startswith(
        "precision mixed_bfloat16 (PRECISION='mixed_bfloat16' was asked"
    )
    from nbkit.errors import ParameterError

    with pytest.raises(ParameterError, match="PRECISION='mixed_float16' is not allowed"):
        xla.precision(cpu, "mixed_float16")


def test_same_outputs_allows_bfloat16_round_off_but_not_other_predictions():
    reference = np.random.default_rng(0).normal(size=(20, 104)) * 5
    assert classifier.same_outputs(reference + 1e-5, reference, "float32")
    assert not classifier.same_outputs(reference + 0.1, reference, "float32")
    assert classifier.same_outputs(reference + 0.1, reference, "mixed_bfloat16")
    assert not classifier.same_outputs(reference[::-1], reference, "mixed_bfloat16")  # rows of other images
