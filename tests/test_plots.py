import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from nbkit import metrics, plots  # noqa: E402
from nbkit.images import grids  # noqa: E402

NAMES = ["daisy", "rose", "tulip"]


def test_batch_titles_ok_and_no_in_red(tmp_path):
    images = np.zeros((3, 8, 8, 3), np.uint8)
    figure = grids.batch(images, [0, 1, 2], NAMES, predictions=[0, 2, 2], path=tmp_path / "b.png")
    titles = [(a.get_title(), a.title.get_color()) for a in figure.axes if a.get_title()]
    assert titles == [("daisy OK", "black"), ("tulip NO -> rose", "red"), ("tulip OK", "black")]
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_long_class_names_are_wrapped_to_their_panel():
    names = ["Cassava Bacterial Blight (CBB)", "Cassava Brown Streak Disease (CBSD)"]
    figure = grids.batch(np.zeros((2, 8, 8, 3), np.uint8), [0, 1], names, predictions=[1, 1])
    wrong = figure.axes[0].get_title()
    assert " ".join(wrong.split()) == "Cassava Brown Streak Disease (CBSD) NO -> Cassava Bacterial Blight (CBB)"
    assert max(len(line) for line in wrong.splitlines()) <= 30


def test_batch_without_predictions_shows_class_names():
    figure = grids.batch(np.zeros((2, 8, 8, 3), np.uint8), [2, 0], NAMES)
    assert [a.get_title() for a in figure.axes if a.get_title()] == ["tulip", "daisy"]


def test_curves_schedule_and_confusion(tmp_path):
    history = {
        "loss": [2.0, 1.0],
        "val_loss": [2.1, 1.2],
        "accuracy": [0.1, 0.5],
        "val_accuracy": [0.1, 0.4],
        "learning_rate": [1e-5, 1e-4],
    }
    figure = plots.training_curves(history, tmp_path / "curves.png")
    assert [a.get_title() for a in figure.axes] == ["loss", "accuracy"]
    drawn = [
        [(line.get_label(), list(line.get_xdata()), list(line.get_ydata())) for line in a.lines] for a in figure.axes
    ]
    assert drawn == [
        [("training", [1, 2], [2.0, 1.0]), ("validation", [1, 2], [2.1, 1.2])],
        [("training", [1, 2], [0.1, 0.5]), ("validation", [1, 2], [0.1, 0.4])],
    ]
    figure = plots.learning_rate([1e-5, 4e-4, 3e-4], tmp_path / "lr.png")
    assert "max 0.0004" in figure.axes[0].get_title()
    assert list(figure.axes[0].lines[0].get_ydata()) == [1e-5, 4e-4, 3e-4]
    counts = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 2]])  # true 0,1,2,2 predicted 0,2,2,2: counts[true, predicted]
    figure = plots.confusion(counts, NAMES, metrics._scores(counts, "qwk"), tmp_path / "cm.png")
    shown = figure.axes[0].images[0].get_array()  # rows normalized: each true class's share of predictions
    np.testing.assert_allclose(shown, [[1, 0, 0], [0, 0, 1], [0, 0, 1]])
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == NAMES  # rows: the true class
    assert figure.axes[0].get_ylabel() == "true" and figure.axes[0].get_xlabel() == "predicted"
    first, second = figure.get_suptitle().splitlines()  # over the figure, so long class names cannot cut it
    # by hand: kappa 1 - mean((y - p)^2) / mean over pairs (y_i - p_j)^2 = 1 - 0.25 / 1.5; accuracy 3/4;
    # F1 per class 1, 0, 0.8
    assert first == "validation qwk 0.833 (the competition's metric); accuracy 0.750"
    assert second.startswith("macro F1 0.600")
    assert all((tmp_path / name).exists() for name in ("curves.png", "lr.png", "cm.png"))


def test_a_padded_batch_shows_only_the_labelled_images():
    images = np.zeros((20, 8, 8, 3), np.uint8)  # image_batches pads to whole batches
    figure = grids.batch(images, [0, 1, 2], ["a", "b", "c"], predictions=[0, 2, 2])
    titles = [axis.get_title() for axis in figure.axes if axis.get_title()]
    assert titles == ["a OK", "c NO -> b", "c OK"]


def test_a_one_epoch_run_draws_its_points_on_an_axis_of_whole_epochs():
    """Issue 35 #25: one epoch drew empty curves (one-point lines without markers, an x axis of 0.96-1.04)."""
    from nbkit.models import _EpochWait

    curves = plots.training_curves({"loss": [2.0], "val_loss": [2.1]})
    rates = plots.learning_rate([1e-4])
    waits = plots.input_wait([_EpochWait(1, 2.0, 0.5)])
    for axis in (*curves.axes, *rates.axes, *waits.axes):
        assert axis.get_xlim() == (0.5, 1.5)  # the one epoch in the middle, half an epoch each side
        assert [t for t in axis.get_xticks() if 0.5 <= t <= 1.5] == [1.0]  # whole epochs only
    assert all(
        line.get_marker() not in (None, "None", "") for axis in (*curves.axes, *rates.axes) for line in axis.lines
    )
    assert plots.training_curves({"loss": [3.0, 2.0, 1.0]}).axes[0].get_xlim() == (0.5, 3.5)
