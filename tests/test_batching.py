"""How a run steps through its data: the global batch checked against the splits and the memory
(`Data.check_batch`), whether the training images fit in memory decoded (`Data.fits_in_memory`), and why the
notebooks cut an epoch to whole executions."""

from unittest import mock

import pytest

from nbkit.errors import ParameterError
from nbkit.images import checks


def fit_iterations(steps_per_epoch, steps_per_execution):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    data = np.zeros((1000, 1), np.float32)
    model.fit(data, data, batch_size=1, epochs=1, steps_per_epoch=steps_per_epoch, verbose=0)
    return int(model.optimizer.iterations.numpy())


def test_keras_runs_whole_executions_so_the_notebooks_cut_epochs():
    # Upstream behaviour (Keras 3.15): 6 steps per epoch with 16 per execution run 16 steps. If this
    # fails, Keras stops at steps_per_epoch now and the notebooks' rounding (below, as 02 writes it) could go.
    assert fit_iterations(6, 16) == 16
    steps_per_epoch, steps_per_execution = 6, min(16, 6)
    steps_per_epoch -= steps_per_epoch % steps_per_execution
    assert fit_iterations(steps_per_epoch, steps_per_execution) == 6
    steps_per_epoch, steps_per_execution = 20, 8  # 20 batches: 2 whole executions
    steps_per_epoch -= steps_per_epoch % steps_per_execution
    assert fit_iterations(steps_per_epoch, steps_per_execution) == 16


@pytest.mark.parametrize(
    "per_replica, replicas, item_bytes, counts, free, message",
    [
        (
            16,
            64,
            192 * 192 * 3,
            {"train": 832, "val": 208},
            2**35,
            "global batch of 1024, more than the 208 images of the val split.*PER_REPLICA_BATCH=3 or less",
        ),
        (
            27,
            8,
            192 * 192 * 3,
            {"train": 832, "val": 208},
            2**35,
            "216, more than the 208 images of the val split.*PER_REPLICA_BATCH=26 or less",
        ),
        (1, 300, 192 * 192 * 3, {"train": 832, "val": 208}, 2**35, "at most 208 replicas"),
        (
            100_000,
            1,
            192 * 192 * 3,
            {"train": 10**6, "val": 10**6},
            2**34,
            r"needs about 51\.5 GiB of memory per step; 16\.0 GiB are free here. Use PER_REPLICA_BATCH=15534 or less",
        ),
        (0, 8, 1, {"train": 10}, 2**34, "PER_REPLICA_BATCH=0 must be >= 1"),
    ],
)
def test_batches_that_cannot_work_are_refused_with_what_to_pass(
    per_replica, replicas, item_bytes, counts, free, message
):
    with pytest.raises(ParameterError, match=message):
        checks._check_batch(per_replica, replicas, item_bytes, counts, available_bytes=free)


def test_a_workable_batch_is_the_global_batch():
    assert checks._check_batch(16, 8, 192 * 192 * 3, {"train": 832, "val": 208}, available_bytes=2**34) == 128
    assert checks._check_batch(64, 1, 512 * 512 * 3, {}, available_bytes=None) == 64  # memory unknown: not refused


def test_the_training_images_fit_in_memory_when_decoded_they_take_at_most_half_of_it():
    """What the notebooks' CACHE="auto" keeps in memory: the flowers' 12,753 training images at 192 px (1.4 GB
    decoded) with 4 GB free, not at 512 px (10 GB); nothing where the memory is unknown."""
    train = checks.Split("train", [], 12_753, [])
    at = {size: checks.Data("", "", None, size, {"train": train}) for size in (192, 512)}
    assert at[192].fits_in_memory(train, available_bytes=2**32)
    assert not at[512].fits_in_memory(train, available_bytes=2**32)
    assert at[512].fits_in_memory(train, available_bytes=2**35)
    with mock.patch.object(checks, "_available_memory", return_value=None):
        assert not at[192].fits_in_memory(train)
