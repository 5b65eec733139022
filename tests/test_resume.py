"""Resumable training in one process: checkpoints, continuation, refusal of other settings.

(The notebook-level test that kills a real kernel mid-training is in test_handoff.py.)
"""

import json
import re
import shutil

import numpy as np
import pytest

from nbkit.errors import DataError
from nbkit.handoff import resume, resume_from

SETTINGS = {"model": "tiny", "global_batch": 8, "seed": 1}
STEPS = 4  # per epoch


def data_for_epochs():
    """An epoch-indexed stream like data.train_dataset(seed=...): epoch e's batches depend on e only."""
    import tensorflow as tf

    def epoch(index):
        images = tf.random.stateless_uniform([STEPS * 8, 6, 6, 3], tf.stack([index, 7]), maxval=255)
        labels = tf.random.stateless_uniform([STEPS * 8], tf.stack([index, 8]), maxval=3, dtype=tf.int32)
        return tf.data.Dataset.from_tensor_slices((tf.cast(images, tf.uint8), labels)).batch(8)

    return lambda first_epoch: tf.data.Dataset.range(first_epoch, 1000).flat_map(epoch)


def new_model():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(3, dtype="float32"),
        ]
    )
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def train(folder, epochs, settings=SETTINGS, restart=False):
    run = resume.TrainingRun(folder, settings, restart=restart)
    model = new_model()
    run.restore(model)
    history = fit(run, model, data_for_epochs()(run.epochs_done), epochs, steps_per_epoch=STEPS, verbose=0)
    return run, model, history


def fit(run, model, data, epochs, **fit_args):
    """What notebook 05 does: model.fit from the first epoch not done, with the run's checkpoint callback."""
    if run.epochs_done < epochs:
        model.fit(data, epochs=epochs, initial_epoch=run.epochs_done, callbacks=[run.checkpoint()], **fit_args)
    return run.history


def weights(model):
    return [np.asarray(w) for w in model.get_weights()]


def test_interrupted_run_continues_where_it_stopped_and_matches_an_uninterrupted_one(tmp_path):
    _, whole, whole_history = train(tmp_path / "whole", 4)
    first, _, _ = train(tmp_path / "split", 2)
    assert first.epochs_done == 2
    second = resume.TrainingRun(tmp_path / "split", SETTINGS)
    assert second.epochs_done == 2 and "resuming after epoch 2 of 4" in second.describe(4)
    model = new_model()
    second.restore(model)
    assert int(model.optimizer.iterations.numpy()) == 2 * STEPS  # optimizer state came back too
    history = fit(second, model, data_for_epochs()(2), 4, steps_per_epoch=STEPS, verbose=0)
    assert len(history["loss"]) == 4 and history["loss"][:2] == whole_history["loss"][:2]
    assert np.allclose(history["loss"], whole_history["loss"], rtol=1e-4)
    for resumed, uninterrupted in zip(weights(model), weights(whole)):
        assert np.allclose(resumed, uninterrupted, rtol=1e-4, atol=1e-6)


def test_one_checkpoint_is_kept_and_the_state_points_at_it(tmp_path):
    run, _, _ = train(tmp_path, 3)
    state = json.loads((tmp_path / resume._STATE_FILE).read_text())
    assert state["epochs_done"] == 3 and state["weights_file"] == "epoch-0003.weights.h5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch-0003.weights.h5", resume._STATE_FILE]
    assert len(state["history"]["loss"]) == 3


def test_a_finished_run_is_not_trained_again(tmp_path):
    _, model, history = train(tmp_path, 2)
    run = resume.TrainingRun(tmp_path, SETTINGS)
    assert "finished earlier: 2 epochs done" in run.describe(2)
    again = new_model()
    run.restore(again)
    assert fit(run, again, data_for_epochs()(2), 2, steps_per_epoch=STEPS, verbose=0) == history
    assert int(again.optimizer.iterations.numpy()) == 2 * STEPS  # no step was taken
    assert all(np.array_equal(a, b) for a, b in zip(weights(again), weights(model)))


def test_more_epochs_continue_a_finished_run(tmp_path):
    _, trained, first = train(tmp_path, 2)
    first = {key: list(values) for key, values in first.items()}  # as it was after 2 epochs
    run = resume.TrainingRun(tmp_path, SETTINGS)
    model = new_model()
    run.restore(model)
    assert int(model.optimizer.iterations.numpy()) == 2 * STEPS  # the first run's state, not a fresh start
    assert all(np.array_equal(a, b) for a, b in zip(weights(model), weights(trained)))
    history = fit(run, model, data_for_epochs()(run.epochs_done), 3, steps_per_epoch=STEPS, verbose=0)
    assert run.epochs_done == 3 and int(model.optimizer.iterations.numpy()) == 3 * STEPS  # one more epoch only
    assert len(history["loss"]) == 3 and history["loss"][:2] == first["loss"]  # the first run's two epochs


def test_other_settings_are_refused_with_the_difference(tmp_path):
    train(tmp_path, 1)
    with pytest.raises(DataError, match=r"global_batch: checkpoint 8, now 16.*RESUME='restart'"):
        resume.TrainingRun(tmp_path, {**SETTINGS, "global_batch": 16})


def test_restart_replaces_the_old_checkpoint_once_an_epoch_is_done(tmp_path):
    train(tmp_path, 2)
    run = resume.TrainingRun(tmp_path, {**SETTINGS, "model": "other"}, restart=True)
    assert run.epochs_done == 0 and "earlier checkpoint is replaced" in run.describe(1)
    assert (tmp_path / "epoch-0002.weights.h5").exists()  # nothing lost before the new run has an epoch
    fit(run, new_model(), data_for_epochs()(0), 1, steps_per_epoch=STEPS, verbose=0)
    assert sorted(p.name for p in tmp_path.glob("*.h5")) == ["epoch-0001.weights.h5"]
    assert json.loads((tmp_path / resume._STATE_FILE).read_text())["settings"]["model"] == "other"


def test_unreadable_state_and_missing_checkpoint_say_what_to_do(tmp_path):
    train(tmp_path, 1)
    (tmp_path / "epoch-0001.weights.h5").unlink()
    with pytest.raises(DataError, match="epoch-0001.weights.h5, which is missing"):
        resume.TrainingRun(tmp_path, SETTINGS)
    (tmp_path / resume._STATE_FILE).write_text("{not json")
    with pytest.raises(DataError, match="not a readable training state.*RESUME='restart'"):
        resume.TrainingRun(tmp_path, SETTINGS)


def test_a_weights_only_file_is_not_taken_for_a_checkpoint(tmp_path):
    train(tmp_path, 1)
    new_model().save_weights(tmp_path / "epoch-0001.weights.h5")  # no optimizer state in it
    run = resume.TrainingRun(tmp_path, SETTINGS)
    with pytest.raises(DataError, match="no optimizer state"):
        run.restore(new_model())


def test_a_leftover_partial_write_is_ignored_and_cleaned(tmp_path):
    train(tmp_path, 1)
    (tmp_path / "partial-epoch-0002.weights.h5").write_bytes(b"killed halfway")
    run, _, _ = train(tmp_path, 2)
    assert run.epochs_done == 2
    assert sorted(p.name for p in tmp_path.glob("*.h5")) == ["epoch-0002.weights.h5"]


def test_copy_checkpoint_brings_an_earlier_session_in(tmp_path):
    train(tmp_path / "last-version", 2)
    here = tmp_path / "working" / "checkpoints"
    assert "copied the checkpoint epoch-0002.weights.h5" in resume.copy_checkpoint(tmp_path / "last-version", here)
    assert resume.TrainingRun(here, SETTINGS).epochs_done == 2
    assert "has its own checkpoint" in resume.copy_checkpoint(tmp_path / "last-version", here)
    with pytest.raises(DataError, match="RESUME_FROM=.*not a readable training state"):
        resume.copy_checkpoint(tmp_path / "nothing", tmp_path / "elsewhere")
    above = re.escape(f"whole; {tmp_path / 'last-version'} holds one)")  # a folder above the checkpoints
    with pytest.raises(DataError, match=above):
        resume.copy_checkpoint(tmp_path, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_fingerprint_changes_with_the_files(tmp_path):
    files = []
    for number in range(3):
        path = tmp_path / "data" / f"train{number:02d}-100.tfrec"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes(range(256)) * 600 + bytes([number]))  # over 2 x 64 KiB: head, middle and tail
        files.append(str(path))
    assert resume_from.fingerprint(files) == resume_from.fingerprint(list(reversed(files)))  # order does not matter
    copies = [shutil.copy(name, tmp_path) for name in files]
    assert resume_from.fingerprint(copies) == resume_from.fingerprint(files)  # names and contents, not folders
    with open(copies[0], "r+b") as f:
        f.seek(-3, 2)
        f.write(b"xyz")
    assert resume_from.fingerprint(copies) != resume_from.fingerprint(files)
    assert resume_from.fingerprint(copies[1:]) != resume_from.fingerprint(files)
    with pytest.raises(DataError, match="does not exist"):
        resume_from.fingerprint([str(tmp_path / "gone-3.tfrec")])
