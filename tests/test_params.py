import pytest

from nbkit import params
from nbkit.errors import ParameterError


def test_check_choice_accepts_allowed_value():
    assert params.check_choice("PROFILE", "smoke", params.PROFILES) == "smoke"


def test_check_choice_names_parameter_and_allowed_values():
    with pytest.raises(ParameterError) as error:
        params.check_choice("PROFILE", "fast", params.PROFILES)
    message = str(error.value)
    assert "PROFILE='fast'" in message
    for allowed in params.PROFILES:
        assert repr(allowed) in message


@pytest.mark.parametrize("value", [-1, 1.5, "3", True, None])
def test_check_int_rejects_bad_values(value):
    with pytest.raises(ParameterError, match="EPOCHS"):
        params.check_int("EPOCHS", value, minimum=0)


def test_check_int_accepts_minimum():
    assert params.check_int("EPOCHS", 0, minimum=0) == 0
    assert params.check_int("STEPS", 5, minimum=1) == 5


@pytest.mark.parametrize(
    "profile, kind, expected",
    [("auto", "cpu", "smoke"), ("auto", "tpu", "full"), ("auto", "gpu", "full"),
     ("smoke", "tpu", "smoke"), ("full", "cpu", "full")],
)
def test_resolve_profile(profile, kind, expected):
    assert params.resolve_profile(profile, kind) == expected


def test_resolve_profile_rejects_unknown():
    with pytest.raises(ParameterError, match="PROFILE"):
        params.resolve_profile("quick", "cpu")


def test_pick_uses_default_for_zero():
    assert params.pick(0, 16) == 16
    assert params.pick(4, 16) == 4


def test_check_run_names_the_bad_shared_parameter():
    good = dict(BACKEND="jax", PROFILE="smoke", SIMULATE_DEVICES=8, EPOCHS=0, PER_REPLICA_BATCH=0, STEPS_PER_EXECUTION=1)
    params.check_run(**good)
    for name, bad in (("BACKEND", "torch"), ("PROFILE", "big"), ("SIMULATE_DEVICES", -1), ("EPOCHS", 2.5),
                      ("PER_REPLICA_BATCH", -8), ("STEPS_PER_EXECUTION", 0)):
        with pytest.raises(ParameterError, match=name):
            params.check_run(**{**good, name: bad})
