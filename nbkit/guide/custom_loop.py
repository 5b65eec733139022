"""A custom training loop for tf.distribute strategies (TensorFlow backend), as in TensorFlow's TPU guide.

Each replica computes its loss over its own per-replica batch, scaled by the *global* batch
(`tf.nn.compute_average_loss`), so the gradients summed across replicas are the gradient of
the global mean. `train_steps` runs several steps inside one `tf.function` (a `tf.while_loop`
on the device), which cuts the per-step Python and host round-trip cost on a TPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nbkit.errors import AcceleratorError


class CustomLoop:
    """Holds the model, optimizer and metrics; `train_steps(iterator, n)` runs n compiled steps."""

    def __init__(self, strategy: Any, model: Any, optimizer: Any, global_batch_size: int) -> None:
        import keras
        import tensorflow as tf

        if keras.backend.backend() != "tensorflow":
            raise AcceleratorError("CustomLoop needs the TensorFlow backend; on JAX use model.fit (DataParallel).")
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.global_batch_size = global_batch_size
        with strategy.scope():
            self.loss = keras.metrics.Mean("training_loss")
            self.accuracy = keras.metrics.SparseCategoricalAccuracy("training_accuracy")
            # Create the optimizer's slot variables now: created inside the compiled multi-step
            # loop, they fail under MirroredStrategy with "You must feed a value for placeholder".
            optimizer.build(model.trainable_variables)
        self._train_steps = tf.function(self._steps)

    def _step(self, inputs: Any) -> None:
        import keras
        import tensorflow as tf

        images, labels = inputs
        with tf.GradientTape() as tape:
            logits = self.model(images, training=True)
            per_example = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch_size)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        # `loss` is this replica's share of the global mean; the metric wants the mean itself.
        self.loss.update_state(loss * self.strategy.num_replicas_in_sync)
        self.accuracy.update_state(labels, logits)

    def _steps(self, iterator: Iterator[Any], steps: Any) -> None:
        import tensorflow as tf

        for _ in tf.range(steps):  # AutoGraph turns this into a tf.while_loop
            self.strategy.run(self._step, args=(next(iterator),))

    def train_steps(self, iterator: Iterator[Any], steps: int) -> dict[str, float]:
        """Run `steps` training steps in one call; return the running loss and accuracy."""
        import tensorflow as tf

        # A tensor, not an int, so a new step count does not retrace the function.
        self._train_steps(iterator, tf.constant(steps))
        return {"loss": float(self.loss.result()), "accuracy": float(self.accuracy.result())}

    def reset_metrics(self) -> None:
        """Start the running metrics again (call once per epoch)."""
        self.loss.reset_state()
        self.accuracy.reset_state()
