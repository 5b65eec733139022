"""The input-idle monitor: per-epoch wait shares, the data-bound warning, its plot."""

import json

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from nbkit import models as monitor  # noqa: E402
from nbkit import plots  # noqa: E402
from nbkit.models import _EpochWait  # noqa: E402

SLOW_INPUT_FIT = """
    import json, time
    import numpy as np
    from nbkit import accel
    from nbkit import models as monitor
    accel.setup({backend!r})
    import keras

    def slow_batches():  # the host takes 40 ms per batch; the model needs far less
        while True:
            time.sleep(0.04)
            yield np.zeros((8, 4), np.float32), np.zeros((8,), np.int32)

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    watcher = monitor.input_monitor()
    model.fit(watcher.watch(slow_batches()), epochs=3, steps_per_epoch=10, verbose=0, callbacks=[watcher],
              validation_data=(np.zeros((8, 4), np.float32), np.zeros((8,), np.int32)))
    print(json.dumps([[w.epoch, w.seconds, w.waited] for w in watcher.epochs]))
"""


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_slow_input_is_reported_as_waiting_and_data_bound(run_python, backend):
    result = run_python(SLOW_INPUT_FIT.format(backend=backend))
    epochs = json.loads(result.stdout.strip().splitlines()[-1])
    assert [e[0] for e in epochs] == [1, 2, 3]
    for _, seconds, waited in epochs[1:]:
        # Ten batches that took 40 ms each to make, for steps of about a millisecond: most of the
        # epoch is waiting. (TensorFlow pulls the generator a few batches ahead, so not all of it.)
        assert 0.5 * seconds < waited <= seconds
    assert "input wait, epoch 1:" in result.stdout and "(first epoch: includes" in result.stdout
    assert result.stdout.count("WARNING: data-bound") == 2  # epochs 2 and 3, not the warm-up epoch


def test_describe_warns_when_data_bound_after_the_first_epoch():
    assert monitor._describe(_EpochWait(2, 4.0, 0.2)) == "input wait, epoch 2: 5% of 4.0 s"
    assert "WARNING: data-bound" in monitor._describe(_EpochWait(2, 4.0, 2.0))
    assert "WARNING" not in monitor._describe(_EpochWait(1, 4.0, 3.0))  # warm-up epoch
    assert _EpochWait(1, 0.0, 0.0).share == 0.0


def test_plot_marks_data_bound_epochs(tmp_path):
    epochs = [_EpochWait(1, 4.0, 3.0), _EpochWait(2, 4.0, 0.4), _EpochWait(3, 4.0, 2.0)]
    figure = plots.input_wait(epochs, path=tmp_path / "wait.png")
    bars = figure.axes[0].patches
    assert [round(b.get_height()) for b in bars] == [75, 10, 50]
    assert [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars] == ["#d62728", "#1f77b4", "#d62728"]
    assert (tmp_path / "wait.png").stat().st_size > 1000
