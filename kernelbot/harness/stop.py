"""SIGINT and SIGTERM as an exception that unwinds the run, so every `finally` runs (sandboxes, worktrees) and
what was measured is kept.

CPython drops an exception raised while it runs its fork hooks (subprocess starts a sandbox that way:
"Exception ignored in: _releaseLock"), so a signal that lands there would be lost and the run would carry
on. The handler therefore also records the signal, and `check` raises it again at the next safe point
(before each request to a sandbox, between operators and candidates) until the run acknowledges it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import Any

_pending: list[int] = []


class Stopped(KeyboardInterrupt):
    """The run was asked to stop (Ctrl-C or SIGTERM, a cancelled CI job)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum).name  # "SIGINT" / "SIGTERM"
        self.exit_code = 128 + signum  # what a shell reports for a process the signal ended


def _handler(signum: int, frame: FrameType | None) -> None:
    _pending.append(signum)
    raise Stopped(signum)


def install() -> dict[int, Any]:
    """Our handler for SIGINT and SIGTERM (main thread only); the previous ones, for `restore`."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    _pending.clear()


def check() -> None:
    """Raise a stop that arrived and was not acknowledged (it may have been swallowed)."""
    if _pending:
        raise Stopped(_pending[-1])


def acknowledge(exc: KeyboardInterrupt) -> str:
    """The run has caught the stop and is winding down: "SIGINT" or "SIGTERM"."""
    _pending.clear()
    return exc.signal if isinstance(exc, Stopped) else "SIGINT"


def process_started() -> float:
    """When this process began, on time.monotonic()'s clock, so that a command's --time counts Python's start
    and the imports too (Linux: /proc/self/stat; elsewhere, or if unreadable: now)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as handle:
            ticks = int(handle.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return now
    age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    return now - min(max(age, 0.0), 120.0)
