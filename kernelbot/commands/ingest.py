"""`kernelbot ingest pytest-benchmark FILE.json`: store another tool's benchmark report in the history."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kernelbot.history import History
from kernelbot.reports import ingest


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ingest", help="store benchmark results from other tools in the history")
    kinds = parser.add_subparsers(dest="ingest_kind", metavar="{pytest-benchmark}", required=True)
    cmd = kinds.add_parser("pytest-benchmark", help="a JSON report written by pytest --benchmark-json=FILE")
    cmd.add_argument("file", type=Path, metavar="FILE.json")
    cmd.add_argument(
        "--commit", metavar="SHA", help="the commit measured (default: the report's commit_info)"
    )
    cmd.add_argument("--repository", metavar="OWNER/NAME",
                     help="default: $GITHUB_REPOSITORY, else the report's project name")  # fmt: skip
    cmd.add_argument(
        "--db", metavar="URL|FILE", default=None, help="SQLAlchemy URL (default: the embedded SQLite file)"
    )
    parser.set_defaults(run=run)


def ingest_file(
    path: Path, db: str | None, *, commit: str | None = None, repository: str | None = None
) -> tuple[int, ingest.Parsed]:
    """Parse and store one report; returns (run id, what was parsed, skipped and warned about)."""
    parsed = ingest.parse(ingest.load(path), str(path), commit=commit, repository=repository)
    history = History.open(db)
    try:
        return history.record_run(parsed.run), parsed
    finally:
        history.close()


def run(args: argparse.Namespace) -> int:
    repository = args.repository or os.environ.get("GITHUB_REPOSITORY") or None
    run_id, parsed = ingest_file(args.file, args.db, commit=args.commit, repository=repository)
    sha = (parsed.run.head_sha or "uncommitted")[:10]
    print(
        f"stored {len(parsed.run.operators)} benchmarks of {parsed.run.repository} at {sha} as run {run_id}"
    )
    for warning in parsed.warnings:
        print(f"warning: {warning}")
    for skipped in parsed.skipped:
        print(f"skipped: {skipped}")
    return 0
