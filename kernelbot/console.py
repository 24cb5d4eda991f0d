"""Terminal output: rich tables and a progress display, on stderr so stdout can carry JSON."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernelbot.render import fmt_interval, fmt_ms, fmt_pct, fmt_ratio

__all__ = [
    "err",
    "escape",
    "fmt_interval",
    "fmt_ms",
    "fmt_pct",
    "fmt_ratio",
    "progress",
    "table",
    "write_json",
]

# Not a terminal (a CI log, a file): Rich would wrap at 80 columns, mid-sentence; a log is read wide.
LOG_WIDTH = 160
err = Console(stderr=True, width=None if sys.stderr.isatty() or os.environ.get("COLUMNS") else LOG_WIDTH)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Any]:
    """Yields a callback that shows the current step with a spinner (long steps: compile, timing)."""
    if not enabled or not err.is_terminal:
        yield lambda message: err.print(f"[dim]… {escape(message)}[/dim]") if enabled else None
        return
    with err.status("starting") as status:
        yield lambda message: status.update(escape(message))


EMPTY = ("", "—")
FREE_TEXT = (
    "operator",
    "candidate",
    "subject",
    "repository",
)  # may wrap (at spaces, else folded); the rest never wraps
FREE_MIN = 14
FREE_WANT = 24  # a free-text column this wide is worth dropping optional columns for


def table(title: str, columns: list[str], rows: list[list[str]], optional: tuple[str, ...] = ()) -> Table:
    """A table that reads at the terminal's width (80 columns too): columns empty in every row are dropped,
    then the `optional` ones in the order given while the rest would not fit; numbers and verdicts never
    wrap, only names and free text do."""
    keep = [i for i, _ in enumerate(columns) if not rows or any(row[i] not in EMPTY for row in rows)]

    def width(i: int) -> int:  # what the column needs to show its cells on one line each
        need = max([len(columns[i]), *(len(row[i]) for row in rows)])
        return (min(need, FREE_WANT) if columns[i] in FREE_TEXT else need) + 2

    for name in optional:
        if sum(width(i) for i in keep) <= err.width:
            break
        keep = [i for i in keep if columns[i] != name]
    out = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for i in keep:
        if columns[i] in FREE_TEXT:
            out.add_column(columns[i], overflow="fold", ratio=1, min_width=FREE_MIN - 2)
        else:
            out.add_column(columns[i], no_wrap=True)
    for row in rows:
        out.add_row(*(Text(row[i]) for i in keep))  # cells are data (PR text among them), never markup
    return out


def write_json(data: dict[str, Any], target: str | None) -> None:
    """--json FILE writes a file; --json - writes to stdout."""
    if target is None:
        return
    text = json.dumps(data, indent=2, default=str)
    if target == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(target).write_text(text + "\n")
