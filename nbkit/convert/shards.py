"""How many files a split gets, and writing records into them as they come, one file at a time
(memory holds one picture per worker, not the split).

The seeds' rule (`writer.shard_count`): files of about 100 MB, at least 16 per split when there are
enough records, so the kit can spread them over 8 to 16 devices or hosts. The total size is not
known before every picture is encoded, so it is estimated from the first pictures encoded (the
same ones every run: the plan is deterministic). A file is named once it is written, with the
records it really holds (`00-512x512-2003.tfrec`): a skipped damaged picture makes it one shorter.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path

from nbkit.images import layout, writer

ESTIMATE_FROM = 32  # pictures encoded before the files are planned; their mean size stands for all


def _balanced(count: int, parts: int) -> list[int]:
    """`count` records in `parts` files whose sizes differ by one at most."""
    return [count // parts + (i < count % parts) for i in range(parts)]


def plan(group_sizes: Sequence[int], bytes_per_record: float) -> list[list[int]]:
    """Records per file for each group of one split (the split itself, or each of its folds: a file
    never mixes folds), the split's files shared among the groups by their sizes."""
    total = sum(group_sizes)
    if not total:
        return [[] for _ in group_sizes]
    files = writer.shard_count(round(bytes_per_record * total), total)
    return [_balanced(size, min(size, math.ceil(files * size / total))) for size in group_sizes]


def write_files(
    records: Iterator[bytes | None], folder: Path, image_size: int, counts: Sequence[Sequence[int]]
) -> list[list[str]]:
    """Write the next records of `records` into files of `counts` (per group, as `plan` gives them);
    a None (a skipped picture) takes its place but writes nothing. The file names, per group."""
    folder.mkdir(parents=True, exist_ok=True)
    names: list[list[str]] = []
    index = 0
    for group in counts:
        names.append([])
        for count in group:
            written = [0]

            def taken(count: int = count, written: list[int] = written) -> Iterator[bytes]:
                for record in islice(records, count):
                    if record is not None:
                        written[0] += 1
                        yield record

            path = writer.write_records(folder / f"{index:02d}-writing.tfrec", taken())
            if not written[0]:
                path.unlink()  # every picture of this file was skipped
                continue
            name = layout.file_name(index, image_size, written[0])
            os.replace(path, folder / name)
            names[-1].append(name)
            index += 1
    return names
