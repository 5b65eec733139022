"""How many Python tokens nbkit holds, and each notebook's kernel bundle, as a Markdown table; with --check, exit 1
when a bundle is over its ceiling (CEILINGS, held by tests/test_architecture.py too).

    python tools/bundle_sizes.py [--check]

Tokens are Python's own (the tokenize module): names, keywords, operators, numbers and strings, a docstring or an
f-string being one string; comments, blank lines and layout (line ends, indentation) are left out, so wrapping a
line costs nothing and packing one saves nothing. "Its own" counts the notebook's code cells; "beyond its own" what
its bundle adds: every nbkit module it carries, counted as code, and the lines that unpack them.
"""

from __future__ import annotations

import io
import sys
import tokenize
from pathlib import Path

import jupytext

from nbkit.publish import bundle

REPO = Path(__file__).resolve().parents[1]
# notebook stem prefix -> the most tokens its bundle may add beyond its own: the counts of 2026-12-06, when sizes
# moved from lines to tokens. They replace the line ceilings (01: 700 code lines; 09, 10, 11: 1,500; 02, 05: 2,479
# and 2,863 non-blank lines beyond their own), which wrapping lines at 120 characters moved with no code added.
# 10 and 11 moved the same day with issue 58 (11,704 -> 11,867, 12,908 -> 13,874): the held-out split on distinct
# questions, the CSV header checks, the references, rewards checked as Tunix calls them, the model folder checked
# against its weights, the run's own checkpoint files, and export (the save, out of gemma). Issue 60's export for
# transformers took them to 14,049 and 15,125; issue 61's one room (one model description, one memory plan and mesh
# module, one data module: each notebook carries the other's side of them) to 15,304 and 16,352; the check of a
# folder read back by transformers (issue 60) to 15,394 and 16,442 (12: +100); data's one sample maker taking 12's
# test set too (answers' copy gone) and one RoPE reader to 15,532 and 16,557 (12: 21,137); Gemma 4's sizes, family
# and plan (issue 59: per-layer embeddings, global layers, KV sharing, experts; in model_sizes and planning, which
# all three carry) to 17,121 and 18,146 (12: 22,726); Gemma 4 in notebook 10 (issue 59: its layout rules and the
# check of any large weight, each family's chat turns and template, Gemma 4's folder completed for transformers and
# Tunix: chat_templates and hf_folder, which export brings to all three) to 18,841 and 19,631 (12: 24,211); Gemma 4
# in notebook 11 (issue 59: gemma4_config, its config.json read as Tunix's sizes and what Tunix computes otherwise
# refused, in 11 and 12 through gemma; gemma4_weights, the save as Gemma4ForCausalLM, in all three through export) to
# 20,015 and 22,261 (12: 26,841); the plan's count of a preset's vision and audio encoders from its weights files'
# headers to 20,184 and 22,430 (12: 27,010); the Gemma 4 sweep's mends (a handle or a Hugging Face folder as
# PRESET, a KerasHub preset or its name as MODEL, a damaged tokenizer.model, one device's mesh) to 20,332 and 22,571
# (12: 27,151).
CEILINGS = {
    "01": 6_012,
    "02": 18_359,
    "05": 21_151,
    "09": 12_370,
    "10": 20_332,
    "11": 22_571,
    "12": 27_151,  # 11's modules (the model folder, Tunix's mesh, export, the time budget), answers, engines, metrics
}
_LEFT_OUT = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
# Python 3.12 splits an f-string into its parts (PEP 701): counted as one string, as Python 3.11 counts it.
_STRING_STARTS = {getattr(tokenize, name) for name in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, name)}
_STRING_ENDS = {getattr(tokenize, name) for name in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, name)}


def tokens(text: str) -> int:
    """The tokens of Python source `text`, less comments and layout; each string (docstrings, f-strings) one."""
    count, depth = 0, 0  # depth: inside how many f-strings
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in _STRING_STARTS:
            count += depth == 0
            depth += 1
        elif token.type in _STRING_ENDS:
            depth -= 1
        elif depth == 0 and token.type not in _LEFT_OUT:
            count += 1
    return count


def nbkit_tokens() -> tuple[int, int]:
    """(modules, tokens) of the whole nbkit package."""
    files = sorted((REPO / "nbkit").rglob("*.py"))
    return len(files), sum(tokens(path.read_text(encoding="utf-8")) for path in files)


def _code_tokens(notebook: object) -> int:
    return sum(tokens(bundle._python(cell.source)) for cell in notebook.cells if cell.cell_type == "code")


def sizes(notebook: Path) -> tuple[int, int, int]:
    """(modules, the notebook's own tokens, the tokens its bundle adds beyond them) of `notebook`'s bundle."""
    bundled, modules = bundle.bundled_notebook(notebook)
    own = _code_tokens(jupytext.read(notebook))
    carried = sum(tokens(bundle.module_file(m).read_text(encoding="utf-8")) for m in modules)
    # The bundle cell holds each module as one string: counted instead as the module's code.
    return len(modules), own, _code_tokens(bundled) - own - len(modules) + carried


def over_ceiling(notebook: Path, beyond: int) -> str:
    """What of `notebook`'s bundle is over its ceiling, or ""."""
    most = CEILINGS.get(notebook.stem[:2])
    return f"{beyond:,} tokens beyond its own > {most:,}" if most is not None and beyond > most else ""


def main() -> int:
    count, total = nbkit_tokens()
    print(f"nbkit: {total:,} tokens in {count} modules\n")
    print("| notebook | modules | tokens | its own | beyond its own | ceiling (beyond its own) |")
    print("|---|---|---|---|---|---|")
    over = []
    for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py")):
        modules, own, beyond = sizes(notebook)
        most = CEILINGS.get(notebook.stem[:2])
        ceiling = f"{most:,}" if most is not None else ""
        print(f"| {notebook.stem} | {modules} | {own + beyond:,} | {own:,} | {beyond:,} | {ceiling} |")
        if problem := over_ceiling(notebook, beyond):
            over.append(f"{notebook.stem}: {problem}")
    for line in over:
        print(f"over its ceiling: {line}", file=sys.stderr)
    return 1 if over and "--check" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
