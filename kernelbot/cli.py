"""The `kernelbot` command line: parses arguments, runs one command, turns errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence

from kernelbot import __version__
from kernelbot.errors import KernelbotError
from kernelbot.harness import stop
from kernelbot.harness.jail import JailUnavailable

# Each module in kernelbot.commands adds its own subcommand (one file per command).
COMMANDS = (
    "check", "review", "optimize", "db", "report", "history", "ingest", "action", "publish", "export",
    "plan", "merge", "train",
)  # fmt: skip


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All commands, or only `only`'s: a command imports what it needs alone (`optimize` on a GPU machine
    without PyGithub, say), while `kernelbot --help` and a misspelt command still list them all."""
    parser = argparse.ArgumentParser(
        prog="kernelbot", description="Keeps GPU code fast in every pull request."
    )
    parser.add_argument("--version", action="version", version=f"kernelbot {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only not in COMMANDS else (only,):
        importlib.import_module(f"kernelbot.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A command's --time counts from the process's start (Python and the imports) when run from the shell,
    # from this call when called in-process (tests, scripts).
    started = stop.process_started() if argv is None else time.monotonic()
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=next((w for w in words if not w.startswith("-")), None))
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0)
    args.started = started
    previous = stop.install()
    try:
        return int(args.run(args))
    except (KernelbotError, JailUnavailable) as exc:
        if os.environ.get("GITHUB_ACTIONS") == "true":
            print(f"::error::{exc}", file=sys.stderr)
        print(f"kernelbot: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (harness.stop) before anything could be kept
        print("kernelbot: interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    finally:
        stop.restore(previous)


if __name__ == "__main__":
    sys.exit(main())
