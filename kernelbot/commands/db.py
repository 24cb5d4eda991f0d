"""`kernelbot db`: the history database's schema (upgrade in place, show the current revision)."""

from __future__ import annotations

import argparse

from kernelbot import history


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("db", help="manage the history database's schema")
    commands = parser.add_subparsers(dest="db_command", metavar="{upgrade,current}", required=True)
    for name, text in (
        ("upgrade", "upgrade the schema in place to this kernelbot's revision"),
        ("current", "show the schema revision of the database and the one this kernelbot needs"),
    ):
        cmd = commands.add_parser(name, help=text, description=text)
        cmd.add_argument(
            "--db",
            metavar="URL|FILE",
            default=None,
            help="SQLAlchemy URL (default: the SQLite file in the user data directory)",
        )
    parser.set_defaults(run=run)


def upgrade(url: str | None = None) -> str:
    """Upgrade the database at `url` (default: the embedded SQLite file); returns a one-line report."""
    before, after = history.upgrade(url)
    if before == after:
        return f"history database already at schema revision {after}"
    return f"history database upgraded from schema revision {before or 'none'} to {after}"


def current(url: str | None = None) -> str:
    revision, head = history.schema_status(url)
    state = "up to date" if revision == head else "run `kernelbot db upgrade` to update it"
    return f"history database at schema revision {revision or 'none'}; this kernelbot needs {head} ({state})"


def run(args: argparse.Namespace) -> int:
    print(upgrade(args.db) if args.db_command == "upgrade" else current(args.db))
    return 0
