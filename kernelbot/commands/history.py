"""`kernelbot history [OPERATOR]`: an operator's measurements over commits, or a summary of every operator."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from statistics import median
from typing import Any

from kernelbot import console
from kernelbot.history import History, TrendPoint


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("history", help="show measurements stored in the history database")
    parser.add_argument("operator", nargs="?", help="operator name (default: a summary of every operator)")
    parser.add_argument("--repository", metavar="OWNER/NAME", help="only this repository")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout instead of a table")
    parser.add_argument(
        "--db", metavar="URL|FILE", default=None, help="SQLAlchemy URL (default: the embedded SQLite file)"
    )
    parser.set_defaults(run=run)


def points(db: str | None, operator: str | None, repository: str | None) -> list[TrendPoint]:
    history = History.open(db, read_only=True)
    try:
        return history.trend_points(repository=repository, operator=operator)
    finally:
        history.close()


def summary(pts: list[TrendPoint]) -> list[dict[str, Any]]:
    """One row per repository, operator and fingerprint: how many, when, latest and best median."""
    groups: dict[tuple[str, str, str | None], list[TrendPoint]] = {}
    for p in pts:
        groups.setdefault((p.repository, p.operator, p.fingerprint_key), []).append(p)
    rows = []
    for (repo, name, key), group in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1], g[0][2] or "")):
        timed = [p.median_ms for p in group if p.median_ms is not None]
        rows.append({
            "repository": repo, "operator": name, "fingerprint": key, "gpu": group[0].gpu,
            "measurements": len(group), "commits": len({p.commit_sha for p in group}),
            "first": group[0].started_at.isoformat(), "last": group[-1].started_at.isoformat(),
            "latest_ms": group[-1].median_ms, "best_ms": min(timed) if timed else None,
            "median_ms": median(timed) if timed else None,
        })  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    pts = points(args.db, args.operator, args.repository)
    if args.operator and not pts:
        console.err.print(f"no measurements of {args.operator!r} in the history database")
        return 1
    if args.json:
        data: Any = [asdict(p) for p in pts] if args.operator else summary(pts)
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        return 0
    if not pts:
        console.err.print("the history database holds no measurements yet")
        return 0
    if args.operator:
        rows = [
            [p.started_at.strftime("%Y-%m-%d %H:%M"), (p.commit_sha or "uncommitted")[:10],
             f"#{p.pr_number}" if p.pr_number else "—", p.trigger, p.side, p.gpu or "—", p.status,
             console.fmt_ms(p.median_ms),
             f"{console.fmt_ms(p.ci95_low_ms)} – {console.fmt_ms(p.ci95_high_ms)}" if p.ci95_low_ms else "—"]
            for p in pts
        ]  # fmt: skip
        columns = ["started", "commit", "PR", "trigger", "side", "GPU", "status", "median", "95% CI"]
        console.err.print(
            console.table(
                f"{args.operator}: {len(pts)} measurements",
                columns,
                rows,
                optional=("95% CI", "GPU", "trigger", "PR"),
            )
        )
        return 0
    rows = [
        [r["repository"], r["operator"], r["gpu"] or "—", (r["fingerprint"] or "—")[:8], str(r["measurements"]),
         str(r["commits"]), r["last"][:10], console.fmt_ms(r["latest_ms"]), console.fmt_ms(r["best_ms"])]
        for r in summary(pts)
    ]  # fmt: skip
    columns = [
        "repository",
        "operator",
        "GPU",
        "fingerprint",
        "measurements",
        "commits",
        "last",
        "latest",
        "best",
    ]
    console.err.print(
        console.table(
            "operators in the history",
            columns,
            rows,
            optional=("fingerprint", "commits", "repository", "GPU"),
        )
    )
    return 0
