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
    [
        ("auto", "cpu", "smoke"),
        ("auto", "tpu", "full"),
        ("auto", "gpu", "full"),
        ("smoke", "tpu", "smoke"),
        ("full", "cpu", "full"),
    ],
)
def test_resolve_profile(profile, kind, expected):
    assert params.resolve_profile(profile, kind) == expected


def test_resolve_profile_rejects_unknown():
    with pytest.raises(ParameterError, match="PROFILE"):
        params.resolve_profile("quick", "cpu")


def test_or_default_keeps_the_default_for_zero():
    assert params.or_default(0, 16) == 16
    assert params.or_default(4, 16) == 4


@pytest.mark.parametrize(
    "value, form, ok",
    [
        ("alice/flowers-model", "owner/slug", True),
        ("alice", "owner/slug", False),
        ("a/b/c", "owner/slug", False),
        ("alice/bad slug", "owner/slug", False),
        (None, "owner/slug", False),
        ("alice", "a user name", True),
        ("keras/efficientnet/keras/b0", "owner/model/framework/variation[/version]", True),
        ("keras/efficientnet/keras/b0/2", "owner/model/framework/variation[/version]", True),
        ("keras/efficientnet", "owner/model/framework/variation[/version]", False),
    ],
)
def test_check_handle_is_the_one_check_of_kaggle_handles(value, form, ok):
    if ok:
        assert params.check_handle("X", value, form) == value
    else:
        with pytest.raises(ParameterError, match=f"X={value!r} must be written"):
            params.check_handle("X", value, form)


def test_check_handle_with_a_slug_rule():
    import re

    rule = re.compile(r"^[a-z0-9-]{6,50}$")
    with pytest.raises(ParameterError, match="its slug"):
        params.check_handle("DATASET_ID", "alice/Short", slug=rule)


def test_check_run_names_the_bad_shared_parameter():
    good = dict(
        BACKEND="jax", PROFILE="smoke", SIMULATE_DEVICES=8, EPOCHS=0, PER_REPLICA_BATCH=0, STEPS_PER_EXECUTION=1
    )
    params.check_run(**good)
    for name, bad in (
        ("BACKEND", "torch"),
        ("PROFILE", "big"),
        ("SIMULATE_DEVICES", -1),
        ("EPOCHS", 2.5),
        ("PER_REPLICA_BATCH", -8),
        ("STEPS_PER_EXECUTION", 0),
    ):
        with pytest.raises(ParameterError, match=name):
            params.check_run(**{**good, name: bad})


def test_unknown_parameter_names_the_closest_known_one():
    namespace = {
        "__annotations__": {"EPOCHS": int, "BACKEND": str},
        "EPOCHS": 0,
        "BACKEND": "auto",
        "EPOCH": 3,
        "In": [],
        "acc": object(),
        "NBKIT_BUNDLE": "/tmp/x",
    }
    with pytest.raises(ParameterError, match=r"Unknown parameter EPOCH \(did you mean EPOCHS\?\)"):
        params.check_names(namespace)
    del namespace["EPOCH"]
    params.check_names(namespace)  # lower-case variables and the bundle's NBKIT_ names are not parameters
    with pytest.raises(ParameterError, match="Unknown parameter SEEDS: this notebook's parameters are BACKEND, EPOCHS"):
        params.check_names({**namespace, "SEEDS": 1, "__annotations__": {"EPOCHS": int, "BACKEND": str}})
