"""Training that survives a cut session: a checkpoint after every epoch, and a re-run that continues from
the last completed one. Not `keras.callbacks.BackupAndRestore`: it rewrites one file in place (a kill then
leaves no checkpoint), records the epoch in a separate write, deletes all at the end, keeps no history.
An earlier session's output (RESUME_FROM) is found and its compile cache copied by `resume_from`."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit import hosts as nbhosts
from nbkit.errors import DataError

_STATE_FILE = "training-state.json"
_STATE_VERSION = 1


def _state(folder: Path) -> tuple[int, str, dict[str, Any], dict[str, list[float]]]:
    """(epochs done, weights file, settings, history) of the training state in `folder`."""
    path = folder / _STATE_FILE
    try:
        state = json.loads(path.read_text())
        version, epochs_done, weights_file = state["version"], int(state["epochs_done"]), state["weights_file"]
        found = epochs_done, weights_file, state["settings"], state["history"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(f"{path} is not a readable training state ({error!r}).") from None
    if version != _STATE_VERSION:
        raise DataError(f"{path} has state version {version}; this nbkit reads {_STATE_VERSION}.")
    if not (folder / weights_file).is_file():
        raise DataError(f"{path} points at {weights_file}, which is missing.")
    return found


class TrainingRun:
    """The training state kept in `folder`. `settings`: what must not change between a cut run and its
    continuation (EPOCHS may grow). `restart`: start over. On a pod slice (`hosts`) every process reads
    the checkpoint process 0 writes, so `folder` must be one every host sees."""

    def __init__(
        self, folder: str | Path, settings: dict[str, Any], restart: bool = False, hosts: nbhosts.Hosts | None = None
    ) -> None:
        self.folder = Path(folder)
        self.settings = json.loads(json.dumps(settings))  # plain JSON values, compared as saved
        self.epochs_done, self.weights_file, self.history = 0, None, {}
        self.hosts = hosts or nbhosts.Hosts()
        if self.hosts.several:  # process 0 may be copying an earlier run's checkpoint in (RESUME_FROM)
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("nbkit: checkpoints in place")
        self.restarted = restart and (self.folder / _STATE_FILE).exists()
        if not restart and (self.folder / _STATE_FILE).exists():
            self._read()
        if self.hosts.several:
            self._check_every_process_found_the_same()

    def _read(self) -> None:
        try:
            epochs_done, weights_file, saved, history = _state(self.folder)
        except DataError as error:
            raise DataError(f"{error} Set RESUME='restart' to train from scratch, or move the folder away.") from None
        changed = sorted(k for k in set(saved) | set(self.settings) if saved.get(k) != self.settings.get(k))
        if changed:
            details = "; ".join(f"{k}: checkpoint {saved.get(k)!r}, now {self.settings.get(k)!r}" for k in changed)
            raise DataError(
                f"The checkpoint in {self.folder} was made with other settings ({details}). Set RESUME='restart' "
                "to train from scratch (it is replaced epoch by epoch), or use another OUTPUT_DIR."
            )
        self.epochs_done, self.weights_file, self.history = epochs_done, weights_file, history

    def _check_every_process_found_the_same(self) -> None:
        import numpy as np
        from jax.experimental import multihost_utils

        state = self.folder / _STATE_FILE
        mine = zlib.crc32(state.read_bytes()) & 0x7FFFFFFF if self.epochs_done else 0  # int32: JAX's default
        gathered = multihost_utils.process_allgather(np.array([self.epochs_done, mine], np.int32))
        found = np.asarray(gathered).reshape(-1, 2)  # one row per process
        if len({tuple(row) for row in found.tolist()}) > 1:
            each = ", ".join(f"process {i}: {n} epochs done" for i, (n, _) in enumerate(found.tolist()))
            raise DataError(
                f"The processes found different checkpoints in {self.folder} ({each}). Every host must see the "
                "one folder process 0 writes: give an OUTPUT_DIR on storage every host mounts (NFS, a gcsfuse "
                "bucket), or RESUME='restart'."
            )

    def describe(self, epochs: int) -> str:
        if self.epochs_done == 0:
            again = " (RESUME='restart': the earlier checkpoint is replaced)" if self.restarted else ""
            return f"training from scratch for {epochs} epochs, checkpoints in {self.folder}{again}"
        if self.epochs_done >= epochs:
            return (
                f"finished earlier: {self.epochs_done} epochs done (of {epochs} asked), so no training now; "
                f"weights from {self.weights_file}. RESUME='restart' retrains, a larger EPOCHS continues."
            )
        return f"resuming after epoch {self.epochs_done} of {epochs} from {self.folder / self.weights_file}"

    def restore(self, model: Any, acc: Any = None) -> None:
        """Load the newest checkpoint (weights, optimizer state) into a compiled `model` built in `acc`'s scope."""
        if self.weights_file is None:
            return
        # The optimizer's variables exist only once it is built; loading first would skip them.
        with acc.scope() if acc is not None else contextlib.nullcontext():
            model.optimizer.build(model.trainable_variables)
        model.load_weights(self.folder / self.weights_file)
        if int(model.optimizer.iterations.numpy()) == 0:
            raise DataError(f"{self.weights_file} holds no optimizer state. Set RESUME='restart'.")

    def checkpoint(self) -> Any:
        """A Keras callback for `fit(..., initial_epoch=run.epochs_done)` that saves each epoch as it ends."""
        import keras

        run = self

        class EpochCheckpoint(keras.callbacks.Callback):
            def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
                run.save(self.model, epoch + 1, logs or {})

        return EpochCheckpoint()

    def save(self, model: Any, epochs_done: int, logs: dict[str, Any]) -> None:
        """The checkpoint, then the state pointing at it, then drop older ones: a kill never breaks the pair."""
        name = f"epoch-{epochs_done:04d}.weights.h5"
        for key, value in logs.items():
            value = float(value)
            self.history.setdefault(key, []).append(value if math.isfinite(value) else None)
        if not self.hosts.writes_outputs:
            # Every process saves: Keras' save calls jax.device_put, which with several processes checks every
            # process passes the same value (a collective; process 0 alone fails). Only process 0 keeps it.
            with tempfile.TemporaryDirectory(prefix="nbkit-not-written-") as scratch:
                model.save_weights(Path(scratch) / name)
            self.epochs_done, self.weights_file = epochs_done, name
            return
        with atomic.replacing(self.folder / name) as partial:  # keeps the .weights.h5 suffix Keras wants
            model.save_weights(partial)
        self.epochs_done, self.weights_file = epochs_done, name
        state = {
            "version": _STATE_VERSION,
            "settings": self.settings,
            "epochs_done": epochs_done,
            "weights_file": name,
            "history": self.history,
        }
        atomic.write_text(self.folder / _STATE_FILE, json.dumps(state, indent=1) + "\n")
        for old in self.folder.glob("*epoch-*.weights.h5"):
            if old.name != name:
                old.unlink()


def copy_checkpoint(source: str | Path, folder: str | Path) -> str:
    """Copy an earlier session's checkpoint into `folder` unless it has its own; one line saying what was done."""
    source, folder = Path(source), Path(folder)
    if (folder / _STATE_FILE).exists():
        return f"{folder} has its own checkpoint; {source} is not used"
    try:
        weights_file = _state(source)[1]
    except DataError as error:
        inside = [str(p.parent) for p in sorted(source.glob(f"*/{_STATE_FILE}"))]  # an OUTPUT_DIR given whole
        hint = f"; {' or '.join(inside)} holds one" if inside else ""
        raise DataError(
            f"RESUME_FROM={str(source)!r}: {error} Give the checkpoint folder of an earlier run (its "
            f"OUTPUT_DIR/checkpoints, whole{hint}), or 'none'."
        ) from None
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / weights_file, folder / weights_file)
    shutil.copy2(source / _STATE_FILE, folder / _STATE_FILE)  # last: the state points at a complete copy
    return f"copied the checkpoint {weights_file} from {source}"
