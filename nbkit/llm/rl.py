"""RL post-training (notebook 11: GRPO through Tunix), the glue around Tunix and the notebook's own task: the
reward functions checked as Tunix calls them and named, a run's settings kept beside its checkpoints, the tokenizer
and the prompts' lengths checked, and the time budget. The questions are `data`'s, the model's folder `gemma`'s,
the mesh and the memory plan `planning`'s. No Tunix or JAX import: the notebook builds, trains and saves."""

from __future__ import annotations

import functools
import json
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit.errors import DataError, ParameterError, RunError

# ---- rewards ----


def named_rewards(functions: Sequence[Callable[..., Any]]) -> list[Callable[..., list[float]]]:
    """Each reward function wrapped so that one that raises, or returns other than one number a completion,
    stops the run naming itself and the first prompt of the batch (Tunix's own error names neither)."""
    return [_named(f) for f in functions]


def _named(function: Callable[..., Any]) -> Callable[..., list[float]]:
    @functools.wraps(function)
    def checked(prompts: list[str], completions: list[str], **columns: Any) -> list[float]:
        try:
            rewards = [float(r) for r in function(prompts, completions, **columns)]
        except Exception as error:
            raise RunError(
                f"reward function {function.__name__} failed ({type(error).__name__}: {error}) on the prompt "
                f"{prompts[0]!r} and completion {completions[0]!r}: fix it in the notebook's rewards cell."
            ) from error
        if len(rewards) != len(completions):
            raise RunError(
                f"reward function {function.__name__} returned {len(rewards)} rewards for {len(completions)} "
                f"completions, on the prompt {prompts[0]!r}: return one float a completion."
            )
        bad = [i for i, r in enumerate(rewards) if not math.isfinite(r)]
        if bad:
            raise RunError(
                f"reward function {function.__name__} returned {rewards[bad[0]]} for the completion "
                f"{completions[bad[0]]!r} of the prompt {prompts[bad[0]]!r}: each reward must be a finite number."
            )
        return rewards

    return checked


def check_rewards(
    functions: Sequence[Callable[..., Any]], prompts: list[str], completions: list[str], **columns: Any
) -> dict[str, list[float]]:
    """Each reward function called before anything loads on hand-made ideal `completions`, the way Tunix calls it
    (keyword arguments; the data's columns as NumPy arrays, `mode` and `trajectory_ids` beside them), and on empty
    completions; its rewards on the ideal ones by name. A warning names any function that pays an ideal
    completion no more than an empty one (a reference it cannot read, such as "$4,000" against "4000")."""
    extra = {"mode": "Mode.TRAIN", "trajectory_ids": [f"check-{i}" for i in range(len(prompts))]}
    given = {name: np.asarray(values) for name, values in columns.items()}
    found = {}
    for function in named_rewards(functions):
        found[function.__name__] = ideal = function(prompts=prompts, completions=completions, **given, **extra)
        empty = function(prompts=prompts, completions=[""] * len(prompts), **given, **extra)
        unpaid = [i for i, (a, b) in enumerate(zip(ideal, empty)) if a <= b]
        if unpaid:
            print(
                f"WARNING: {function.__name__} pays the ideal completion {completions[unpaid[0]]!r} {ideal[unpaid[0]]} "
                f"and an empty one {empty[unpaid[0]]}: it cannot tell a right answer. Check it against the data's "
                f"answers (here {columns and {k: str(v[unpaid[0]]) for k, v in columns.items()}})."
            )
    return found


# ---- a run's checkpoints ----


# What a run writes in its checkpoints folder: Tunix's GRPO checkpoints (actor/<step>/), the warm start's
# (sft/<step>/), the settings they were trained with and the history of the steps. Nothing else there is touched.
_RUN_FILES = ("actor", "sft", "settings.json", "history.json")


def checkpoint_run(folder: str | Path, settings: dict[str, Any], restart: bool) -> tuple[int, list[dict[str, Any]]]:
    """(the step the GRPO checkpoints in `folder` reached, 0 when none; the kept history of the steps up to it).
    `restart`: the run's own files there are deleted first (`_RUN_FILES`; a file of the user's stays). Checkpoints
    must have been trained with the same `settings` (settings.json beside them), else a ParameterError names what
    changed; checkpoints without settings.json are refused, since nothing says what trained them."""
    folder = Path(folder)
    if restart:
        for path in (folder / name for name in _RUN_FILES):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    steps = [int(p.name) for p in (folder / "actor").glob("*") if p.name.isdigit()]
    started = steps or any(p.name.isdigit() for p in (folder / "sft").glob("*"))
    path = folder / "settings.json"
    if started and not path.is_file():
        raise ParameterError(
            f"the checkpoints in {folder} have no settings.json: nothing says what trained them. Run with "
            f"RESUME='restart' (the run's checkpoints are deleted, nothing else) or another OUTPUT_DIR."
        )
    if started:
        kept = json.loads(path.read_text())
        changed = sorted(k for k in {*kept, *settings} if kept.get(k) != settings.get(k))
        if changed:
            raise ParameterError(
                f"the checkpoint in {folder} ({f'step {max(steps)}' if steps else 'its warm start'}) was trained "
                f"with other settings: "
                + ", ".join(f"{k} {kept.get(k)!r} -> {settings.get(k)!r}" for k in changed)
                + ". Run with RESUME='restart' (the run's checkpoints are deleted, nothing else), another "
                "OUTPUT_DIR, or the same settings."
            )
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_json(settings, path)
    step = max(steps, default=0)
    history = json.loads((folder / "history.json").read_text()) if steps and (folder / "history.json").is_file() else []
    return step, [h for h in history if h["step"] <= step]


# ---- the tokenizer and the prompts ----


def check_tokenizer(tokenizer: Any, vocabulary: int, texts: Sequence[str], where: Sequence[str]) -> None:
    """A SentencePiece processor whose pieces are the model's vocabulary, and that maps every character of
    `texts` (prompts, tags, answers; `where[i]` says where text i came from, when there) to a known piece."""
    if tokenizer.get_piece_size() != vocabulary:
        raise DataError(
            f"the tokenizer has {tokenizer.get_piece_size()} pieces, the model a vocabulary of {vocabulary}: they "
            f"must be the same (the tokenizer.model that came with the weights)."
        )
    unknown = tokenizer.unk_id()
    known = set("".join(tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())).replace("\u2581", " "))
    for i, text in enumerate(texts):
        if unknown in tokenizer.encode(text):
            chars = sorted({c for c in text if c not in known}) or ["a character outside the pieces it knows"]
            said = f" ({where[i]})" if i < len(where) else ""
            raise DataError(
                f"the tokenizer knows no piece for {''.join(chars)!r} in {text[:60]!r}{said}: the model cannot read "
                f"or write it. Remove those characters, or use a tokenizer that has them (a tiny model's, such as "
                f"notebook 10's export of one, knows only what its training data held: give 10 pairs whose prompts "
                f"hold this notebook's system prompt, as docs/guide.md's SFT -> GRPO route does)."
            )


def check_prompt_lengths(
    lengths: Sequence[int], limit: int, where: Sequence[str], smoke_cap: int | None = None
) -> None:
    """Stop when prompts are longer than MAX_PROMPT_LENGTH tokens (Tunix would cut their beginnings, the
    question among them), saying how many and the longest; `smoke_cap`: the most the smoke profile lets
    MAX_PROMPT_LENGTH be, so that the way out for longer prompts is PROFILE="full"."""
    lengths = np.asarray(lengths)
    over = int((lengths > limit).sum())
    if over:
        longest = int(lengths.argmax())
        fix = (
            f"the smoke profile (a CPU's default) caps MAX_PROMPT_LENGTH at {smoke_cap}: run with PROFILE='full' for "
            f"these prompts, or give shorter ones"
            if smoke_cap is not None and lengths[longest] > smoke_cap
            else "raise MAX_PROMPT_LENGTH or shorten them"
        )
        raise DataError(
            f"{over} of {len(lengths)} prompts are longer than MAX_PROMPT_LENGTH={limit} tokens (the longest: "
            f"{lengths[longest]} tokens, {where[longest]}): {fix}."
        )


class time_budget:  # noqa: N801 (used like a function)
    """The batches of `iterator`, until the next training step would end past `seconds` (the mean time of the
    steps so far as the measure); `stopped` then says when. Tunix skips the first `done` steps' batches of a
    resumed run itself: those are passed on at once and not timed."""

    def __init__(self, iterator: Any, seconds: float, done: int = 0) -> None:
        import time

        self.iterator, self.seconds, self.done, self.clock = iterator, seconds, done, time.perf_counter
        self.start, self.given, self.stopped = self.clock(), 0, ""

    def __iter__(self) -> time_budget:
        return self

    def __next__(self) -> Any:
        elapsed, timed = self.clock() - self.start, self.given - self.done
        if timed > 1 and elapsed + elapsed / (timed - 1) > self.seconds:  # the first timed one carries the compiles
            self.stopped = f"{elapsed / 60:.1f} of {self.seconds / 60:g} minutes after {timed} steps"
            raise StopIteration
        if timed < 1:
            self.start = self.clock()
        self.given += 1
        return next(self.iterator)
