"""What a run leaves on disk (git worktrees) removed even when the run is killed outright.

A run's `finally` blocks remove its worktrees on an exception, SIGINT or SIGTERM; nothing in the process runs
on SIGKILL (or the out-of-memory killer). So the first worktree of a run starts this watcher, a process of its
own session that holds the read end of a pipe: the run registers each worktree and says when it removed it;
when the pipe closes, however the run ended, the watcher removes what is still registered and exits.
Sandboxed processes need no watcher: they die with their parent (bubblewrap's --die-with-parent, or the
parent-death signal, sandbox.launch).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

_lock = threading.Lock()
_pipe: IO[str] | None = None


def _send(message: dict[str, str]) -> None:
    global _pipe
    with _lock:
        if _pipe is None:
            watcher = subprocess.Popen(
                [sys.executable, "-m", "kernelbot.reaper"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the run's process group does not reach it
                text=True,
            )
            _pipe = watcher.stdin
        assert _pipe is not None
        try:
            _pipe.write(json.dumps(message) + "\n")
            _pipe.flush()
        except OSError:  # the watcher is gone: the run's own clean-up still happens
            pass


def track(path: Path, repo: Path) -> None:
    """`path` (a temporary folder holding a worktree of `repo`) is to go when the run ends."""
    _send({"add": str(path), "repo": str(repo)})


def untrack(path: Path) -> None:
    """The run removed `path` itself."""
    _send({"drop": str(path)})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the run, which cleans up; we wait for EOF
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    left: dict[str, str] = {}
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "add" in message:
            left[message["add"]] = message.get("repo", "")
        elif "drop" in message:
            left.pop(message["drop"], None)
    for path, repo in left.items():
        shutil.rmtree(path, ignore_errors=True)
        if repo:
            subprocess.run(["git", "-C", repo, "worktree", "prune"], capture_output=True, check=False)


if __name__ == "__main__":
    main()
