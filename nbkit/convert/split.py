"""Which pictures train and which validate: a stratified validation split, or K stratified folds;
and the order records are written in, shuffled so that every file mixes the classes. All seeded:
the same labels and seed give the same split, folds and order (Python's own random, seeded with a
string: the same on every machine and run)."""

from __future__ import annotations

import random
from collections.abc import Sequence


def _random(seed: int, purpose: str) -> random.Random:
    return random.Random(f"nbkit-convert-{purpose}-{seed}")


def by_class(labels: Sequence[int]) -> dict[int, list[int]]:
    """{label: the positions of its pictures}, labels in increasing order."""
    groups: dict[int, list[int]] = {}
    for position, label in enumerate(labels):
        groups.setdefault(label, []).append(position)
    return dict(sorted(groups.items()))


def validation_split(labels: Sequence[int], fraction: float, seed: int) -> list[bool]:
    """For each picture, whether it validates: `fraction` of each class (rounded), at least one of
    every class that has two pictures or more, and never a class's last training picture (a class
    with one picture stays in train)."""
    rng = _random(seed, "val")
    validates = [False] * len(labels)
    for positions in by_class(labels).values():
        if len(positions) < 2:
            continue
        count = min(max(round(len(positions) * fraction), 1), len(positions) - 1)
        for position in rng.sample(positions, count):
            validates[position] = True
    return validates


def folds(labels: Sequence[int], count: int, seed: int) -> list[int]:
    """Each picture's fold, 0 to count-1: each class's pictures, in a seeded order, dealt round the
    folds, each class starting where the previous one stopped, so folds differ by one picture at
    most and each holds its share of every class."""
    rng = _random(seed, "folds")
    fold_of = [0] * len(labels)
    dealt = 0
    for positions in by_class(labels).values():
        for position in rng.sample(positions, len(positions)):
            fold_of[position] = dealt % count
            dealt += 1
    return fold_of


def shuffled(positions: Sequence[int], seed: int, purpose: str) -> list[int]:
    """`positions` in a seeded order (one order per `purpose`: a split or a fold)."""
    return _random(seed, f"order-{purpose}").sample(list(positions), len(positions))
