"""A test set answered by a language model (notebook 12), the plumbing around the notebook's own prompts and
generation: the test file found ("auto": a competition's test.csv or test.jsonl attached, else a generated sample in
notebook 11's shape), its ids and prompts read and checked, the sample submission read and checked against them,
the prompts batched by length and checked against the model's context, and submission.csv written in the sample's
order, then read back and checked. The model's side is `models`. No torch, JAX or vLLM import: the notebook
tokenizes and generates."""

from __future__ import annotations

import collections
import csv
import difflib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic, metrics
from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError, RunError
from nbkit.llm.data import _csv_rows, _jsonl_rows, _make_sample  # the readers (line numbers, headers checked)

_SUFFIXES = (".csv", ".jsonl")
_SAMPLE = "sample_submission.csv"
_PROMPT_COLUMNS = ("prompt", "question")  # PROMPT_COLUMN="auto": the first of these the file has


@dataclass
class _TestSet:
    """The test file's ids and prompts in its order (each row's place, "file, line N"), and the submission's form:
    the sample submission's header and rows (its order) where there is one, else the ids and the answer column."""

    ids: list[str]
    prompts: list[str]
    where: list[str]
    source: str
    header: list[str] = field(default_factory=list)  # submission.csv's columns
    rows: list[list[str]] = field(default_factory=list)  # the sample's rows (its order), or [id, ""] in the test's
    id_column: str = "id"
    answer_column: str = "answer"
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        form = f"submission.csv: {','.join(self.header)}, answers in {self.answer_column!r}"
        return "\n".join([f"data: {self.source}; {len(self.ids)} prompts", form, *self.notes])

    def write_submission(self, answers: Sequence[str], path: str | Path) -> Path:
        """submission.csv of `answers` (in the test file's order): one row per id in the sample's order (its other
        columns as it has them), written whole or not at all, then read back and checked: header, ids, order."""
        if len(answers) != len(self.ids) or any(a is None for a in answers):
            raise RunError(f"{len(answers)} answers for {len(self.ids)} test ids: nothing written.")
        by_id, at, key = dict(zip(self.ids, answers)), self.header.index(self.answer_column), self._id_index
        body = [[by_id[row[key]] if i == at else cell for i, cell in enumerate(row)] for row in self.rows]
        # csv quotes a cell holding "\n" but not one holding "\r" (not in the line end), where readers split the row:
        # such a row is written quoted whole.
        out = io.StringIO()
        plain = csv.writer(out, lineterminator="\n")
        quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
        for row in [self.header, *body]:
            (quoted if any("\r" in cell for cell in row) else plain).writerow(row)
        atomic.write_text(path, out.getvalue())
        header, written = metrics.read_csv(path)
        if header != self.header or written != body:
            raise RunError(f"{path} read back differs from what was written (ids, order or answers): a library fault.")
        return Path(path)

    @property
    def _id_index(self) -> int:
        return self.header.index(self.id_column)


def load_test(
    data_root: str, id_column: str, prompt_column: str, answer_column: str, environment: Any = None
) -> _TestSet:
    """The test set of DATA_ROOT (a CSV or JSONL file, a folder holding one, or "auto": see `_find_test`), every row
    checked: an id (text or a whole number; each once) and a prompt that is text and not empty; with the sample
    submission beside it (sample_submission.csv) checked against it: the same ids, each once."""
    if id_column in (prompt_column, answer_column):
        raise ParameterError(
            f"ID_COLUMN={id_column!r} is also PROMPT_COLUMN or ANSWER_COLUMN: the ids, the prompts and the answers "
            f"are three columns. Give each its own."
        )
    path, source = _find_test(data_root, environment)
    rows = _jsonl_rows(path) if path.suffix.lower() == ".jsonl" else _csv_rows(path)
    if not rows:
        raise DataError(f"{path}: no rows. Give the test file with one prompt a row.")
    if prompt_column == "auto":
        prompt_column = next((c for c in _PROMPT_COLUMNS if c in rows[0][1]), _PROMPT_COLUMNS[0])
    test = _TestSet([], [], [], source, id_column=id_column)
    first: dict[str, str] = {}
    for line, row in rows:
        where = f"{path.name}, line {line}"
        for name, parameter in ((id_column, "ID_COLUMN"), (prompt_column, "PROMPT_COLUMN")):
            if name not in row:
                close = [c for c in row if c.lower() == name.lower()] or difflib.get_close_matches(name, list(row), 1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise DataError(
                    f"{where}: no column {name!r} ({parameter}); it has {', '.join(row)}.{hint} Set {parameter}."
                )
        key, prompt = _id_of(row[id_column], where, id_column), row[prompt_column]
        if key in first:
            raise DataError(f"{where} repeats the id {key!r} of {first[key]}: each row needs an id of its own.")
        if not isinstance(prompt, str) or not prompt.strip():
            raise DataError(
                f"{where}: the prompt ({prompt_column!r}) is {json.dumps(prompt)[:60]}, not text to answer. Fill it "
                f"in: the submission needs an answer for every id."
            )
        first[key] = where
        test.ids.append(key)
        test.prompts.append(prompt)
        test.where.append(where)
    sample = path.with_name(_SAMPLE)
    if sample.is_file():
        _read_sample(test, sample, id_column, answer_column)
    else:
        test.answer_column = "answer" if answer_column == "auto" else answer_column
        test.header, test.rows = [id_column, test.answer_column], [[key, ""] for key in test.ids]
        test.notes.append(f"no {_SAMPLE} beside {path.name}: submission.csv lists the test file's ids in its order")
    return test


def _id_of(value: Any, where: str, column: str) -> str:
    """An id as the submission writes it: text as it is ("007" stays "007"), a JSON whole number as digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{where}: the id ({column!r}) is {json.dumps(value)[:40]}: give every row an id (text).")
    return value


def _find_test(data_root: str, environment: Any = None) -> tuple[Path, str]:
    """(the test file, what it is): DATA_ROOT's file; in a folder, test.csv or test.jsonl (else its one CSV or JSONL
    file that is not the sample submission); "auto": the one test.csv / test.jsonl attached under the input folder
    (a competition), else the generated sample (the working folder's answers-sample/)."""
    environment = environment or nbenv.detect()
    if data_root == "auto":
        patterns = [f"{at}test{suffix}" for at in ("*/", "competitions/*/") for suffix in _SUFFIXES]
        attached = sorted({p for pattern in patterns for p in environment.input_dir.glob(pattern)})
        if len(attached) > 1:
            raise ParameterError(
                f"DATA_ROOT='auto': several test files are attached ({', '.join(map(str, attached))}): give the "
                f"competition's as DATA_ROOT."
            )
        if attached:
            return attached[0], f"{attached[0]} (attached)"
        folder = environment.working_dir / "answers-sample"
        if not (folder / "test.csv").is_file():
            _make_sample(folder, "test")
        return folder / "test.csv", f"the generated sample in {folder} (questions in notebook 11's sample's shape)"
    root = Path(data_root)
    if root.is_dir():
        named = [root / f"test{suffix}" for suffix in _SUFFIXES if (root / f"test{suffix}").is_file()]
        files = named or sorted(
            p
            for p in root.iterdir()
            if p.suffix.lower() in _SUFFIXES and p.name != _SAMPLE and not p.name.lower().startswith((".", "train"))
        )
        if len(files) != 1:
            held = ", ".join(p.name for p in files) or "no test .csv or .jsonl file (never a train* one)"
            raise DataError(f"DATA_ROOT={data_root!r} holds {held}: give the test file itself as DATA_ROOT.")
        root = files[0]
    elif not root.is_file():
        raise DataError(f"DATA_ROOT={data_root!r} is not there: give a test .csv or .jsonl file, or its folder.")
    if root.suffix.lower() not in _SUFFIXES or root.name == _SAMPLE:
        convert = f" (pandas.read_parquet({root.name!r}).to_csv('test.csv', index=False))" * (root.suffix == ".parquet")
        raise DataError(f"{root} is not a test file: give the prompts as CSV (with a header) or JSON lines{convert}.")
    return root, str(root)


def _read_sample(test: _TestSet, path: Path, id_column: str, answer_column: str) -> None:
    """The sample submission's header and rows into `test`, checked: ID_COLUMN and the answer column there (its one
    other column for ANSWER_COLUMN="auto"), each id once, and exactly the test file's ids."""
    try:
        header, rows = metrics.read_csv(path)
    except (UnicodeDecodeError, csv.Error, ValueError) as error:
        raise DataError(f"{path} is not a UTF-8 CSV file with a header ({error}): use the competition's.") from None
    others = [name for name in header if name != id_column]
    if id_column not in header:
        raise DataError(f"{path.name} has no column {id_column!r} (ID_COLUMN): its columns are {','.join(header)}.")
    if answer_column == "auto" and len(others) != 1:
        raise ParameterError(
            f"{path.name}'s columns are {','.join(header)}: name the one the answers go in as ANSWER_COLUMN."
        )
    test.answer_column = others[0] if answer_column == "auto" else answer_column
    if test.answer_column not in others:
        raise ParameterError(
            f"ANSWER_COLUMN={answer_column!r} is not a column of {path.name} ({','.join(header)}): give one of "
            f"{', '.join(others)}, or 'auto'."
        )
    where = header.index(id_column)
    ids = [row[where] if len(row) > where else "" for row in rows]
    twice = sorted(key for key, count in collections.Counter(ids).items() if count > 1)
    if twice:
        raise DataError(f"{path.name} lists the id {twice[0]!r} more than once: use the competition's sample.")
    in_sample, in_test = set(ids), set(test.ids)
    missing, extra = [k for k in ids if k not in in_test], [k for k in test.ids if k not in in_sample]
    if missing or extra:
        plain = {k.lstrip("0") for k in missing} & {k.lstrip("0") for k in extra}
        hint = " (some differ only in leading zeros: ids are compared as text)" if plain else ""
        raise DataError(
            f"{path.name} and the test file disagree: {len(missing)} of its ids are not in the test file "
            f"(e.g. {missing[:3]}) and {len(extra)} test ids are not in it (e.g. {extra[:3]}){hint}. Give the sample "
            f"submission of the same test file (on Kaggle: the competition's, both attached)."
        )
    width = len(header)
    test.header, test.rows = header, [(row + [""] * width)[:width] for row in rows]
    if ids != test.ids:
        test.notes.append(f"{path.name} lists the ids in another order than the test file: submission.csv keeps its")


# ---- the prompts: batched by length, checked against the model ----


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """The prompts' indices in batches of `batch_size`, longest prompts first (a batch too large for the memory
    stops at once), so that each batch pads its prompts to nearly the same length."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def padding_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """The share of padding in the batches' prompts, each padded to its batch's longest."""
    padded = sum(len(rows) * max(lengths[i] for i in rows) for rows in batches)
    return 1 - sum(lengths) / padded if padded else 0.0


def check_prompts(
    tokens: Sequence[Sequence[int]], where: Sequence[str], vocabulary: int, context: int | None, max_new_tokens: int
) -> None:
    """Stop on a prompt with a token past the model's vocabulary (a tokenizer of other weights), or one that leaves
    no room for MAX_NEW_TOKENS in the model's context (config.json's max_position_embeddings)."""
    for row, ids in enumerate(tokens):
        if ids and max(ids) >= vocabulary:
            raise DataError(
                f"{where[row]}: the tokenizer gives the token {max(ids)}, past the model's vocabulary of {vocabulary}: "
                f"the tokenizer is not these weights', or adds tokens of its own (transformers' Gemma tokenizer does "
                f"where a folder has no tokenizer_config.json). Give the tokenizer files that came with the model."
            )
    lengths = np.array([len(ids) for ids in tokens])
    over = lengths + max_new_tokens > context if context else np.zeros(len(lengths), bool)
    if over.any():
        longest = int(lengths.argmax())
        room = context - lengths[longest]
        fix = f"lower MAX_NEW_TOKENS to {room} or less, or shorten those prompts" if room > 0 else "shorten them"
        raise DataError(
            f"{int(over.sum())} of {len(lengths)} prompts leave no room for MAX_NEW_TOKENS={max_new_tokens} in the "
            f"model's context of {context} tokens (the longest: {lengths[longest]} tokens, {where[longest]}): {fix}."
        )
