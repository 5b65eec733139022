"""How a run steps through its data (nbkit.batching): the global batch, checked; steps per epoch and
per execution, each lowering said once."""

import pytest

from nbkit import batching
from nbkit.errors import ParameterError
from nbkit.images import checks


def test_the_plan_gives_whole_executions_of_whole_batches():
    plan = batching.plan(12753, 3712, 16, 8, 192 * 192 * 3, steps_per_execution=16, available_bytes=2**34)
    assert (plan.global_batch, plan.steps_per_epoch, plan.steps_per_execution) == (128, 96, 16)  # 99 batches
    assert plan.describe() == (
        "global batch 128 (16 x 8 replicas), 96 steps per epoch, 16 per execution; "
        "an epoch of 99 batches cut to 96, whole executions of 16"
    )
    assert batching.plan(12753, 3712, 16, 8, 1, steps_per_execution=1).steps_per_epoch == 99
    small = batching.plan(832, 208, 16, 8, 1, steps_per_execution=16)  # fewer batches than one execution asks
    assert (small.steps_per_epoch, small.steps_per_execution) == (6, 6)
    assert "steps_per_execution=16 lowered to 6, the steps of one epoch" in small.describe()
    capped = batching.plan(832, 208, 16, 8, 1, steps_per_execution=16, max_steps_per_epoch=2)
    assert (capped.steps_per_epoch, capped.steps_per_execution) == (2, 2)


def test_the_hardwares_limit_lowers_steps_per_execution_and_says_why():
    plan = batching.plan(832, 208, 16, 8, 1, steps_per_execution=16, execution_limit=(1, "a known bug"))
    assert (plan.steps_per_epoch, plan.steps_per_execution) == (6, 1)
    assert plan.notes == ("steps_per_execution=16 lowered to 1: a known bug",)


def fit_iterations(steps_per_epoch, steps_per_execution):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    data = np.zeros((1000, 1), np.float32)
    model.fit(data, data, batch_size=1, epochs=1, steps_per_epoch=steps_per_epoch, verbose=0)
    return int(model.optimizer.iterations.numpy())


def test_keras_runs_whole_executions_so_the_plan_cuts_epochs():
    # Upstream behaviour (Keras 3.15): 6 steps per epoch with 16 per execution run 16 steps. If this
    # fails, Keras stops at steps_per_epoch now and the plan's rounding could go.
    assert fit_iterations(6, 16) == 16
    plan = batching.plan(6, 6, 1, 1, 1, steps_per_execution=16)
    assert fit_iterations(plan.steps_per_epoch, plan.steps_per_execution) == 6


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
        checks.check_batch(per_replica, replicas, item_bytes, counts, available_bytes=free)


def test_a_workable_batch_is_the_global_batch():
    assert checks.check_batch(16, 8, 192 * 192 * 3, {"train": 832, "val": 208}, available_bytes=2**34) == 128
    assert checks.check_batch(64, 1, 512 * 512 * 3, {}, available_bytes=None) == 64  # memory unknown: not refused
    with pytest.raises(ParameterError, match="PER_CORE_BATCH=100 x 1"):
        checks.check_batch(100, 1, 192, {"train": 50}, parameter="PER_CORE_BATCH")
