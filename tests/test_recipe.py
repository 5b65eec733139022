"""What a flowers run trains (nbkit.flowers.recipe): profiles, the starter notebooks' schedule, the epoch plan."""

import pytest

from nbkit.errors import ParameterError
from nbkit.flowers import recipe


def test_flower_schedule_defaults_follow_the_starter_notebooks():
    schedule = recipe.flower_schedule(replicas=8)
    rates = schedule.values(12)
    assert rates[0] == pytest.approx(1e-5)  # start
    assert rates[5] == pytest.approx(5e-5 * 8)  # max after a 5-epoch ramp, scaled by replicas
    assert rates[1] == pytest.approx(1e-5 + (4e-4 - 1e-5) / 5)  # linear ramp
    assert rates[6] == pytest.approx(1e-5 + (4e-4 - 1e-5) * 0.8)  # exponential decay towards min
    assert all(later < earlier for earlier, later in zip(rates[5:], rates[6:]))
    assert rates[-1] > 1e-5


def test_sustain_keeps_the_maximum():
    schedule = recipe.RampSchedule(max_lr=1e-3, ramp_epochs=2, sustain_epochs=3)
    assert schedule.values(6)[2:5] == [1e-3] * 3


def test_schedule_scales_with_replicas_and_rejects_zero():
    assert recipe.flower_schedule(1)(5) * 8 == pytest.approx(recipe.flower_schedule(8)(5))
    with pytest.raises(ParameterError):
        recipe.flower_schedule(0)


def test_epoch_plan_gives_whole_executions_of_whole_batches():
    assert recipe.epoch_plan(12753, 128, 16) == (96, 16)  # 99 batches: 6 executions of 16
    assert recipe.epoch_plan(12753, 128, 1) == (99, 1)
    assert recipe.epoch_plan(832, 128, 16) == (6, 6)  # fewer batches than one execution asks for
    assert recipe.epoch_plan(10, 128, 16) == (1, 1)


def fit_iterations(steps_per_epoch, steps_per_execution):
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    data = np.zeros((1000, 1), np.float32)
    model.fit(data, data, batch_size=1, epochs=1, steps_per_epoch=steps_per_epoch, verbose=0)
    return int(model.optimizer.iterations.numpy())


def test_keras_runs_whole_executions_so_epoch_plan_is_needed():
    # Upstream behaviour (Keras 3.15): 6 steps per epoch with 16 per execution run 16 steps. If this
    # fails, Keras stops at steps_per_epoch now and epoch_plan's rounding could go.
    assert fit_iterations(6, 16) == 16
    assert fit_iterations(*recipe.epoch_plan(6, 1, 16)) == 6


def test_profiles_with_the_notebooks_overrides():
    smoke = recipe.profile("smoke")
    assert (smoke.model, smoke.weights, smoke.epochs, smoke.per_replica_batch) == ("small_cnn", "none", 8, 16)
    full = recipe.profile("full", epochs=3, per_replica_batch=32, weights="none")
    assert (full.model, full.weights, full.epochs, full.per_replica_batch) == ("EfficientNetB0", "none", 3, 32)
    assert full.schedule(8).max_lr == pytest.approx(5e-5 * 8) and full.schedule(8).ramp_epochs == 5
    assert full.describe(256) == "profile=full: EfficientNetB0 (weights none), 3 epochs, global batch 256"


@pytest.mark.parametrize(
    "per_replica, replicas, size, counts, free, message",
    [
        (
            16,
            64,
            192,
            {"train": 832, "val": 208},
            2**35,
            "global batch of 1024, more than the 208 images of the val split.*PER_REPLICA_BATCH=3 or less",
        ),
        (
            27,
            8,
            192,
            {"train": 832, "val": 208},
            2**35,
            "216, more than the 208 images of the val split.*PER_REPLICA_BATCH=26 or less",
        ),
        (1, 300, 192, {"train": 832, "val": 208}, 2**35, "at most 208 replicas"),
        (
            100_000,
            1,
            192,
            {"train": 10**6, "val": 10**6},
            2**34,
            r"needs about 51\.5 GiB of memory per step; 16\.0 GiB are free here. Use PER_REPLICA_BATCH=15534 or less",
        ),
    ],
)
def test_batches_that_cannot_work_are_refused_with_what_to_pass(per_replica, replicas, size, counts, free, message):
    with pytest.raises(ParameterError, match=message):
        recipe.check_batch(per_replica, replicas, size, counts, available_bytes=free)


def test_a_workable_batch_is_the_global_batch():
    assert recipe.check_batch(16, 8, 192, {"train": 832, "val": 208, "test": 7}, available_bytes=2**34) == 128
    assert recipe.check_batch(64, 1, 512, None, available_bytes=None) == 64  # memory unknown: not refused
    with pytest.raises(ParameterError, match="PER_CORE_BATCH=100 x 1"):
        recipe.check_batch(100, 1, 192, {"train": 50}, parameter="PER_CORE_BATCH")
