"""The training augmentation of the flowers notebooks: the starter notebooks' random left-right flip.

Whether an image is flipped depends only on (seed, epoch, the record's position in file order), not
on batches or on the framework: notebook 02's tf.data pipeline and notebook 04's PyTorch dataset flip
the same images in the same epoch for the same seed (a test compares them), and a resumed run flips
what the uninterrupted run flipped.
"""

from __future__ import annotations

from typing import Any

PRIME = 2**31 - 1  # every intermediate below stays under 2**62: exact in int64 on NumPy and TensorFlow
MULTIPLIERS = (1_103_515_245 % PRIME, 69_069, 2_654_435_761 % PRIME)  # position, epoch, seed
OFFSETS = (1_013_904_223, 12_345)


def flips(seed: Any, epoch: Any, positions: Any) -> Any:
    """True where the record at each of `positions` is flipped in `epoch` (about half of them).

    Works on Python ints, NumPy int64 arrays and TensorFlow int64 tensors alike (only +, *, %, <).
    """
    a, b, c = MULTIPLIERS
    mixed = (positions % PRIME * a % PRIME + epoch % PRIME * b % PRIME + seed % PRIME * c % PRIME) % PRIME
    for offset in OFFSETS:  # x*x + c mod p, twice: nearby positions and epochs end up unrelated
        mixed = (mixed * mixed + offset) % PRIME
    return mixed < PRIME // 2
