"""A review that is stopped: SIGINT and SIGTERM keep what was measured and clean up; SIGKILL leaves no process
and no worktree behind (the sandboxes die with their parent, kernelbot.reaper removes the worktrees)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.gitrepo_builder import GitRepoBuilder
from tests.ops import FAST_CONFIG, matmul_op

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def three_ops(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepoBuilder, str, str]:
    repo = GitRepoBuilder(tmp_path_factory.mktemp("lifecycle") / "repo")
    names = ("ops/a.py", "ops/b.py", "ops/c.py")
    base = repo.commit({".github/kernelbot.yml": FAST_CONFIG, **{n: matmul_op(1) for n in names}})
    head = repo.commit({n: matmul_op(2) for n in names})
    return repo, base, head


def _worktrees() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("kernelbot-wt-")}


def _harness_processes() -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return {
        int(line.split(None, 1)[0])
        for line in out.splitlines()
        if "kernelbot.harness" in line or "kernelbot-wt-" in line or "kernelbot.analysis.tracer" in line
    }


def _start(repo: GitRepoBuilder, base: str, head: str, out: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "kernelbot.cli", "review", "--repo", str(repo.root), "--base", base]
    argv += [
        "--head",
        head,
        "--device",
        "cpu",
        "--db",
        f"sqlite:///{out / 'h.db'}",
        "--json",
        str(out / "r.json"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)


def _wait_for(proc: subprocess.Popen[str], marker: str, timeout_s: float = 240) -> None:
    """Until the review prints `marker` (its progress goes to stderr)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    for line in proc.stderr:
        if marker in line:
            return
        assert time.monotonic() < deadline, f"no {marker!r} in time"
    pytest.fail(f"the review ended before {marker!r} (exit {proc.wait()})")


def _settles(check: object, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_review_keeps_what_it_measured_and_cleans_up(
    three_ops: tuple[GitRepoBuilder, str, str], tmp_path: Path, sig: int, code: int
) -> None:
    repo, base, head = three_ops
    trees, procs = _worktrees(), _harness_processes()
    proc = _start(repo, base, head, tmp_path)
    _wait_for(proc, "[2/3]")  # the first operator is measured, the second under way
    proc.send_signal(sig)
    rest = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=120) == code, rest
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["interrupted"] == signal.Signals(sig).name
    assert [op["name"] for op in data["operators"]] == ["ops/a"]
    with sqlite3.connect(tmp_path / "h.db") as db:  # stored, not only printed
        assert db.execute("select count(*) from measurements").fetchone()[0] >= 2  # base and head of ops/a
        # kept, but not a whole review: trends and the next baselines leave it out
        assert db.execute("select status, error from runs").fetchall() == [
            ("failed", f"stopped by {signal.Signals(sig).name} after 1 operator(s)")
        ]
    assert _settles(lambda: _worktrees() <= trees and _harness_processes() <= procs)
    assert "ops/" not in repo.git("worktree", "list").replace(str(repo.root), "")


def test_a_killed_review_leaves_no_process_and_no_worktree(
    three_ops: tuple[GitRepoBuilder, str, str], tmp_path: Path
) -> None:
    repo, base, head = three_ops
    trees, procs = _worktrees(), _harness_processes()
    proc = _start(repo, base, head, tmp_path)
    _wait_for(proc, "[1/3]")  # sandboxes are running
    assert _settles(lambda: len(_harness_processes() - procs) > 0, 60)
    assert len(_worktrees() - trees) == 2  # base and head
    proc.kill()
    proc.wait()
    assert _settles(lambda: _harness_processes() <= procs), _harness_processes() - procs
    assert _settles(lambda: _worktrees() <= trees), _worktrees() - trees
    # Pruned: only the repository itself (the watcher prunes after it removes each folder; seen listed as
    # "prunable" in the moment between the two on a slower run, so this waits as the checks above do).
    assert _settles(lambda: len(repo.git("worktree", "list").splitlines()) == 1), repo.git("worktree", "list")
