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
# # CycleGAN on TPU: Kaggle's "I'm Something of a Painter Myself", or any two folders of pictures
#
# Config -> data -> model -> train -> paint -> score. The competition asks for 7,000 to 10,000 pictures in Monet's
# style, scored by MiFID. A CycleGAN learns the style from 300 paintings and 7,038 photos that are not pairs: two
# generators (photo -> painting -> photo) and two discriminators train against each other. This is the starter
# everyone copies (Amy Jang's) for Keras 3 on JAX, which Kaggle's TPU VMs run: no tensorflow_addons, no
# `TPUStrategy`, one JAX `train_step` updating four networks with four optimizers. On Kaggle: attach the
# competition, pick a TPU. On a CPU: a small CycleGAN on a generated sample whose "paintings" are photos under a
# known style. Your own style transfer: a `DATA_ROOT` holding `monet/` (the style) and `photo/`.
#
# **This notebook is the program: edit it.** The pipeline, networks, losses and `train_step` are plain code below;
# `nbkit` finds and checks the data, computes the competition's metric and writes `images.zip` all or nothing.
#
# `papermill notebooks/09_monet_cyclegan.ipynb out/09.ipynb -p SIMULATE_DEVICES 8`

# %% tags=["parameters"]
DATA_ROOT: str = "auto"  # monet_tfrec/ and photo_tfrec/ (or monet/, photo/ of pictures); "auto": Kaggle's or a sample
IMAGE_SIZE: int = 256  # training size (a power of 2: the U-Net halves it to 2x2); written at 256 (Kaggle's); smoke: 64
EPOCHS: int = 25  # training epochs, each one pass over the photo_count (smoke: at most 6); more than done continues
PER_REPLICA_BATCH: int = 4  # pictures of each domain per replica per step (the global batch is this times the replicas)
LEARNING_RATE: float = 2e-4  # Adam's, for each of the four networks (beta_1 0.5, as the CycleGAN paper)
LAMBDA_CYCLE: float = 10.0  # weight of the cycle loss: a photo turned into a painting and back must be the photo
LAMBDA_IDENTITY: float = 0.5  # identity loss weight x LAMBDA_CYCLE: the painter leaves a painting as it is (0: none)
AUGMENT: str = "jitter"  # "jitter": random mirror, enlarge by 12% and crop back (the CycleGAN paper's); "none"
DIFF_AUGMENT: bool = True  # colour, translation and cutout on all the discriminators see (helps with 300 paintings)
TIME_BUDGET: float = 270.0  # training minutes at most (Kaggle runs these notebooks up to 5 hours), time left to paint
IMAGES: int = 7038  # images.zip's pictures (Kaggle: 7,000-10,000; at most 2 a photo, one mirrored); smoke: one a photo
RESUME: str = "auto"  # "auto": continue from the checkpoint in OUTPUT_DIR if any; "restart": train from scratch
SEED: int = 42  # fixes the initial weights, the order of the pictures and their augmentation
PROFILE: str = "auto"  # "full": as above; "smoke": 64 px, narrow networks, at most 6 epochs; "auto": smoke on a CPU
BACKEND: str = "jax"  # Keras backend: "jax" (the train_step below is written for it)
PRECISION: str = "auto"  # "auto" (bfloat16 on a TPU or GPU of capability 8+, else float32), "float32", "mixed_bfloat16"
SIMULATE_DEVICES: int = 0  # CPU only: split the CPU into N replicas (8: like a TPU v5e-8; 0: no split)
STEPS_PER_EXECUTION: int = 16  # training steps per compiled call (fewer host round-trips)
OUTPUT_DIR: str = "auto"  # images.zip, checkpoints, plots, metrics.json; "auto": the working folder's monet-cyclegan/

# %% [markdown]
# ## Setup
# Parameters checked, the output folder taken (this run's files replace the last run's only when it ends well),
# the accelerator found.

# %%
from nbkit import accel, atomic, params, staging
from nbkit.errors import DataError, ParameterError

params.check_parameters(
    globals(), IMAGE_SIZE=(32, 64, 128, 256, 512, 1024), EPOCHS=1, PER_REPLICA_BATCH=1, IMAGES=1,
    STEPS_PER_EXECUTION=1, BACKEND=("jax",), AUGMENT=("jitter", "none"), RESUME=("auto", "restart"),
    PRECISION=("auto", "float32", "mixed_bfloat16"),
)
for name in ("LEARNING_RATE", "LAMBDA_CYCLE", "LAMBDA_IDENTITY", "TIME_BUDGET"):  # NaN too
    if not 0 < globals()[name] < float("inf") and not (name == "LAMBDA_IDENTITY" and LAMBDA_IDENTITY == 0):
        raise ParameterError(
            f"{name}={globals()[name]}: a finite number above 0 (LAMBDA_IDENTITY may be 0: no identity loss)."
        )
outputs = staging.start(OUTPUT_DIR, default="monet-cyclegan", data_root=DATA_ROOT)  # never inside DATA_ROOT
print(outputs.describe())
acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES, precision=PRECISION)
if acc.precision == "mixed_float16":  # older GPUs: float16 needs loss scaling, which this train_step does not do
    print(acc.set_precision("float32"))

# %% [markdown]
# ## Data
# Both domains read and checked once, before anything is built: record counts against the file names, every
# picture decoded as training decodes it (a bad one is named), one size in the TFRecords, names that can name files
# in images.zip and stay different there. The smoke profile: 64 px, networks an eighth as
# wide, a few epochs. An epoch is one pass over the photos; the global batch grows with the replicas.

# %%
from nbkit.imagegen import paintings

data = paintings.load(DATA_ROOT)
print(data.describe())
SMOKE = PROFILE == "smoke" or (PROFILE == "auto" and acc.kind == "cpu")
photo_count, monet_count = len(data.photo.names), len(data.monet.names)
if SMOKE:
    print(params.override(
        globals(), "smoke profile", IMAGE_SIZE=min(IMAGE_SIZE, 64), EPOCHS=min(EPOCHS, 6), IMAGES=photo_count
    ))
zip_names, line = paintings.check_image_count(IMAGES, data.photo, full=not SMOKE)  # each photo, then mirrored
print(line)
FILTERS = 8 if SMOKE else 64  # the first layer's filters; the starter's 64
GLOBAL_BATCH = PER_REPLICA_BATCH * acc.num_replicas
steps_per_execution = max(1, min(STEPS_PER_EXECUTION, photo_count // GLOBAL_BATCH))
steps_per_epoch = photo_count // GLOBAL_BATCH // steps_per_execution * steps_per_execution
if steps_per_epoch == 0 or monet_count < GLOBAL_BATCH:
    raise DataError(
        f"{photo_count} photos, {monet_count} paintings: each needs a global batch ({GLOBAL_BATCH}). "
        "Lower PER_REPLICA_BATCH."
    )
print(
    f"{IMAGE_SIZE} px, {EPOCHS} epochs of {steps_per_epoch} steps ({steps_per_execution} per execution), "
    f"global batch {GLOBAL_BATCH}"
)

# %% [markdown]
# ## Input pipeline
# tf.data on the host: decode, resize to `IMAGE_SIZE`, augment, scale to [-1, 1] (the generators end in
# tanh). Each domain is repeated and shuffled on its own, so every photo is seen each epoch; the starter's
# `Dataset.zip(monet, photo)` stopped at the 300th pair and trained on the same 300 photos every epoch.

# %%
import keras
import numpy as np
import tensorflow as tf

AUTO = tf.data.AUTOTUNE


def decode(encoded):
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    return tf.image.resize(tf.cast(image, tf.float32), [IMAGE_SIZE, IMAGE_SIZE], antialias=True)


def augment(image):
    """Random mirror, and the CycleGAN paper's jitter: enlarge by 12%, crop back at a random place."""
    larger = int(IMAGE_SIZE * 1.12)
    image = tf.image.resize(tf.image.random_flip_left_right(image), [larger, larger])
    return tf.image.random_crop(image, [IMAGE_SIZE, IMAGE_SIZE, 3])


def get_dataset(pictures, seed):
    """Endless shuffled, augmented batches of one domain, scaled to [-1, 1]."""
    dataset = tf.data.Dataset.from_tensor_slices(pictures.encoded).shuffle(len(pictures.encoded), seed=seed).repeat()
    dataset = dataset.map(decode, num_parallel_calls=AUTO)
    if AUGMENT == "jitter":
        dataset = dataset.map(augment, num_parallel_calls=AUTO)
    return dataset.map(lambda image: image / 127.5 - 1).batch(GLOBAL_BATCH, drop_remainder=True)


keras.utils.set_random_seed(SEED)
train_batches = tf.data.Dataset.zip((get_dataset(data.monet, SEED), get_dataset(data.photo, SEED + 1))).prefetch(AUTO)

# %% [markdown]
# ## The networks
# The starter's: a U-Net generator (down, up again with skip connections, dropout in the first three up blocks,
# tanh) and a PatchGAN discriminator scoring overlapping patches (30x30 at 256 px) as real or fake. Instance norm is
# `GroupNormalization(groups=-1)`. The starter goes down to 1x1, where instance norm outputs a constant and the
# innermost block learns nothing: this one stops at 2x2. The last layers stay float32 under bfloat16.

# %%
from keras import layers

init = keras.initializers.RandomNormal(0.0, 0.02)


def downsample(filters, norm=True):  # halves the size: conv, instance norm, leaky ReLU
    conv = layers.Conv2D(filters, 4, strides=2, padding="same", kernel_initializer=init, use_bias=False)
    return keras.Sequential([conv, *([layers.GroupNormalization(groups=-1)] if norm else []), layers.LeakyReLU(0.2)])


def upsample(filters, dropout=False):  # doubles it: transposed conv, instance norm, dropout, ReLU
    conv = layers.Conv2DTranspose(filters, 4, strides=2, padding="same", kernel_initializer=init, use_bias=False)
    return keras.Sequential(
        [conv, layers.GroupNormalization(groups=-1), *([layers.Dropout(0.5)] if dropout else []), layers.ReLU()]
    )


def build_generator(name):
    widths = [FILTERS * min(2**i, 8) for i in range(int(np.log2(IMAGE_SIZE)) - 1)]  # 64, 128, 256, 512, 512, ... to 2x2
    inputs = x = layers.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    skips = []
    for i, filters in enumerate(widths):
        x = downsample(filters, norm=i > 0)(x)
        skips.append(x)
    for i, (filters, skip) in enumerate(zip(reversed(widths[:-1]), reversed(skips[:-1]))):
        x = layers.Concatenate()([upsample(filters, dropout=i < 3)(x), skip])
    outputs = layers.Conv2DTranspose(
        3, 4, strides=2, padding="same", kernel_initializer=init, activation="tanh", dtype="float32"
    )(x)
    return keras.Model(inputs, outputs, name=name)


def build_discriminator(name):
    inputs = x = layers.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    for i, filters in enumerate((FILTERS, FILTERS * 2, FILTERS * 4)):
        x = downsample(filters, norm=i > 0)(x)
    x = layers.Conv2D(FILTERS * 8, 4, kernel_initializer=init, use_bias=False)(layers.ZeroPadding2D()(x))
    x = layers.LeakyReLU(0.2)(layers.GroupNormalization(groups=-1)(x))
    outputs = layers.Conv2D(1, 4, kernel_initializer=init, dtype="float32")(layers.ZeroPadding2D()(x))
    return keras.Model(inputs, outputs, name=name)  # one logit per patch


# %% [markdown]
# ## DiffAugment
# With 300 paintings a discriminator soon remembers them all, and its verdict stops teaching the generator.
# DiffAugment (Zhao et al., 2020) changes every picture the discriminators see, real or generated, at random
# (colour, a shift, a cut-out square), in the graph so the gradients flow through it; its seed is carried like
# Dropout's.

# %%
from keras import ops


class DiffAugment(layers.Layer):
    def __init__(self, seed, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True  # no weights to make

    def call(self, x, training=None):
        n, size = ops.shape(x)[0], IMAGE_SIZE
        uniform = lambda *shape: keras.random.uniform((n, *shape), seed=self.seed_generator)  # noqa: E731
        x = x + uniform(1, 1, 1) - 0.5  # brightness
        mean = ops.mean(x, axis=-1, keepdims=True)
        x = (x - mean) * (uniform(1, 1, 1) * 2) + mean  # saturation
        mean = ops.mean(x, axis=(1, 2, 3), keepdims=True)
        x = (x - mean) * (uniform(1, 1, 1) + 0.5) + mean  # contrast
        shift = ops.cast((uniform(2) - 0.5) * size / 4, "int32")  # translation, up to 1/8 of the picture, wrapping
        rows = (ops.arange(size)[None, :] - shift[:, :1]) % size
        cols = (ops.arange(size)[None, :] - shift[:, 1:]) % size
        x = ops.take_along_axis(x, rows[:, :, None, None], axis=1)
        x = ops.take_along_axis(x, cols[:, None, :, None], axis=2)
        centre = uniform(2) * size  # cutout: a square half the picture's side, zeroed
        inside_y = ops.abs(ops.arange(size)[None, :] - centre[:, :1]) < size / 4
        inside_x = ops.abs(ops.arange(size)[None, :] - centre[:, 1:]) < size / 4
        return ops.where(inside_y[:, :, None, None] & inside_x[:, None, :, None], 0.0, x)


# %% [markdown]
# ## The losses and the train step
# Binary cross-entropy on the discriminators' logits (real: 1, generated: 0); each generator wants its fakes scored
# real. The cycle loss (L1, times `LAMBDA_CYCLE`) asks photo -> painting -> photo to return the photo; the identity
# loss asks the painter to leave a painting as it is.
#
# Keras' JAX trainer calls `train_step(state, data)` with every variable's value and wants the new values back. It
# carries the model's variables and `self.optimizer`'s, one optimizer only (keras#19358), so the model keeps one
# Adam per network and lists their variables among its non-trainable ones, which the trainer carries (`compile`
# gets an optimizer only because `fit` wants one). The generators share one loss (the cycle loss once: each
# generator's gradient is the starter's), the discriminators the other: two `jax.value_and_grad` calls, then
# each network's Adam (`stateless_apply`). Dropout's and DiffAugment's seeds come back from `stateless_call`.

# %%
import jax


def bce(logits, target):
    logits = ops.cast(logits, "float32")
    return ops.mean(ops.binary_crossentropy(ops.full_like(logits, target), logits, from_logits=True))


def l1(a, b):
    return ops.mean(ops.abs(ops.cast(a, "float32") - ops.cast(b, "float32")))


NETWORKS = ("monet_generator", "photo_generator", "monet_discriminator", "photo_discriminator")
LOSSES = ("monet_gen_loss", "photo_gen_loss", "monet_disc_loss", "photo_disc_loss")


class CycleGan(keras.Model):
    def __init__(self):
        super().__init__(name="cycle_gan")
        self.monet_generator = build_generator("monet_generator")  # photo -> painting: the one we submit
        self.photo_generator = build_generator("photo_generator")  # painting -> photo
        self.monet_discriminator = build_discriminator("monet_discriminator")
        self.photo_discriminator = build_discriminator("photo_discriminator")
        self.diff_augment = DiffAugment(SEED, name="diff_augment")
        self.adams = {name: keras.optimizers.Adam(LEARNING_RATE, beta_1=0.5, name=f"{name}_adam") for name in NETWORKS}
        self.trackers = {name: keras.metrics.Mean(name=name) for name in LOSSES}  # epoch means of the losses
        self.built = True

    @property
    def non_trainable_variables(self):
        return super().non_trainable_variables + [v for adam in self.adams.values() for v in adam.variables]

    def compile(self, **kwargs):
        for name, adam in self.adams.items():
            adam.build(getattr(self, name).trainable_variables)
        super().compile(optimizer=keras.optimizers.SGD(), **kwargs)  # fit wants one; the Adams do the work

    def train_step(self, state, data):
        trainable, non_trainable, optimizer_state, metrics = state
        variables = self.trainable_variables + self.non_trainable_variables + self.metrics_variables
        value = dict(zip(map(id, variables), [*trainable, *non_trainable, *metrics]))
        of = lambda variables: [value[id(v)] for v in variables]  # noqa: E731
        real_monet, real_photo = data
        parts = (*NETWORKS, "diff_augment")
        weights = {name: of(getattr(self, name).trainable_variables) for name in parts}
        seeds = {name: of(getattr(self, name).non_trainable_variables) for name in parts}

        def run(name, x, weights, seeds):  # one network, statelessly; its new seeds kept in `seeds`
            y, seeds[name] = getattr(self, name).stateless_call(weights[name], seeds[name], x, training=True)
            return y

        def judge(name, x, weights, seeds):  # a discriminator's logits for (DiffAugmented) pictures
            return run(name, run("diff_augment", x, weights, seeds) if DIFF_AUGMENT else x, weights, seeds)

        def generator_loss(generators, seeds):
            seeds, now = dict(seeds), {**weights, **generators}
            # Each generator runs once on all it translates (instance norm is per picture: the same results).
            fake_monet, same_monet = ops.split(
                run("monet_generator", ops.concatenate([real_photo, real_monet]), now, seeds), 2
            )
            fake_photo, same_photo, cycled_photo = ops.split(
                run("photo_generator", ops.concatenate([real_monet, real_photo, fake_monet]), now, seeds), 3
            )
            cycled_monet = run("monet_generator", fake_photo, now, seeds)
            cycle = LAMBDA_CYCLE * (l1(real_monet, cycled_monet) + l1(real_photo, cycled_photo))
            identity = LAMBDA_IDENTITY * LAMBDA_CYCLE
            losses = {
                "monet_gen_loss": (
                    bce(judge("monet_discriminator", fake_monet, now, seeds), 1.0)
                    + cycle
                    + identity * l1(real_monet, same_monet)
                ),
                "photo_gen_loss": (
                    bce(judge("photo_discriminator", fake_photo, now, seeds), 1.0)
                    + cycle
                    + identity * l1(real_photo, same_photo)
                ),
            }
            # The cycle loss once in the sum: each generator's gradient of it is its own loss's, as in the starter.
            return sum(losses.values()) - cycle, (losses, seeds, fake_monet, fake_photo)

        def discriminator_loss(discriminators, seeds, fake_monet, fake_photo):
            seeds, now = dict(seeds), {**weights, **discriminators}
            losses = {}
            for domain, real, fake in (("monet", real_monet, fake_monet), ("photo", real_photo, fake_photo)):
                real_logits, fake_logits = ops.split(
                    judge(f"{domain}_discriminator", ops.concatenate([real, fake]), now, seeds), 2
                )
                losses[f"{domain}_disc_loss"] = (bce(real_logits, 1.0) + bce(fake_logits, 0.0)) / 2
            return sum(losses.values()), (losses, seeds)

        generators, discriminators = (
            {name: weights[name] for name in names} for names in (NETWORKS[:2], NETWORKS[2:])
        )
        (_, (gen_losses, seeds, *fakes)), gen_grads = jax.value_and_grad(generator_loss, has_aux=True)(
            generators, seeds
        )
        fakes = [jax.lax.stop_gradient(fake) for fake in fakes]  # the discriminators' step leaves the generators be
        (_, (disc_losses, seeds)), disc_grads = jax.value_and_grad(discriminator_loss, has_aux=True)(
            discriminators, seeds, *fakes
        )
        grads = {**gen_grads, **disc_grads}
        for name in NETWORKS:  # each network's own Adam
            network, adam = getattr(self, name), self.adams[name]
            new_weights, new_moments = adam.stateless_apply(of(adam.variables), grads[name], weights[name])
            value.update(zip(map(id, network.trainable_variables), new_weights))
            value.update(zip(map(id, adam.variables), new_moments))
        for name in seeds:
            value.update(zip(map(id, getattr(self, name).non_trainable_variables), seeds[name]))
        for name, loss in {**gen_losses, **disc_losses}.items():
            tracker = self.trackers[name]
            value.update(zip(map(id, tracker.variables), tracker.stateless_update_state(of(tracker.variables), loss)))
        logs = {name: tracker.stateless_result(of(tracker.variables)) for name, tracker in self.trackers.items()}
        return logs, (
            of(self.trainable_variables),
            of(self.non_trainable_variables),
            optimizer_state,
            of(self.metrics_variables),
        )


keras.utils.set_random_seed(SEED)  # the same initial weights on every run
with acc.scope():
    model = CycleGan()
    model.compile(steps_per_execution=steps_per_execution)
print(", ".join(f"{name}: {getattr(model, name).count_params():,} parameters" for name in NETWORKS))

# %% [markdown]
# ## Train
# Kaggle sessions end: a checkpoint (every network's weights, every Adam's state) after each epoch, a run started
# again continues after the last one (other settings: it stops and says which), and training stops by itself when
# the next epoch would end past `TIME_BUDGET`. Neither side should win for good: a discriminator loss near 0 means
# the generators stopped learning. Every few epochs: photos, their paintings and the photos made back from them.

# %% tags=["nbval-ignore-output"]
import time

import matplotlib.pyplot as plt

from nbkit.handoff import resume

settings = {
    "image_size": IMAGE_SIZE, "filters": FILTERS, "global_batch": GLOBAL_BATCH, "learning_rate": LEARNING_RATE,
    "lambda_cycle": LAMBDA_CYCLE, "lambda_identity": LAMBDA_IDENTITY, "augment": AUGMENT, "diff_augment": DIFF_AUGMENT,
    "precision": acc.precision, "seed": SEED, "pictures": data.fingerprint(),  # another data set: another model
}
run = resume.TrainingRun(outputs.folder / "checkpoints", settings, restart=RESUME == "restart", hosts=acc.hosts)
if run.weights_file:
    model.load_weights(run.folder / run.weights_file)
print(run.describe(EPOCHS))
shown = np.stack([decode(e).numpy() / 127.5 - 1 for e in data.photo.encoded[:GLOBAL_BATCH]])  # a global batch


def show_progress(epoch, path=None):
    painted = model.monet_generator.predict_on_batch(shown)
    back = model.photo_generator.predict_on_batch(painted)
    figure, axes = plt.subplots(3, 4, figsize=(8, 6))
    for row, (title, pictures) in enumerate((("photo", shown), ("painted", painted), ("back", back))):
        for axis, picture in zip(axes[row], pictures[:4]):
            axis.imshow((np.asarray(picture, np.float32) + 1) / 2)
            axis.set_title(f"{title}, epoch {epoch}", fontsize=8)
            axis.axis("off")
    figure.savefig(path)
    return figure


class Progress(keras.callbacks.Callback):
    start, first = time.time(), run.epochs_done

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % max(1, EPOCHS // 3) == 0:
            show_progress(epoch + 1, outputs.staging / f"progress_epoch_{epoch + 1:03d}.png")
        elapsed = time.time() - self.start
        if elapsed + elapsed / (epoch + 1 - self.first) > TIME_BUDGET * 60:
            print(
                f"TIME_BUDGET: stopping after epoch {epoch + 1} ({elapsed / 60:.1f} minutes): "
                "the next would end past it"
            )
            self.model.stop_training = True


if run.epochs_done < EPOCHS:
    model.fit(
        train_batches,
        epochs=EPOCHS,
        initial_epoch=run.epochs_done,
        steps_per_epoch=steps_per_epoch,
        callbacks=[run.checkpoint(), Progress()],  # the checkpoint first: a stop keeps the epoch
        verbose=2,
    )
print(
    f"epochs done: {run.epochs_done}; Adam steps: "
    + ", ".join(f"{n} {int(a.iterations)}" for n, a in model.adams.items())
)
figure, axes = plt.subplots(1, len(run.history), figsize=(4 * len(run.history), 3.5), squeeze=False)
for axis, (name, losses) in zip(axes.flat, run.history.items()):
    axis.plot(range(1, len(losses) + 1), losses, marker="o")  # markers: one epoch is a point
    axis.set(title=name, xlabel="epoch")
figure.tight_layout()
figure.savefig(outputs.staging / "losses.png", dpi=90)

# %% [markdown]
# ## Paint and score
# The monet generator paints every photo once (`IMAGES` beyond the photos: mirrored ones), at 256x256 straight into
# `images.zip`, then read back and checked. MiFID compares them with the paintings on InceptionV3's pool features
# when its ImageNet weights are attached (or downloadable), else on a stand-in (random projections of 32x32 pixels)
# that compares your own runs only. Neither is the leaderboard's number (Kaggle's is the 2015 Inception graph).

# %% tags=["nbval-ignore-output"]
from nbkit import backbones
from nbkit.imagegen import mifid

try:
    if SMOKE:
        raise DataError("the smoke profile downloads nothing")
    with acc.scope():
        inception = backbones.backbone("InceptionV3", (299, 299, 3), "imagenet")
    features_name = "InceptionV3 pool features (2048)"

    def features(pictures):  # uint8 pictures, a global batch
        resized = ops.image.resize(ops.cast(pictures, "float32"), (299, 299)) / 127.5 - 1
        return np.asarray(inception.predict_on_batch(resized), np.float32)

except DataError as error:
    features_name = (
        f"the stand-in, random projections of 32x32 pixels ({error})" if SMOKE else mifid.without_inception(error)
    )
    projection = np.random.default_rng(SEED).normal(size=(32 * 32 * 3, 256)) / np.sqrt(32 * 32 * 3)

    def features(pictures):
        small = np.asarray(pictures, np.float32).reshape(len(pictures), 32, 8, 32, 8, 3).mean(axis=(2, 4))
        return small.reshape(len(pictures), -1) / 255 @ projection


def in_batches(arrays):
    """Global batches of `arrays` (the last one padded), and how many of each are real."""
    for start in range(0, len(arrays), GLOBAL_BATCH):
        batch = arrays[start : start + GLOBAL_BATCH]
        yield np.concatenate([batch, np.repeat(batch[-1:], GLOBAL_BATCH - len(batch), 0)]), len(batch)


painted_features = []


def paint():
    """(name, 256x256 uint8 picture) for each of the IMAGES pictures, computing their features as it goes."""
    for start in range(0, IMAGES, GLOBAL_BATCH):
        indices = range(start, min(start + GLOBAL_BATCH, IMAGES))
        sources = [decode(data.photo.encoded[i % photo_count]).numpy() / 127.5 - 1 for i in indices]
        photos = np.stack([p[:, ::-1] if i >= photo_count else p for i, p in zip(indices, sources)])
        batch, real = next(in_batches(photos))
        painted = tf.image.resize(np.asarray(model.monet_generator.predict_on_batch(batch), np.float32), [256, 256])
        pictures = np.clip(np.round((painted.numpy() + 1) * 127.5), 0, 255).astype(np.uint8)
        painted_features.append(features(pictures)[:real])
        # Each named after its photo (<name>-mirrored: used again, mirrored).
        for i, picture in zip(indices, pictures[:real]):
            yield zip_names[i], picture


print(paintings.write_zip(outputs.staging / "images.zip", paint(), IMAGES))
monets = np.stack([tf.image.resize(decode(e), [256, 256]).numpy().round().astype(np.uint8) for e in data.monet.encoded])
monet_features = np.concatenate([features(b)[:n] for b, n in in_batches(monets)])
scores = mifid.score(monet_features, np.concatenate(painted_features))
print(
    f"MiFID {scores['mifid']:.2f} (FID {scores['fid']:.2f}, "
    f"memorization distance {scores['memorization_distance']:.3f}) on {features_name}"
)
figure = show_progress(run.epochs_done, outputs.staging / "paintings.png")

# %% [markdown]
# The run ended well: `images.zip` (the submission), the history, plots and scores replace the last run's at once.

# %% tags=["nbval-ignore-output"]

atomic.write_json(
    {**scores, "features": features_name, "epochs": run.epochs_done, "images": IMAGES, "image_size": IMAGE_SIZE,
     "global_batch": GLOBAL_BATCH, "replicas": acc.num_replicas, "precision": acc.precision, "history": run.history},
    outputs.staging / "metrics.json",
)
print(f"outputs in {outputs.folder.resolve()}:", ", ".join(outputs.publish()))
