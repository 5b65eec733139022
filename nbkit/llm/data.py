"""A language model's data (notebooks 10 and 11): the prompt/response pairs of CSV or JSONL files read and checked
before any training (file, line, column), the held-out split, the share SEQUENCE_LENGTH cuts; notebook 11's
questions found (GSM8K attached, or the generated sample) and their references; the generated samples (10's
answer is the prompt's words in reverse order, 11's how many words the question lists)."""

from __future__ import annotations

import csv
import difflib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import atomic
from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError

_SUFFIXES = (".csv", ".jsonl")


@dataclass
class _Pairs:
    """The prompt/response pairs, each with where it came from ("file, line N")."""

    prompts: list[str]
    responses: list[str]
    where: list[str]
    source: str
    sample: bool = False  # the generated sample: its rule (the words reversed) may be checked

    def describe(self) -> str:
        repeats = len(self.prompts) - len(set(zip(self.prompts, self.responses)))
        again = f" ({repeats} of them repeat an earlier pair)" if repeats else ""
        return f"data: {self.source}; {len(self.prompts)} prompt/response pairs{again}"


def load_pairs(
    data_root: str,
    prompt_column: str,
    response_column: str,
    environment: Any = None,
    names: tuple[str, str] = ("PROMPT_COLUMN", "RESPONSE_COLUMN"),
) -> _Pairs:
    """The pairs of a CSV or JSONL file, or of every such file in a folder (sorted by name); "auto": the
    generated sample (in the working folder's llm-sample/). Every row is checked: both columns there and
    neither empty, both text. A CSV is `,` separated with a header; a JSONL file holds one JSON object a line.
    Hidden files (a name starting with ".", such as macOS' `._pairs.csv`) are skipped. `names`: the parameters
    the errors name (notebook 11: QUESTION_COLUMN, ANSWER_COLUMN)."""
    if prompt_column == response_column:
        raise ParameterError(
            f"{names[0]} and {names[1]} are both {prompt_column!r}: every pair would answer a prompt with "
            f"itself. Give the column of the answers as {names[1]}."
        )
    source = ""
    if data_root == "auto":
        environment = environment or nbenv.detect()
        folder = environment.working_dir / "llm-sample"
        data_root = str(folder if (folder / "pairs.jsonl").is_file() else _make_sample(folder))
        source = f"the generated sample in {data_root} stands in (answer: the prompt's words in reverse order)"
    root = Path(data_root)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.suffix.lower() in _SUFFIXES and not p.name.startswith("."))
        if not files:
            raise DataError(
                f"DATA_ROOT={data_root!r} holds no .csv or .jsonl file: give a file of prompt/response pairs."
            )
    elif root.is_file():
        if root.suffix.lower() not in _SUFFIXES:
            raise DataError(
                f"{root} is not a .csv or .jsonl file: give the pairs as CSV (with a header) or JSON lines."
            )
        files = [root]
    else:
        raise DataError(f"DATA_ROOT={data_root!r} is not there: give a .csv or .jsonl file, or a folder of them.")
    pairs = _Pairs([], [], [], source or f"{data_root} ({len(files)} file(s))", sample=bool(source))
    for path in files:
        rows = _jsonl_rows(path) if path.suffix.lower() == ".jsonl" else _csv_rows(path)
        for line, row in rows:
            for name, parameter in zip((prompt_column, response_column), names):
                _check_cell(row, name, parameter, f"{path.name}, line {line}")
            # Stripped as Gemma's chat template trims each turn's text: trained as it will be asked.
            pairs.prompts.append(row[prompt_column].strip())
            pairs.responses.append(row[response_column].strip())
            pairs.where.append(f"{path.name}, line {line}")
    if not pairs.prompts:
        raise DataError(f"{data_root}: no prompt/response pairs in {', '.join(p.name for p in files)}.")
    return pairs


def _check_cell(row: dict[str, Any], name: str, parameter: str, where: str) -> None:
    """The column `name` (the parameter that names it) is in `row`, holds text, and is not empty."""
    if name not in row:
        close = difflib.get_close_matches(name, list(row), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DataError(
            f"{where}: no column {name!r} ({parameter}); it has {', '.join(row)}.{hint} "
            f"Set {parameter} to the right one."
        )
    if not isinstance(row[name], str):  # JSON: a number, list, object, bool or null
        raise DataError(
            f"{where}: {name!r} is {json.dumps(row[name])[:80]}, not text. Write it as a JSON string (in quotes) or "
            f"remove that line."
        )
    if not row[name].strip():
        raise DataError(f"{where}: column {name!r} is empty. Fill in or remove that row.")


def split(pairs: _Pairs, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(training rows in a random order, held-out rows, a line saying so): `held_out` of the distinct prompts (a
    share below 1, else a count), drawn at random, is held out with every pair that asks it, so no held-out prompt
    is trained on (a pair repeated in the data would otherwise score as learned); a repeated held-out pair
    counts once."""
    prompts = list(dict.fromkeys(pairs.prompts))
    count = round(len(prompts) * held_out) if held_out < 1 else int(held_out)
    if count >= len(prompts):
        raise ParameterError(
            f"{count} prompts to hold out, but the data has {len(prompts)} distinct prompts "
            f"({len(pairs.prompts)} rows): nothing would be left to train on. Hold out fewer, or give more data."
        )
    rng = np.random.default_rng(seed)
    held = {prompts[i] for i in rng.permutation(len(prompts))[: max(1, count)]}
    first = {pair: row for row, pair in reversed(list(enumerate(zip(pairs.prompts, pairs.responses))))}
    order = rng.permutation(len(pairs.prompts))
    train = np.array([row for row in order if pairs.prompts[row] not in held], int)
    held_out_rows = np.array(sorted(row for pair, row in first.items() if pair[0] in held), int)
    line = f"{len(train)} training and {len(held_out_rows)} held-out pairs: {len(held)} of the {len(prompts)} distinct "
    return train, held_out_rows, line + "prompts held out, none of them trained on"


def _csv_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(the line each record starts on, its row) of a CSV file with a header, refusing a header that names a
    column twice or a file separated by another character than ","."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # -sig: a spreadsheet's byte-order mark
            reader = csv.DictReader(f, restval="")  # a short line's missing cells: empty
            header = reader.fieldnames or []
            twice = sorted({name for name in header if header.count(name) > 1})
            if twice:
                raise DataError(
                    f"{path.name}: the header names the column {twice[0]!r} more than once: rename the copies so "
                    f"each column has its own name."
                )
            if len(header) == 1 and (separator := next((c for c in ";\t|" if c in header[0]), None)):
                raise DataError(
                    f"{path.name} looks separated by {separator!r}, not by commas (its header is one column, "
                    f"{header[0]!r}): save it as a comma-separated CSV."
                )
            rows, start = [], reader.line_num + 1
            for row in reader:  # a record can span lines (a quoted answer with line breaks): its first is named
                rows.append((start, row))
                start = reader.line_num + 1
            return rows
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path.name} is not a UTF-8 CSV file ({error}): save it as CSV with a header.") from None


def _jsonl_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise DataError(f"{path.name} is not UTF-8 text ({error}): save it as JSON lines.") from None
    for line, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError as error:
            raise DataError(f"{path.name}, line {line} is not JSON ({error}): one JSON object a line.") from None
        if not isinstance(row, dict):
            raise DataError(f"{path.name}, line {line} is a JSON {type(row).__name__}, not an object with columns.")
        rows.append((line, row))
    return rows


def check_lengths(
    prompt_tokens: Sequence[int], pair_tokens: Sequence[int], sequence_length: int, pairs: _Pairs
) -> float:
    """The share of pairs that `sequence_length` cuts (prompt, response and the chat turns' tokens); a
    DataError when it cuts every response away (each prompt fills the whole sequence)."""
    prompt_tokens, pair_tokens = np.asarray(prompt_tokens), np.asarray(pair_tokens)
    if (prompt_tokens >= sequence_length).all():
        raise DataError(
            f"SEQUENCE_LENGTH={sequence_length} leaves no room for any response: the shortest prompt has "
            f"{prompt_tokens.min()} tokens ({pairs.where[int(prompt_tokens.argmin())]}). Raise SEQUENCE_LENGTH "
            f"(the median pair has {int(np.median(pair_tokens))} tokens) or shorten the prompts."
        )
    return float(np.mean(pair_tokens > sequence_length))


# The generated samples' words: notebook 10's pairs and notebook 11's questions are drawn from them alike.
_WORDS = "apple river stone cloud green fast old tree house light dark blue".split()


def _make_sample(folder: str | Path, shape: str = "pairs") -> Path:
    """`folder` (replaced whole) holding a generated sample, each row 2 to 4 of `_WORDS` drawn with seed 0.
    "pairs" (notebook 10): pairs.jsonl, 384 distinct prompts (prompt, response), the response the prompt's words in
    reverse order. "questions" (notebook 11): questions.csv (question, answer), 320 questions shaped as GSM8K: the
    question lists the words, the answer numbers them and ends in "#### <how many>" ("tree 1 blue 2\n#### 2"): the
    worked solution before "####" is what the warm start (SFT) learns from. "test" (notebook 12): test.csv (id,
    question), 48 of 11's questions, ids as text with leading zeros ("007"), and sample_submission.csv (id, answer)."""
    rng = np.random.default_rng(0)
    drawn = iter(lambda: list(rng.choice(_WORDS, int(rng.integers(2, 5)))), None)
    with atomic.staged_dir(folder) as staging:
        if shape == "pairs":
            prompts: dict[str, str] = {}
            while len(prompts) < 384:
                words = next(drawn)
                prompts.setdefault(" ".join(words), " ".join(words[::-1]))
            with open(staging / "pairs.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"prompt": p, "response": r}) + "\n" for p, r in prompts.items())
        elif shape == "test":
            ids = [f"{i:03d}" for i in range(48)]
            questions = [f"how many words: {' '.join(words)}" for words in itertools.islice(drawn, 48)]
            files = {
                "test.csv": [["id", "question"], *zip(ids, questions)],
                "sample_submission.csv": [["id", "answer"], *([key, "0"] for key in ids)],
            }
            for name, rows in files.items():
                with open(staging / name, "w", newline="", encoding="utf-8") as f:
                    csv.writer(f, lineterminator="\n").writerows(rows)
        else:
            with open(staging / "questions.csv", "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["question", "answer"])
                for words in itertools.islice(drawn, 320):
                    numbered = " ".join(f"{w} {i}" for i, w in enumerate(words, 1))
                    writer.writerow([f"how many words: {' '.join(words)}", f"{numbered}\n#### {len(words)}"])
    return Path(folder)


# ---- notebook 11's questions ----

# GSM8K as Kaggle datasets attach it (the official Tunix demos' source): main_train.csv, question/answer.
_GSM8K = ("main_train.csv",)


def find_questions(data_root: str, environment: Any = None) -> tuple[str, str]:
    """(path, what it is) of the question/answer data: `data_root` itself, or for "auto" GSM8K's
    main_train.csv where a dataset holding it is attached, else the generated sample (written once into
    the working folder's rl-sample/)."""
    if data_root != "auto":
        return data_root, data_root
    environment = environment or nbenv.detect()
    attached = sorted(environment.input_dir.glob(f"*/{_GSM8K[0]}"))
    if attached:
        return str(attached[0]), f"GSM8K attached ({attached[0]})"
    folder = environment.working_dir / "rl-sample"
    if not (folder / "questions.csv").is_file():
        _make_sample(folder, "questions")
    return str(folder / "questions.csv"), "the generated sample (answer: how many words the question lists)"


_NUMBER = re.compile(r"[$€£]?\s*(-?[\d,]*\.?\d+)\s*%?")


def references(responses: Sequence[str], where: Sequence[str]) -> tuple[list[str], list[str]]:
    """(worked solutions, reference answers) of GSM8K-style answers: the text before the last "####" and the
    answer after it, a number written plainly ("$4,000" -> "4000"). An answer without "####" is its own
    reference and has no worked solution (""). An empty reference stops the run, naming its line."""
    worked, answers = [], []
    for text, place in zip(responses, where):
        solution, _, answer = text.rpartition("####")
        answer = answer.strip()
        if not answer:
            raise DataError(
                f"{place}: the answer {text[-60:]!r} has nothing after '####': the reference answer is empty, so "
                f"every reward would compare with nothing. Write the answer after '####', or remove that row."
            )
        number = _NUMBER.fullmatch(answer)
        answers.append(number[1].replace(",", "") if number else answer)
        worked.append(solution.strip())
    return worked, answers
