"""How many lines of nbkit each notebook's kernel bundle carries, as a Markdown table.

    python tools/bundle_sizes.py

Lines are the modules' whole files (docstrings and comments included); "code lines" leave out blank
lines, comments and docstrings.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from nbkit.publish import bundle

REPO = Path(__file__).resolve().parents[1]


def code_lines(text: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skipped:
            lines.update(line for line in range(token.start[0], token.end[0] + 1) if line not in docstrings)
    return len(lines)


def main() -> None:
    print("| notebook | modules | lines | code lines |")
    print("|---|---|---|---|")
    for notebook in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py")):
        _, modules = bundle.bundled_notebook(notebook)
        texts = [bundle.module_file(m).read_text(encoding="utf-8") for m in modules]
        lines = sum(len(t.splitlines()) for t in texts)
        print(f"| {notebook.stem} | {len(modules)} | {lines:,} | {sum(map(code_lines, texts)):,} |")


if __name__ == "__main__":
    main()
