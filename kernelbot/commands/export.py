"""`kernelbot export trajectories`: the agent transcripts in the history database, as JSON Lines for training."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from kernelbot import console
from kernelbot.config import load_config
from kernelbot.errors import UsageError
from kernelbot.reports.export import export_trajectories


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="export data from the history database")
    what = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
    traj = what.add_parser(
        "trajectories", help="one JSON line per optimization task: operator, turns, final candidate, rewards"
    )
    traj.add_argument("--out", type=Path, required=True, help="the .jsonl file to write")
    traj.add_argument(
        "--agent",
        choices=["llm", "search"],
        default="llm",
        help="llm: the model agent's transcripts (default); search: the search agent's rules in order",
    )
    traj.add_argument("--since", help="only runs started on or after this date (YYYY-MM-DD or ISO 8601, UTC)")
    traj.add_argument(
        "--min-reward",
        type=int,
        choices=[-1, 1, 2, 3],
        help="only tasks whose final candidate earned at least this",
    )
    traj.add_argument("--db", metavar="URL|FILE", help="history database URL (default: config, else SQLite)")
    traj.add_argument(
        "--repo", type=Path, default=Path("."), help="repository whose config names the database"
    )
    traj.set_defaults(run=run)


def parse_since(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r} is not a date; use YYYY-MM-DD or ISO 8601") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None
    url = args.db or load_config(args.repo.resolve()).database
    stats = export_trajectories(url, args.out, since=since, min_reward=args.min_reward, agent=args.agent)
    skipped = f", {stats.below_reward} below reward {args.min_reward}" if stats.below_reward else ""
    console.err.print(f"wrote {stats.written} trajectories from {stats.runs} run(s) to {args.out}{skipped}")
    return 0
