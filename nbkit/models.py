"""Keras plumbing around the notebook's model: its logits checked against the classes, the input monitor, and
predictions in the dataset's order, checked against one-device predictions (keras 3.8 + jax 0.4.35 on 8
devices returned rows of other images: docs/limits.md)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbkit import env
from nbkit.errors import AcceleratorError, ParameterError


def check_outputs(model: Any, num_classes: int) -> None:
    """A ParameterError, before any training, unless `model` (the notebook's `build_model()`) gives one row of
    `num_classes` logits per input: a wrong head trains a whole run on JAX and fails only in scoring."""
    try:
        shape = model.output_shape
    except (AttributeError, ValueError):  # a subclassed model not built yet: nothing to read before its first step
        return
    shape = shape[0] if isinstance(shape, list) and len(shape) == 1 else shape
    if isinstance(shape, list):
        got = f"{len(shape)} outputs ({', '.join(str(tuple(s)) for s in shape)})"
    elif len(shape) != 2:
        got = f"outputs of shape {tuple(shape)} (batch first)"
    elif shape[-1] != num_classes:
        got = f"{shape[-1]} logits per input"
    else:
        return
    raise ParameterError(
        f"build_model() gives {got}, but the data has {num_classes} classes: end the model in one output of "
        f"{num_classes} logits per input, e.g. layers.Dense({num_classes}) (the number of classes, not a constant)."
    )


# ---- the input monitor: `model.fit(monitor.watch(dataset), ..., callbacks=[monitor])` ----

_DATA_BOUND_SHARE = 0.25  # above this, speeding up the input pays more than speeding up the model
_ADVICE = (
    "the input pipeline is the bottleneck: cache the decoded images (`.cache()` after decode in get_dataset, "
    "when they fit in memory), read a smaller image size, use fewer/cheaper augmentations, or give the host more "
    "cores; see docs/benchmarks.md's 'Input speed'."
)


@dataclass(frozen=True)
class _EpochWait:
    epoch: int  # 1-based, as Keras prints it
    seconds: float
    waited: float

    @property
    def share(self) -> float:
        return self.waited / self.seconds if self.seconds > 0 else 0.0


def input_monitor() -> Any:
    """A Keras callback that prints input waiting per epoch (kept in `.epochs`); feed `fit` its `watch(dataset)`."""
    import keras  # only here: importing nbkit.models must not choose the Keras backend

    class InputMonitor(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.epochs: list[_EpochWait] = []
            self._waited = self._started = self._waited_in_training = 0.0
            self._training_ended: float | None = None

        def watch(self, dataset: Iterable[Any]) -> Iterable[Any]:
            """`dataset`'s batches (tf.data: as NumPy), timing each `next()`; untimed on a pod slice, where
            Keras shards only a tf.data dataset over the processes."""
            if _process_count() > 1:
                print("input monitor: off on a pod slice (Keras shards the tf.data dataset over the hosts itself)")
                return dataset
            return self._timed(dataset.as_numpy_iterator() if hasattr(dataset, "as_numpy_iterator") else dataset)

        def _timed(self, batches: Iterable[Any]) -> Iterator[Any]:
            start = time.perf_counter()
            for batch in batches:  # the time from asking for a batch to having it
                self._waited += time.perf_counter() - start
                yield batch
                start = time.perf_counter()

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
            # TensorFlow pulls batches a few ahead, so a wait can start before the epoch: cap it.
            wait = _EpochWait(epoch + 1, seconds, min(self._waited_in_training, seconds))
            self.epochs.append(wait)
            print(_describe(wait), flush=True)

    return InputMonitor()


def _describe(wait: _EpochWait) -> str:
    """`input wait, epoch 3: 4% of 2.8 s` (+ a warning when data-bound after the first epoch)."""
    line = f"input wait, epoch {wait.epoch}: {wait.share:.0%} of {wait.seconds:.1f} s"
    if wait.epoch == 1:
        return line + " (first epoch: includes filling the shuffle buffer and compiling)"
    if wait.share > _DATA_BOUND_SHARE:
        return line + f"\nWARNING: data-bound (waited more than {_DATA_BOUND_SHARE:.0%}): " + _ADVICE
    return line


# ---- predictions ----

_CHECKED_ROWS = 8


def predict(model: Any, dataset: Any, global_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 logits, keys) of the (inputs, key) items of an unbatched tf.data `dataset`, in its order (inputs:
    an image, or a dict such as a text's token ids). The last batch is padded so every replica gets a full one;
    the first batch is checked (`check_rows`)."""
    import tensorflow as tf

    def pad(tensor: Any) -> Any:
        return tf.pad(tensor, [[0, global_batch - tf.shape(tensor)[0]]] + [[0, 0]] * (len(tensor.shape) - 1))

    found_logits, found_keys = [], []
    batches = dataset.batch(global_batch).map(lambda inputs, keys: (tf.nest.map_structure(pad, inputs), keys))
    for inputs, keys in batches.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        found_logits.append(global_logits(model, inputs))
        found_keys.append(keys)
        if len(found_logits) == 1:
            check_rows(model, inputs, found_logits[0])
    keys = np.concatenate(found_keys)
    logits = np.concatenate(found_logits)[: len(keys)]
    if keys.dtype.kind in "SO":  # test ids
        keys = np.array([k.decode() for k in keys])
    return logits, keys


def global_logits(model: Any, batch: Any) -> np.ndarray:
    """float64 logits for every row of a global `batch` (images, or a dict of a model's named inputs); on a pod
    slice every process holds the batch, feeds its share of the rows and gets every process's rows back."""
    processes = _process_count()
    if processes == 1:
        return np.asarray(model.predict(batch, verbose=0, batch_size=_length(batch)), np.float64)
    import jax

    share = _length(batch) // processes
    return _gathered(model, jax.tree.map(lambda rows: np.asarray(rows)[jax.process_index() * share :][:share], batch))


def _gathered(model: Any, local: Any) -> np.ndarray:
    """float64 logits of every process's rows from this process's `local` ones. model.predict cannot fetch an
    output spread over other hosts' devices ("spans non-addressable devices"): the forward pass returns it
    replicated to every device instead."""
    import jax
    import keras
    from jax.sharding import NamedSharding, PartitionSpec

    def layout(rows: np.ndarray) -> Any:  # this process's rows of one input, as part of the global batch
        shape = (rows.shape[0] * _process_count(), *rows.shape[1:])
        return keras.distribution.distribution().get_data_layout(shape).backend_layout

    replicated = NamedSharding(layout(jax.tree.leaves(local)[0]).mesh, PartitionSpec())
    arrays = jax.tree.map(lambda rows: jax.make_array_from_process_local_data(layout(rows), rows), local)
    return np.asarray(_compiled_forward(model, arrays, out_shardings=replicated), np.float64)


def _compiled_forward(model: Any, inputs: Any, **jit: Any) -> Any:
    """The model's logits for `inputs` as one compiled JAX program: an eager call on JAX compiles every op apart
    (EfficientNetB0: ~600 programs, 34 s on the 2-core machine against 8 s)."""
    import jax

    forward = jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0], **jit)
    variables = [[v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables]]
    return forward(*variables, inputs)


def _length(batch: Any) -> int:
    return len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)


def _process_count() -> int:
    import keras

    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def check_rows(model: Any, first_batch: Any, logits: np.ndarray) -> None:
    """An AcceleratorError if _CHECKED_ROWS rows of the first batch (images, or a dict of named inputs),
    predicted undistributed, differ from their distributed `logits` (which start at the batch's first row)."""
    import keras

    count = min(len(logits), _length(first_batch))
    picks = sorted({int(i) for i in np.linspace(0, count - 1, min(_CHECKED_ROWS, count))})
    picked = {k: v[picks] for k, v in first_batch.items()} if isinstance(first_batch, dict) else first_batch[picks]
    on_jax = keras.backend.backend() == "jax"  # either way one call that does not split the rows over the replicas
    alone = np.asarray(_compiled_forward(model, picked) if on_jax else model(picked, training=False), np.float64)
    distributed = np.asarray(logits[picks], np.float64)
    # Measured between distributed and undistributed predictions of the same model: < 3e-7 in float32,
    # ~1e-5 in bfloat16. Rows of other images differ by far more (0.058 on an untrained CNN in keras 3.8).
    in_16_bits = getattr(getattr(model, "dtype_policy", None), "compute_dtype", "") in ("bfloat16", "float16")
    tolerance = (1e-2 if in_16_bits else 1e-3) * max(1.0, float(np.abs(alone).max()))
    errors = np.abs(distributed - alone).max(axis=1)
    if errors.max() > tolerance:
        row = picks[int(errors.argmax())]
        found = env.installed_versions(("keras", "jax", "jaxlib", "tensorflow", "tensorflow-cpu"))
        versions = " + ".join(f"{name} {version}" for name, version in found.items())
        raise AcceleratorError(
            f"Row {row} of the distributed predictions differs from the same image predicted alone "
            f"(by {errors.max():.3g}; tolerance {tolerance:.3g}): this {versions} returns predictions that do "
            "not belong to their images. Nothing was written. Use the versions the README tests, or predict on "
            "one device."
        )
