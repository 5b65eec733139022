"""Pictures encoded on every core, results in order, with a progress line now and then.

Worker processes are spawned, not forked: a notebook may already hold threads (TensorFlow, JAX)
that a fork would copy in whatever state they were in. Only a few tasks per worker are queued at a
time, so memory holds a bounded number of encoded pictures however many there are.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from nbkit.convert import pictures

_CHUNK = 8  # pictures per task: fewer round trips to the workers, progress still fine-grained
_AHEAD = 4  # tasks queued per worker: enough to keep each busy
_EVERY_S = 10.0  # a progress line at least this often, besides every tenth of the way


def cores() -> int:
    """The cores this process may use (its CPU affinity where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def encoded(paths: Sequence[Path], size: int, fit: str, quality: int, workers: int) -> Iterator[bytes | str]:
    """`pictures.square_jpeg` of each path, in order: JPEG bytes, or why the picture could not be read.
    `workers=1` encodes in this process."""
    chunks = [[str(p) for p in paths[start : start + _CHUNK]] for start in range(0, len(paths), _CHUNK)]
    if workers == 1:
        for chunk in chunks:
            yield from pictures.encode_batch(chunk, size, fit, quality)
        return
    pool = ProcessPoolExecutor(min(workers, len(chunks) or 1), mp_context=multiprocessing.get_context("spawn"))
    try:
        waiting: deque[Future[list[bytes | str]]] = deque()
        upcoming = iter(chunks)
        for chunk in upcoming:
            waiting.append(pool.submit(pictures.encode_batch, chunk, size, fit, quality))
            if len(waiting) >= workers * _AHEAD:
                break
        while waiting:
            results = waiting.popleft().result()
            chunk = next(upcoming, None)
            if chunk is not None:
                waiting.append(pool.submit(pictures.encode_batch, chunk, size, fit, quality))
            yield from results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # a failure stops the queued tasks, not just this loop


class Progress:
    """Counts pictures and prints `done/total pictures (p%), N images/s` every tenth of the way and
    at least every EVERY_S seconds: plain lines, for notebooks as much as terminals."""

    def __init__(self, total: int, say: Callable[[str], None] = print) -> None:
        self.total, self.say = total, say
        self.done = 0
        self.start = self.last_time = time.perf_counter()
        self.last_tenth = 0

    @property
    def seconds(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.start

    @property
    def rate(self) -> float:
        """Pictures per second so far."""
        return self.done / max(self.seconds, 1e-9)

    def advance(self, doing: str) -> None:
        """One more picture done; `doing` says what (e.g. "train")."""
        self.done += 1
        tenth = self.done * 10 // max(self.total, 1)
        now = time.perf_counter()
        if tenth > self.last_tenth or now - self.last_time >= _EVERY_S:
            self.last_tenth, self.last_time = tenth, now
            percent = 100 * self.done // max(self.total, 1)
            self.say(f"  {self.done:,}/{self.total:,} pictures ({percent}%), {self.rate:,.0f} images/s, {doing}")
