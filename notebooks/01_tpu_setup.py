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

params.check_parameters(globals())
params.check_run(BACKEND, PROFILE, SIMULATE_DEVICES, EPOCHS, PER_REPLICA_BATCH, STEPS_PER_EXECUTION)

acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES)
print(acc.describe())

# %% [markdown]
# The profile sets the run's size: "smoke" is small enough for a CPU in CI, "full" is the guide's.

# %%
profile = params.resolve_profile(PROFILE, acc.kind)
settings = {
    "smoke": dict(epochs=2, per_replica_batch=16, train_images=4096, test_images=1024),
    "full": dict(epochs=5, per_replica_batch=128, train_images=60000, test_images=10000),
}[profile]
epochs = EPOCHS or settings["epochs"]
per_replica_batch = PER_REPLICA_BATCH or settings["per_replica_batch"]
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
# `acc.device(i)` is `tf.device(...)` on TensorFlow and `jax.default_device(...)` on JAX.

# %%
import keras
import numpy as np

a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
b = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype="float32")
with acc.device(0):
    c = keras.ops.matmul(a, b)
print("c device:", acc.placement(c))
print(keras.ops.convert_to_numpy(c))

# %% [markdown]
# ### Replicate a computation on every replica
#
# `acc.run` is `strategy.run` inside a `tf.function` on TensorFlow, and `jax.shard_map` over the
# device mesh on JAX: every replica gets the same inputs and computes the product on its own.

# %%
for name, z in zip(acc.device_names, acc.run(keras.ops.matmul, a, b)):
    print(f"{name}: {z.tolist()}")

# %% [markdown]
# ## Data
#
# MNIST when it can be loaded (full profile); otherwise, and always in CI, a generated
# MNIST-shaped dataset of 10 learnable classes. Images stay `uint8` until the model rescales
# them, so the host sends a quarter of the bytes. The plan says how the run steps through them:
# the global batch is the per-replica batch times the replicas, and `steps_per_execution` runs
# several steps per compiled call (lowered, and said so, where a known bug needs it).

# %%
from nbkit import batching
from nbkit.guide import mnist

data = mnist.load(prefer_real=profile == "full", num_train=settings["train_images"], num_test=settings["test_images"])
print(f"{data.source}: {len(data.x_train)} training and {len(data.x_test)} test images")
plan = batching.plan(
    len(data.x_train),
    len(data.x_test),
    per_replica_batch,
    acc.num_replicas,
    item_bytes=28 * 28,
    steps_per_execution=STEPS_PER_EXECUTION,
    execution_limit=acc.execution_limit,
)
print(plan.describe())
global_batch = plan.global_batch
train_dataset = mnist.to_dataset(data.x_train, data.y_train, global_batch, training=True)
test_dataset = mnist.to_dataset(data.x_test, data.y_test, global_batch, training=False)

# %% [markdown]
# ## Train with Keras `fit`
#
# The model and optimizer are created inside `acc.scope()` so their variables are placed on (or
# mirrored across) every replica.

# %%
from nbkit import models

with acc.scope():
    model = models.small_cnn(mnist.IMAGE_SHAPE, mnist.NUM_CLASSES, filters=(16, 32), dense=64)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
        steps_per_execution=plan.steps_per_execution,
    )

# %% tags=["nbval-ignore-output"]
history = model.fit(
    train_dataset, epochs=epochs, steps_per_epoch=plan.steps_per_epoch, validation_data=test_dataset, verbose=2
)

# %%
val_accuracy = history.history["val_sparse_categorical_accuracy"][-1]
print(f"learned (validation accuracy above 3x chance): {val_accuracy > 3 / mnist.NUM_CLASSES}")

# %% [markdown]
# ## Train with a custom loop (TensorFlow backend)
#
# The guide's custom training loop, in `nbkit.guide.custom_loop`: the dataset is distributed from a
# function, so each replica's input pipeline builds its own per-replica batches; each replica's
# loss is scaled with `tf.nn.compute_average_loss` by the global batch; and `train_steps` runs a
# whole epoch of steps inside one `tf.function`. On the JAX backend, `fit` above is the path.

# %%
from nbkit.guide import custom_loop

if acc.backend == "tensorflow":
    with acc.scope():
        loop_model = models.small_cnn(mnist.IMAGE_SHAPE, mnist.NUM_CLASSES, filters=(16, 32), dense=64)
        loop = custom_loop.CustomLoop(acc.strategy, loop_model, keras.optimizers.Adam(), global_batch)
    distributed_train = acc.strategy.distribute_datasets_from_function(
        lambda ctx: mnist.to_dataset(
            data.x_train, data.y_train, ctx.get_per_replica_batch_size(global_batch), True, ctx
        )
    )
    train_iterator = iter(distributed_train)
    print(f"per-replica batch {global_batch // acc.num_replicas}, global batch {global_batch}")
else:
    print("Custom tf.distribute loops need the TensorFlow backend; skipped on JAX.")

# %% tags=["nbval-ignore-output"]
loop_history = []
for epoch in range(epochs if acc.backend == "tensorflow" else 0):
    loop.reset_metrics()
    loop_history.append(loop.train_steps(train_iterator, plan.steps_per_epoch))
    print(f"epoch {epoch + 1}/{epochs}: step {int(loop.optimizer.iterations.numpy())}, {loop_history[-1]}")

# %%
if loop_history:
    print(f"custom loop learned (training accuracy above 3x chance): {loop_history[-1]['accuracy'] > 0.3}")
