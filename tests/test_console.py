"""Terminal tables read at 80 columns: no verdict or number broken across lines, low-value columns dropped."""

from __future__ import annotations

import pytest
from rich.console import Console

from kernelbot import console

COLUMNS = ["operator", "change", "base", "head", "Δ", "p", "verdict", "vs eager", "vs compile", "reward"]
ROWS = [
    [
        "ops/linear_relu_scale",
        "modified",
        "254.3 µs",
        "898.4 µs",
        "+253.2%",
        "0.0002",
        "regression",
        "—",
        "—",
        "—",
    ],
    ["ops/diag_scale", "added", "—", "14.117 ms", "—", "—", "—", "19.95×", "21.57×", "3"],
    [
        "ops/rowmean_linear",
        "modified",
        "337.8 µs",
        "373.1 µs",
        "+10.4%",
        "0.17",
        "improvement",
        "—",
        "—",
        "—",
    ],
]


def _rendered(width: int, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> str:
    term = Console(width=width, record=True, color_system=None)
    monkeypatch.setattr(console, "err", term)
    term.print(
        console.table("review", COLUMNS, ROWS, optional=("p", "vs compile", "change", "vs eager"), **kwargs)
    )
    return term.export_text()


def test_at_80_columns_cells_stay_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _rendered(80, monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= 80
    for word in ("ops/linear_relu_scale", "regression", "improvement", "898.4 µs", "+253.2%"):
        assert word in text, word
    assert " p " not in text.splitlines()[2]  # the lowest-value column made room


def test_wide_terminals_keep_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    header = _rendered(140, monkeypatch).splitlines()[2].split()
    assert header == [
        "operator",
        "change",
        "base",
        "head",
        "Δ",
        "p",
        "verdict",
        "vs",
        "eager",
        "vs",
        "compile",
        "reward",
    ]


def test_columns_empty_in_every_row_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    term = Console(width=140, record=True, color_system=None)
    monkeypatch.setattr(console, "err", term)
    term.print(console.table("t", ["name", "error"], [["a", ""], ["b", "—"]]))
    assert "error" not in term.export_text()


def test_text_from_a_pull_request_is_never_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's error or name with [brackets] prints as written (rich markup would drop it or crash)."""
    term = Console(width=140, record=True, color_system=None)
    monkeypatch.setattr(console, "err", term)
    term.print(console.table("t", ["operator", "verdict"], [["ops/[b]x[/b]", "[/x] error"]]))
    with console.progress() as step:
        step("ops/[/x]: timing base and head")
    text = term.export_text()
    assert "ops/[b]x[/b]" in text and "[/x] error" in text and "ops/[/x]: timing" in text


def test_a_log_that_is_not_a_terminal_is_written_wide() -> None:
    """A newcomer's find: in a CI log (stderr not a terminal) Rich wrapped the review's lines at 80 columns,
    mid-sentence; such output is LOG_WIDTH wide unless COLUMNS says otherwise."""
    import os
    import subprocess
    import sys

    script = "from kernelbot import console; print(console.err.width)"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert piped.stdout.split() == [str(console.LOG_WIDTH)]
    told = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "100"},
        check=True,
    )
    assert told.stdout.split() == ["100"]
