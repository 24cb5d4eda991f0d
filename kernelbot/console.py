"""Terminal output: rich tables and a progress display, on stderr so stdout can carry JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelbot.render import fmt_ms, fmt_pct, fmt_ratio

__all__ = ["err", "fmt_ms", "fmt_pct", "fmt_ratio", "progress", "table", "write_json"]

err = Console(stderr=True)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Any]:
    """Yields a callback that shows the current step with a spinner (long steps: compile, timing)."""
    if not enabled or not err.is_terminal:
        yield lambda message: err.print(f"[dim]… {message}[/dim]") if enabled else None
        return
    with err.status("starting") as status:
        yield lambda message: status.update(message)


def table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    out = Table(title=title, title_justify="left")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*row)
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
