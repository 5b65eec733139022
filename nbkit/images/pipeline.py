"""The training input (tf.data): shuffled, augmented uint8 batches, epoch after epoch without end.

Each replica's share of a global batch comes from its own files (`replica_files`). On a pod slice a
host so reads only its own replicas' files, and a run's batches do not depend on how many hosts
share the replicas: 1 process x 8 devices sees what 2 x 4 see. Within a replica's files the records
are shuffled in windows by sort keys drawn from (seed, epoch, position) (`augment.order_keys`): the
order follows the seed alone, so a run resumed at epoch e sees what an uninterrupted run saw there.
Records are shuffled while still serialized (small) and decoded per batch; when the decoded images
fit in a quarter of the free memory they are decoded once and kept, and epochs only shuffle and
augment them. The augmentation (`augment`) is drawn per image from (seed, epoch, position).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nbkit.env import available_memory
from nbkit.errors import DataError, ParameterError
from nbkit.images import augment, layout, warp
from nbkit.images.decode import compression, decode_batch, first_positions

WINDOW = 2048  # records shuffled together (as a shuffle buffer would hold them)


def fits_in_memory(num_bytes: int, share: float = 0.25) -> bool:
    """True when `num_bytes` is at most `share` of the memory available now (Linux; else False)."""
    available = available_memory()
    return available is not None and num_bytes <= share * available


def replica_files(files: Sequence[str], replicas: int) -> list[list[str]]:
    """The files each of `replicas` reads: whole files, balanced by their record counts (each file, the
    largest first, to the replica with the fewest records so far), each replica's in file order."""
    if len(files) < replicas:
        raise DataError(
            f"{len(files)} training files for {replicas} replicas: each replica reads its own files, so there must "
            "be at least as many (a pod host reads only its replicas'). Convert the data into more files "
            "(python -m nbkit tfrecords writes 16 or more), or train on fewer devices."
        )
    shares: list[list[int]] = [[] for _ in range(replicas)]
    loads = [0] * replicas
    for index in sorted(range(len(files)), key=lambda i: -layout.count_in_name(files[i])):
        lightest = loads.index(min(loads))
        shares[lightest].append(index)
        loads[lightest] += layout.count_in_name(files[index])
    return [[files[i] for i in sorted(share)] for share in shares]


def describe_reading(files: Sequence[str], plan: Any) -> str:
    """Which training files this process reads: all of them on one host, its replicas' on a pod slice."""
    shares = replica_files(files, plan.replicas)
    mine = sorted(f for r in plan.local_replicas for f in shares[r])
    names = ", ".join(name.rsplit("/", 1)[-1] for name in mine)
    if len(plan.local_replicas) == plan.replicas:
        return f"this process reads all {len(files)} training files: {names}"
    first, last = plan.local_replicas[0], plan.local_replicas[-1]
    return f"this process reads {len(mine)} of the {len(files)} training files (replicas {first}-{last}'s): {names}"


def train_batches(
    files: Sequence[str], image_size: int, plan: Any, seed: int, first_epoch: int = 0, recipe: str = "flips"
) -> Any:
    """(uint8 images, labels) batches of this process's replicas (`plan.local_replicas`; all of them
    on one host), each replica's share `plan.per_replica_batch` images, `plan.steps_per_epoch` batches
    per epoch, augmented by `recipe` (a key of `augment.SETS`). Epoch e's batches depend only on
    (seed, e): start at `first_epoch` to resume."""
    import tensorflow as tf

    if recipe not in augment.SETS:
        raise ParameterError(f"AUGMENT={recipe!r} is not one of {', '.join(augment.SETS)}.")
    starts = dict(zip(files, first_positions(files)))
    shares = replica_files(files, plan.replicas)
    count = layout.count_items(files)
    cached = fits_in_memory(count * image_size * image_size * 3)
    streams = [
        _replica_stream(shares[r], [starts[f] for f in shares[r]], image_size, plan, seed, first_epoch, cached)
        for r in plan.local_replicas
    ]

    def joined(*shares_of_batch: Any) -> Any:  # one local batch: the replicas' shares, in replica order
        epoch = shares_of_batch[0][0]
        positions, images, labels = (tf.concat([share[i] for share in shares_of_batch], 0) for i in (1, 2, 3))
        return _augmented(images, epoch, positions, seed, recipe), labels

    batches = tf.data.Dataset.zip(tuple(streams)).map(joined, num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def _replica_stream(
    files: list[str], starts: list[int], image_size: int, plan: Any, seed: int, first_epoch: int, cached: bool
) -> Any:
    """One replica's (epoch, positions, images, labels) shares of the global batches, epoch after epoch."""
    import tensorflow as tf

    count = layout.count_items(files)
    kind = compression(files)
    positions = tf.constant(starts, tf.int64)
    records = tf.data.Dataset.from_tensor_slices((files, positions)).interleave(  # the files' records in turn
        lambda name, start: tf.data.TFRecordDataset(name, compression_type=kind).enumerate(start),
        cycle_length=len(files),  # sequential (no parallel calls): one order, always
    )
    if cached:
        records = _decoded_once(records, image_size)
    window = count if cached else min(WINDOW, count)
    share, steps = plan.per_replica_batch, plan.steps_per_epoch
    passes = -(-share * steps // count)  # a replica with fewer records than an epoch needs reads them again

    def one_pass(draw: Any) -> Any:
        # Rotate the start, so the records that share a window change from draw to draw.
        turn = augment.order_keys(seed, draw, tf.constant(0, tf.int64)) % count
        rotated = records.skip(turn).concatenate(records.take(turn))
        return rotated.batch(window).map(lambda p, r: _sorted(p, r, seed, draw)).unbatch()

    def epoch(index: Any) -> Any:
        ordered = tf.data.Dataset.range(passes).flat_map(lambda p: one_pass(index * passes + p))
        batches = ordered.take(share * steps).batch(share, drop_remainder=True)
        if cached:
            return batches.map(lambda positions, item: (index, positions, item[0], item[1]))
        return batches.map(
            lambda positions, serialized: (index, positions, *decode_batch(serialized, image_size, True))
        )

    return tf.data.Dataset.range(first_epoch, 2**62).flat_map(epoch)


def _sorted(positions: Any, records: Any, seed: int, draw: Any) -> Any:
    """A window of records in the order of their sort keys."""
    import tensorflow as tf

    order = tf.argsort(augment.order_keys(seed, draw, positions), stable=True)
    return tf.gather(positions, order), tf.nest.map_structure(lambda r: tf.gather(r, order), records)


def _decoded_once(records: Any, image_size: int) -> Any:
    """(position, (image, label)) of every record, decoded once, now, into memory."""
    import tensorflow as tf

    def decode(positions: Any, serialized: Any) -> Any:
        return positions, decode_batch(serialized, image_size, True)

    decoded = records.batch(256).map(decode, num_parallel_calls=tf.data.AUTOTUNE).unbatch().cache()
    decoded.reduce(tf.constant(0, tf.int64), lambda total, _: total + 1)  # fill the cache in one pass
    return decoded


def _augmented(images: Any, epoch: Any, positions: Any, seed: int, recipe: str) -> Any:
    """A uint8 batch augmented by `recipe`, each image as `augment` draws it for (seed, epoch, position)."""
    import tensorflow as tf

    flips = augment.flips(seed, epoch, positions)
    spec = tf.TensorSpec(images.shape[1:], images.dtype)
    # Per image, under a condition: a copy only for the flipped half (tf.where over the batch copies all).
    images = tf.map_fn(
        lambda item: tf.cond(item[1], lambda: tf.reverse(item[0], [1]), lambda: item[0]),
        (images, flips),
        fn_output_signature=spec,
    )
    if recipe == "flips":
        return images
    drawn = augment.draws(seed, epoch, positions, lambda value: tf.cast(value, tf.float32) / augment.PRIME)
    warped = warp.warp(images, tf.stack(augment.affine(images.shape[1], drawn, tf.cos, tf.sin), axis=1))
    factors = [f[:, None, None, None] for f in augment.colour_factors(drawn)]
    return warp.to_uint8(augment.colour(warped, *factors, tf.reduce_mean, tf.reduce_sum))
