"""Input-idle monitor: the share of each training epoch spent waiting for the next batch.

    monitor = nbkit.images.monitor.input_monitor()
    model.fit(monitor.watch(train_dataset), ..., callbacks=[..., monitor])
    plots.input_wait(monitor.epochs)

`watch` times every `next()` on the dataset from the training loop's side; the callback turns the
sum into a share of the epoch's training time (validation excluded), prints it and warns when the
run is data-bound: the accelerator then idles while the host decodes, and a faster accelerator (or
a bigger model) would not train any faster.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

DATA_BOUND_SHARE = 0.25  # above this, speeding up the input pays more than speeding up the model
ADVICE = (
    "the input pipeline is the bottleneck: cache the decoded images (`.cache()` after decode in get_dataset, "
    "when they fit in memory), read a smaller image size, use fewer/cheaper augmentations, or give the host more "
    "cores; see docs/benchmarks.md's 'Input speed'."
)


@dataclass(frozen=True)
class EpochWait:
    """One epoch's training time and the part of it spent waiting for input."""

    epoch: int  # 1-based, as Keras prints it
    seconds: float
    waited: float

    @property
    def share(self) -> float:
        return self.waited / self.seconds if self.seconds > 0 else 0.0


def input_monitor(data_bound_share: float = DATA_BOUND_SHARE, verbose: bool = True) -> Any:
    """A Keras callback that reports input waiting per epoch; feed `fit` with its `watch(dataset)`."""
    return _callback_class()(data_bound_share, verbose)


@functools.cache
def _callback_class() -> type:
    import keras  # only here: importing nbkit.monitor must not choose the Keras backend

    class InputMonitor(keras.callbacks.Callback):
        """Times the waits of `watch`'s batches; one line per epoch; `epochs` keeps the figures."""

        def __init__(self, data_bound_share: float, verbose: bool) -> None:
            super().__init__()
            self.data_bound_share = data_bound_share
            self.verbose = verbose
            self.epochs: list[EpochWait] = []
            self._waited = 0.0
            self._started = 0.0
            self._training_ended: float | None = None
            self._waited_in_training = 0.0

        def watch(self, dataset: Iterable[Any]) -> Iterable[Any]:
            """The batches of `dataset` (tf.data: as NumPy), timing how long each `next()` blocks. On a pod
            slice, `dataset` itself: Keras shards only a tf.data dataset over the processes (no timing)."""
            from nbkit.images.predict import process_count

            if process_count() > 1:
                print("input monitor: off on a pod slice (Keras shards the tf.data dataset over the hosts itself)")
                return dataset
            return self._timed(dataset)

        def _timed(self, dataset: Iterable[Any]) -> Iterator[Any]:
            iterator = dataset.as_numpy_iterator() if hasattr(dataset, "as_numpy_iterator") else iter(dataset)
            while True:
                start = time.perf_counter()
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                self._waited += time.perf_counter() - start
                yield batch

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._waited, self._training_ended = 0.0, None
            self._started = time.perf_counter()

        def on_test_begin(self, logs: Any = None) -> None:
            if self._training_ended is None:  # validation time is not training time
                self._training_ended = time.perf_counter()
                self._waited_in_training = self._waited

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if self._training_ended is None:
                self.on_test_begin()
            seconds = self._training_ended - self._started
            # TensorFlow pulls the batches from a thread a few ahead, so a wait can start before
            # the epoch does; never more than the epoch.
            wait = EpochWait(epoch + 1, seconds, min(self._waited_in_training, seconds))
            self.epochs.append(wait)
            if self.verbose:
                print(describe(wait, self.data_bound_share), flush=True)

    return InputMonitor


def describe(wait: EpochWait, data_bound_share: float = DATA_BOUND_SHARE) -> str:
    """`input wait, epoch 3: 4% of 2.8 s` (+ a warning when data-bound after the first epoch)."""
    line = f"input wait, epoch {wait.epoch}: {wait.share:.0%} of {wait.seconds:.1f} s"
    if wait.epoch == 1:
        return line + " (first epoch: includes filling the shuffle buffer and compiling)"
    if wait.share > data_bound_share:
        return line + f"\nWARNING: data-bound (waited more than {data_bound_share:.0%}): " + ADVICE
    return line
