# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # TPU setup: find the accelerator, replicate a computation, train with `fit` and a custom loop
#
# TensorFlow's "Use TPUs" guide as a notebook that runs unchanged on a Kaggle TPU (v5e-8),
# in Colab, on a GPU, or on a laptop CPU.
#
# * On **today's Kaggle TPU VMs** TensorFlow is `tensorflow-cpu` and cannot see the TPU, so
#   `BACKEND="auto"` runs Keras 3 on **JAX** with `keras.distribution.DataParallel` over all cores.
# * Where TensorFlow can see a TPU (Colab, a Cloud TPU VM with `tensorflow-tpu`) it uses
#   `TPUStrategy`; on several GPUs `MirroredStrategy`; otherwise the default strategy.
# * On a CPU, `SIMULATE_DEVICES=8` splits the CPU into 8 replicas, so the same 8-replica code a
#   TPU v5e-8 runs is exercised anywhere (this is how CI tests it).
#
# The machine learning is in this notebook's own cells, to edit: `load_mnist` and `get_dataset` (the
# data), `build_model` (the network), the `compile` / `fit` cell, and `train_multiple_steps` (the custom
# loop). `nbkit` only finds and sets up the accelerator and checks the parameters and the batch.
#
# Run it with papermill: `papermill notebooks/01_tpu_setup.ipynb out/01.ipynb -p BACKEND jax`;
# list the parameters with `papermill --help-notebook notebooks/01_tpu_setup.ipynb`.

# %% tags=["parameters"]
BACKEND: str = "auto"  # Keras backend: "auto" (JAX on TPUs TensorFlow cannot see), "tensorflow" or "jax"
PROFILE: str = "auto"  # "auto" (smoke on CPU, full on TPU/GPU), "smoke" (tiny, quick) or "full"
SIMULATE_DEVICES: int = 8  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8; 0: no split)
EPOCHS: int = 0  # training epochs; 0 means the profile's default (smoke 2, full 5)
PER_REPLICA_BATCH: int = 0  # batch per replica; 0 means the profile's default (smoke 16, full 128)
STEPS_PER_EXECUTION: int = 32  # training steps per compiled call (fewer host round-trips)

# %% [markdown]
# ## Setup
#
# `accel.setup` must run before anything imports `keras` or `tensorflow` (importing TensorFlow
# imports Keras, and Keras fixes its backend at import). It checks the parameters first, so a
# wrong papermill value stops here with a message naming it.

# %%
from nbkit import accel, params

params.check_parameters(globals(), STEPS_PER_EXECUTION=1)

acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES)
print(acc.describe())

# %% [markdown]
# The profile sets the run's size: "smoke" is small enough for a CPU in CI, "full" is the guide's.

# %%
profile = PROFILE if PROFILE != "auto" else ("smoke" if acc.kind == "cpu" else "full")
if profile == "smoke":  # seconds on a CPU: 2,048 generated digits, 2 epochs
    epochs, per_replica_batch, train_images, test_images = 2, 16, 2048, 512
else:  # the guide's run: all of MNIST, 5 epochs
    epochs, per_replica_batch, train_images, test_images = 5, 128, 60000, 10000
epochs = EPOCHS or epochs
per_replica_batch = PER_REPLICA_BATCH or per_replica_batch
print(f"profile={profile}: {epochs} epochs, {per_replica_batch} images per replica ({acc.num_replicas} replicas)")

# %% [markdown]
# ## Devices
#
# The logical devices the replicas run on (TPU cores, GPUs, or slices of the CPU).

# %%
for name in acc.device_names:
    print(name)

# %% [markdown]
# ### Manual device placement
#
# Ops inside `tf.device(name)` (TensorFlow: a name of `acc.device_names`) or `jax.default_device(device)`
# (JAX: one of `acc.jax_devices`) run on that device; without either, on the first.

# %%
import keras
import numpy as np

a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
b = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype="float32")
if acc.backend == "tensorflow":
    import tensorflow as tf

    with tf.device(acc.device_names[0]):
        c = keras.ops.matmul(a, b)
    print("c device:", c.device)
else:
    import jax

    with jax.default_device(acc.jax_devices[0]):
        c = keras.ops.matmul(a, b)
    print("c device:", ", ".join(str(d) for d in c.devices()))
print(keras.ops.convert_to_numpy(c))

# %% [markdown]
# ### Replicate a computation on every replica
#
# On TensorFlow, `strategy.run` inside a `tf.function` (eager is slow, and warns); on JAX, `shard_map`
# over a mesh of the devices: every replica gets the same inputs (`PartitionSpec()`) and computes the
# product on its own, and the results come back stacked, one slice per replica (`PartitionSpec("replica")`).

# %%
if acc.backend == "tensorflow":
    replicated = tf.function(lambda x, y: acc.strategy.run(keras.ops.matmul, args=(x, y)))
    results = acc.strategy.experimental_local_results(replicated(a, b))
else:
    from jax.sharding import Mesh, PartitionSpec

    try:
        from jax import shard_map  # JAX 0.7 and later
    except ImportError:  # an older JAX (a pinned Kaggle image)
        from jax.experimental.shard_map import shard_map
    replicated = shard_map(
        lambda x, y: keras.ops.matmul(x, y)[None],
        mesh=Mesh(np.array(acc.jax_devices), ("replica",)),
        in_specs=(PartitionSpec(), PartitionSpec()),
        out_specs=PartitionSpec("replica"),
    )
    results = jax.jit(replicated)(a, b)
for name, z in zip(acc.device_names, results):
    print(f"{name}: {np.asarray(z).tolist()}")

# %% [markdown]
# ## Data
#
# MNIST from `keras.datasets` in the full profile (it downloads once, into `~/.keras/datasets`). The
# smoke profile, and a run without internet, use generated MNIST-shaped digits instead: 10 classes of
# stroke patterns, shifted and noisy, in the same arrays `load_data()` returns.

# %%
from nbkit.inputs import digits

NUM_CLASSES = 10


def load_mnist():
    """((x_train, y_train), (x_test, y_test)): 28 x 28 uint8 images and their labels."""
    if profile == "full":
        try:
            return keras.datasets.mnist.load_data()
        except Exception as error:  # no internet (a Kaggle notebook has it off by default): go on without
            print(f"MNIST could not be downloaded ({type(error).__name__}: {error}); using generated digits.")
    print("generated MNIST-shaped digits")
    return digits.generate(train_images, test_images)


(x_train, y_train), (x_test, y_test) = load_mnist()
print(f"{len(x_train)} training and {len(x_test)} test images")

# %% [markdown]
# The input pipeline, in `tf.data` on either backend (Keras' `fit` on JAX reads a `tf.data.Dataset`
# too). Images stay `uint8` until the model rescales them, so the host sends a quarter of the bytes.
# Training data is shuffled and repeated forever, so every step gets a full batch and the replicas stay
# in step; `drop_remainder` gives every replica the same share of each batch.

# %%
import tensorflow as tf


def get_dataset(images, labels, batch_size, training, input_context=None):
    """Batches of (image (28, 28, 1) uint8, label)."""
    dataset = tf.data.Dataset.from_tensor_slices((images[..., None], labels))
    if input_context is not None and input_context.num_input_pipelines > 1:  # one shard per input pipeline
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if training:
        dataset = dataset.shuffle(10000).repeat()
    return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


# %% [markdown]
# How the run steps through the data: the global batch is the per-replica batch times the replicas,
# and `steps_per_execution` runs several steps per compiled call; Keras runs whole executions, so an
# epoch is cut to a whole number of them. (TensorFlow's MirroredStrategy over simulated CPUs fails with
# more than one step per execution: `acc.max_steps_per_execution` says so there.)

# %%
global_batch = per_replica_batch * acc.num_replicas
steps_per_epoch = max(1, len(x_train) // global_batch)
steps_per_execution = min(STEPS_PER_EXECUTION, steps_per_epoch, acc.max_steps_per_execution or STEPS_PER_EXECUTION)
steps_per_epoch -= steps_per_epoch % steps_per_execution
print(f"global batch {global_batch}, {steps_per_epoch} steps per epoch, {steps_per_execution} per execution")
train_dataset = get_dataset(x_train, y_train, global_batch, training=True)
test_dataset = get_dataset(x_test, y_test, global_batch, training=False)

# %% [markdown]
# ## The model
#
# Two convolution blocks and a dense layer: enough for MNIST, small enough to train in seconds on a
# CPU. It ends in logits (no softmax): the loss applies the softmax itself, which is numerically safer.

# %%
from keras import layers


def build_model():
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Rescaling(1 / 255),  # uint8 pixels to 0-1, on the device
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(64, activation="relu"),
            layers.Dense(NUM_CLASSES),  # logits
        ],
        name="mnist_cnn",
    )


# %% [markdown]
# ## Train with Keras `fit`
#
# The model and optimizer are created inside `acc.scope()` so their variables are placed on (or
# mirrored across) every replica.

# %%
with acc.scope():
    model = build_model()
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
        steps_per_execution=steps_per_execution,
    )
print(f"{model.name}: {model.count_params():,} parameters")

# %% tags=["nbval-ignore-output"]
history = model.fit(
    train_dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, validation_data=test_dataset, verbose=2
)

# %%
val_accuracy = history.history["val_sparse_categorical_accuracy"][-1]
print(f"learned (validation accuracy above 3x chance): {val_accuracy > 3 / NUM_CLASSES}")

# %% [markdown]
# ## Train with a custom loop (TensorFlow backend)
#
# The guide's custom training loop. Each replica computes the loss of its own share of the batch,
# scaled with `tf.nn.compute_average_loss` by the *global* batch, so the gradients the strategy sums
# across replicas are the gradient of the global mean. `train_multiple_steps` runs a whole epoch of
# steps in one `tf.function` (AutoGraph turns the `for` into a `tf.while_loop` on the device), which
# saves a host round-trip per step on a TPU. On the JAX backend, `fit` above is the path.


# %%
@tf.function
def train_multiple_steps(iterator, steps):
    def step_fn(inputs):
        images, labels = inputs
        with tf.GradientTape() as tape:
            logits = loop_model(images, training=True)
            per_example_loss = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch)
        grads = tape.gradient(loss, loop_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, loop_model.trainable_variables))
        training_loss.update_state(loss * strategy.num_replicas_in_sync)  # this replica's share -> the mean
        training_accuracy.update_state(labels, logits)

    for _ in tf.range(steps):
        strategy.run(step_fn, args=(next(iterator),))


# %% [markdown]
# The model, optimizer and metrics are made in the strategy's scope. The dataset is distributed from
# a function, so each input pipeline builds its own per-replica batches.

# %%
if acc.backend == "tensorflow":
    strategy = acc.strategy
    with strategy.scope():
        loop_model = build_model()
        optimizer = keras.optimizers.Adam(learning_rate=1e-3)
        training_loss = keras.metrics.Mean("training_loss")
        training_accuracy = keras.metrics.SparseCategoricalAccuracy("training_accuracy")
        # Made now: the optimizer's variables made inside the compiled loop fail under MirroredStrategy
        # ("You must feed a value for placeholder tensor").
        optimizer.build(loop_model.trainable_variables)
    train_iterator = iter(
        strategy.distribute_datasets_from_function(
            lambda context: get_dataset(
                x_train, y_train, context.get_per_replica_batch_size(global_batch), True, context
            )
        )
    )
    print(f"per-replica batch {global_batch // acc.num_replicas}, global batch {global_batch}")
else:
    print("Custom tf.distribute loops need the TensorFlow backend; skipped on JAX.")

# %% tags=["nbval-ignore-output"]
loop_history = []
for epoch in range(epochs if acc.backend == "tensorflow" else 0):
    train_multiple_steps(train_iterator, tf.constant(steps_per_epoch))  # a tensor: no retracing
    loop_history.append({"loss": float(training_loss.result()), "accuracy": float(training_accuracy.result())})
    loss, accuracy = loop_history[-1].values()
    print(
        f"epoch {epoch + 1}/{epochs}: step {int(optimizer.iterations.numpy())}, "
        f"loss {loss:.4f}, accuracy {accuracy:.4f}"
    )
    training_loss.reset_state()
    training_accuracy.reset_state()

# %%
if loop_history:
    loss_fell = loop_history[-1]["loss"] < loop_history[0]["loss"]
    accurate = loop_history[-1]["accuracy"] > 3 / NUM_CLASSES
    print(f"custom loop learned (loss fell: {loss_fell}, training accuracy above 3x chance: {accurate})")
