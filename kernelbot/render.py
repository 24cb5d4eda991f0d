"""Render results through the Jinja2 templates in templates/ (PR comment, summaries, reports)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2

from kernelbot.assets import asset_dir

TEMPLATES = asset_dir("templates")
STICKY_MARKER = "<!-- kernelbot:sticky-comment -->"


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1e3:.1f} µs"
    return f"{value:.3f} ms"


def fmt_ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def fmt_interval(interval: Any) -> str:
    """A speedup's interval, (low, high), as the tables and the terminal print it."""
    low, high = interval
    return f"{low:.2f}–{high:.2f}"


def fmt_pct(ratio: float | None) -> str:
    return "—" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def inline(value: object) -> str:
    """Text that may come from code under review (an error's tail, a shard's notes, a runner's labels) as one
    line of a comment: HTML escaped (no <details>, <img> or a second sticky marker), newlines folded."""
    text = " ".join(str(value).split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(value: object) -> str:
    """A name from the code under review (an operator's path) as an inline code span: `inline`'s escaping,
    a run of backticks longer than any inside it (a backtick closed the span and the table row: attacker
    round 56), and `|` escaped so that a table cell stays one cell."""
    text = inline(value).replace("|", "\\|")
    tick = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def fence(source: str) -> str:
    """A Markdown code fence longer than any run of backticks in `source`, so the code cannot close it."""
    longest = max((len(run) for run in re.findall(r"`{3,}", source)), default=2)
    return "`" * (longest + 1)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a missing field is a bug, not an empty cell
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(["html"]),
    )
    env.filters.update(ms=fmt_ms, ratio=fmt_ratio, pct=fmt_pct, inline=inline, code=code, fence=fence)
    env.globals["STICKY_MARKER"] = STICKY_MARKER
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
