"""Tables for the benchmarks: printed, and written as Markdown + JSON under out/bench/."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "out" / "bench"


def cell(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table whose columns line up in a terminal too."""
    cells = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def save(name: str, title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], notes: str = "") -> Path:
    """Print the table and write out/bench/<name>.md and <name>.json; return the .md path."""
    text = f"## {title}\n\n{table(headers, rows)}\n" + (f"\n{notes}\n" if notes else "")
    print(text, flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(
        json.dumps({"title": title, "headers": list(headers), "rows": [list(r) for r in rows]}, indent=1)
    )
    path = OUT / f"{name}.md"
    path.write_text(text)
    return path
