"""What a run trains (nbkit.images.recipe): the profiles and the starter notebooks' schedule."""

import pytest

from nbkit.errors import ParameterError
from nbkit.images import recipe


def test_the_full_profiles_schedule_follows_the_starter_notebooks():
    schedule = recipe.PROFILES["full"].schedule(replicas=8)
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
    full = recipe.PROFILES["full"]
    assert full.schedule(1)(5) * 8 == pytest.approx(full.schedule(8)(5))
    with pytest.raises(ParameterError):
        full.schedule(0)


def test_profiles_by_hardware_with_the_notebooks_overrides():
    smoke = recipe.profile("auto", "cpu")
    assert (smoke.name, smoke.model, smoke.weights, smoke.epochs) == ("smoke", "small_cnn", "none", 8)
    assert recipe.profile("auto", "tpu").name == recipe.profile("auto", "gpu").name == "full"
    full = recipe.profile("full", "cpu", epochs=3, weights="none")
    assert (full.model, full.weights, full.epochs) == ("EfficientNetB0", "none", 3)
    assert full.schedule(8).max_lr == pytest.approx(5e-5 * 8) and full.schedule(8).ramp_epochs == 5
    assert full.describe() == "profile=full: EfficientNetB0 (weights none), 3 epochs"
    with pytest.raises(ParameterError, match="PROFILE='fast'"):
        recipe.profile("fast", "cpu")
