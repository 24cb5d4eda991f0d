"""`kernelbot report weekly`: the week's trend report from the history database, as Markdown and HTML files."""

from __future__ import annotations

import argparse
import importlib
import os
from datetime import UTC, datetime
from pathlib import Path

from kernelbot.errors import UsageError
from kernelbot.history import History
from kernelbot.reports import weekly

NO_ADAPTER = "posting needs the GitHub adapter (kernelbot action on schedule)"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="write the weekly performance trend report")
    kinds = parser.add_subparsers(dest="report_kind", metavar="{weekly}", required=True)
    cmd = kinds.add_parser("weekly", help="the week's trends, steps, speedups and failures")
    cmd.add_argument(
        "--since",
        metavar="DATE",
        help="first day of the week (YYYY-MM-DD, UTC); default: the seven days that end now",
    )
    cmd.add_argument(
        "--weeks", type=int, default=8, metavar="N", help="weeks of history to chart (default 8)"
    )
    cmd.add_argument("--out", type=Path, default=Path("kernelbot-out/weekly"), metavar="DIR",
                     help="where report.md and report.html go (default ./kernelbot-out/weekly, inside the action's artifact)")  # fmt: skip
    cmd.add_argument(
        "--db", metavar="URL|FILE", default=None, help="SQLAlchemy URL (default: the embedded SQLite file)"
    )
    cmd.add_argument("--post", action="store_true", help="create or update the week's report issue on GitHub")
    cmd.add_argument("--artifact-url", metavar="URL", help="link to the HTML page in the issue (with --post)")
    parser.set_defaults(run=run)


def parse_day(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as err:
        raise UsageError(f"--since {text!r} is not a date: write it as YYYY-MM-DD") from err


def write(db: str | None, since: datetime | None, weeks: int, out: Path) -> weekly.WeeklyReport:
    """Build the report from the database and write report.md and report.html into `out`."""
    if weeks < 1:
        raise UsageError(f"--weeks {weeks}: chart at least 1 week")
    history = History.open(db, read_only=True)
    try:
        built = weekly.build(history, since, weeks)
    finally:
        history.close()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(weekly.markdown(built))
    (out / "report.html").write_text(weekly.html(built))
    return built


def post(built: weekly.WeeklyReport, artifact_url: str | None) -> str:
    """Create or update the week's issue through the GitHub adapter; returns its URL."""
    try:
        github = importlib.import_module("kernelbot.github.client")
    except ModuleNotFoundError as err:
        raise UsageError(NO_ADAPTER) from err
    if getattr(getattr(github, "GitHub", None), "upsert_issue", None) is None:
        raise UsageError(NO_ADAPTER)
    repository, token = os.environ.get("GITHUB_REPOSITORY"), os.environ.get("GITHUB_TOKEN")
    if not repository or not token:
        raise UsageError("posting needs GITHUB_REPOSITORY and GITHUB_TOKEN (kernelbot action on schedule)")
    title, body, marker = weekly.issue(built, artifact_url)
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com")
    return str(github.GitHub(repository, token, api).upsert_issue(title, body, marker))


def run(args: argparse.Namespace) -> int:
    built = write(args.db, parse_day(args.since), args.weeks, args.out)
    print(f"weekly report {built.week}: {args.out / 'report.md'}, {args.out / 'report.html'}")
    for note in built.notes:
        print(f"note: {note}")
    if args.post:
        print(f"posted: {post(built, args.artifact_url)}")
    return 0
