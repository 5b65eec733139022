import pytest

from nbkit import train
from nbkit.errors import ParameterError


def test_flower_schedule_defaults_follow_the_starter_notebooks():
    schedule = train.flower_schedule(replicas=8)
    rates = schedule.values(12)
    assert rates[0] == pytest.approx(1e-5)  # start
    assert rates[5] == pytest.approx(5e-5 * 8)  # max after a 5-epoch ramp, scaled by replicas
    assert rates[1] == pytest.approx(1e-5 + (4e-4 - 1e-5) / 5)  # linear ramp
    assert rates[6] == pytest.approx(1e-5 + (4e-4 - 1e-5) * 0.8)  # exponential decay towards min
    assert all(later < earlier for earlier, later in zip(rates[5:], rates[6:]))
    assert rates[-1] > 1e-5


def test_sustain_keeps_the_maximum():
    schedule = train.RampSchedule(max_lr=1e-3, ramp_epochs=2, sustain_epochs=3)
    assert schedule.values(6)[2:5] == [1e-3] * 3


def test_schedule_scales_with_replicas_and_rejects_zero():
    assert train.flower_schedule(1)(5) * 8 == pytest.approx(train.flower_schedule(8)(5))
    with pytest.raises(ParameterError):
        train.flower_schedule(0)


def test_steps_per_epoch_counts_whole_batches():
    assert train.steps_per_epoch(12753, 128) == 99
    assert train.steps_per_epoch(10, 128) == 1


def test_save_and_load_round_trip(tmp_path):
    import numpy as np

    from nbkit import models

    model = models.small_cnn((8, 8, 3), 3, filters=(2,), dense=4)
    path = train.save_model(model, tmp_path / "nested" / "model.keras")
    assert path.exists() and not list(path.parent.glob("*.partial*"))
    loaded = train.load_model(path)
    images = np.random.default_rng(0).integers(0, 255, (2, 8, 8, 3), dtype=np.uint8)
    assert np.allclose(model.predict(images, verbose=0), loaded.predict(images, verbose=0))


def test_callbacks_schedule_and_checkpoint(tmp_path):
    import numpy as np

    from nbkit import models

    model = models.small_cnn((8, 8, 3), 2, filters=(2,), dense=4)
    model.compile("sgd", "sparse_categorical_crossentropy")
    schedule = train.RampSchedule(max_lr=0.5, ramp_epochs=1)
    history = model.fit(np.zeros((4, 8, 8, 3), np.uint8), np.zeros(4), epochs=2, verbose=0,
                        callbacks=train.callbacks(schedule, tmp_path))
    assert history.history["learning_rate"] == pytest.approx([1e-5, 0.5])
    assert (tmp_path / "checkpoint.weights.h5").exists()
