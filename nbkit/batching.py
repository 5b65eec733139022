"""How one run steps through its data, worked out once so the input pipeline and `fit` read the same
numbers: the global batch (checked against the splits and the memory), the steps per epoch, and the
steps per compiled execution (lowered where the hardware or the epoch needs it, saying why)."""

from __future__ import annotations

from dataclasses import dataclass

from nbkit.images.checks import check_batch
from nbkit.params import check_int


@dataclass(frozen=True)
class Plan:
    """The run's steps: `steps_per_epoch` batches of `global_batch` items per epoch, run
    `steps_per_execution` at a time (steps_per_epoch is a whole multiple of it)."""

    per_replica_batch: int
    replicas: int
    steps_per_epoch: int
    steps_per_execution: int
    notes: tuple[str, ...] = ()  # each value lowered, and why
    local_replicas: tuple[int, ...] = ()  # the replicas this process feeds (a pod host's); () : all of them

    def __post_init__(self) -> None:
        if not self.local_replicas:
            object.__setattr__(self, "local_replicas", tuple(range(self.replicas)))
        first, last = self.local_replicas[0], self.local_replicas[-1]
        if list(self.local_replicas) != list(range(first, last + 1)) or last >= self.replicas:
            # JAX gives a process a consecutive block of the global batch's rows.
            raise ValueError(f"local_replicas {self.local_replicas} are not consecutive replicas of {self.replicas}")

    @property
    def global_batch(self) -> int:
        return self.per_replica_batch * self.replicas

    @property
    def local_batch(self) -> int:
        """The rows of each global batch this process feeds."""
        return self.per_replica_batch * len(self.local_replicas)

    @property
    def local_rows(self) -> slice:
        """The rows of each global batch this process feeds (all of them on one host)."""
        first = self.local_replicas[0] * self.per_replica_batch
        return slice(first, first + self.local_batch)

    def describe(self) -> str:
        """`global batch 128 (16 x 8 replicas), 6 steps per epoch, 6 per execution` (+ why lowered)."""
        line = (
            f"global batch {self.global_batch} ({self.per_replica_batch} x {self.replicas} replicas), "
            f"{self.steps_per_epoch} steps per epoch, {self.steps_per_execution} per execution"
        )
        if len(self.local_replicas) < self.replicas:
            first, last = self.local_replicas[0], self.local_replicas[-1]
            line += f"; this process feeds replicas {first}-{last}: {self.local_batch} rows of each batch"
        return "; ".join([line, *self.notes])


def plan(
    train_items: int,
    val_items: int,
    per_replica_batch: int,
    replicas: int,
    item_bytes: int,
    steps_per_execution: int = 1,
    max_steps_per_epoch: int = 0,
    execution_limit: tuple[int, str] | None = None,
    available_bytes: int | None = None,
    local_replicas: tuple[int, ...] = (),
) -> Plan:
    """The plan for training on `train_items` items of `item_bytes` bytes, validating on `val_items`
    (both need full batches). An epoch is one pass (at most `max_steps_per_epoch` steps when given).

    Keras 3 runs whole executions: an epoch of 52 steps with steps_per_execution=16 really runs 64
    (4 x 16), reading on into the next epoch's data. So an epoch is cut to whole executions: at most
    steps_per_execution - 1 batches are left out, different ones each epoch (each is shuffled anew).
    `execution_limit`: (the most steps per execution this hardware runs, why), e.g. the accelerator's.
    `local_replicas`: the replicas this process feeds, on a pod slice (default: all).
    """
    check_int("STEPS_PER_EXECUTION", steps_per_execution, minimum=1)
    check_int("STEPS_PER_EPOCH", max_steps_per_epoch, minimum=0)
    counts = {"train": train_items, "val": val_items}
    global_batch = check_batch(per_replica_batch, replicas, item_bytes, counts, available_bytes)
    notes = []
    per_execution = steps_per_execution
    if execution_limit is not None and per_execution > execution_limit[0]:
        per_execution = execution_limit[0]
        notes.append(f"steps_per_execution={steps_per_execution} lowered to {per_execution}: {execution_limit[1]}")
    batches = max(1, train_items // global_batch)
    if max_steps_per_epoch:
        batches = min(batches, max_steps_per_epoch)
    if per_execution > batches:
        notes.append(f"steps_per_execution={per_execution} lowered to {batches}, the steps of one epoch")
        per_execution = batches
    steps = batches // per_execution * per_execution
    if steps < batches:
        notes.append(f"an epoch of {batches} batches cut to {steps}, whole executions of {per_execution}")
    return Plan(per_replica_batch, replicas, steps, per_execution, tuple(notes), tuple(local_replicas))
