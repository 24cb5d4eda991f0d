"""Run the tracer in a child process (time-limited) and return the operator's facts for rule matching."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelbot.harness.sandbox import run_jailed, worker_env


@functools.cache
def _code_version() -> str:
    """What the facts are computed by: the tracer, its rewrites and the loader, as one content hash."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    folders = ("analysis", "harness")  # the tracer imports nothing else of kernelbot
    for path in sorted(p for folder in folders for p in (package / folder).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def analyze_operator(
    job: dict[str, Any],
    rewrites: list[str],
    timeout_s: float = 120.0,
    *,
    cache_dir: Path | None = None,
    spec_hash: str = "",
    sandbox: str = "bwrap",
) -> dict[str, Any]:
    """Facts about the operator (ops, modules, shapes, which rewrites apply). Failures become facts too.

    With `cache_dir`, facts of a finished analysis are kept there, keyed by the operator's content
    (`spec_hash`), the job, the rewrites asked for and kernelbot's own analysis code: the trace runs the
    operator at full size on the CPU (seconds each time), and the facts cannot change while none of those do.
    """
    # Not the checkout's path: a review traces each side in a new temporary worktree, and the spec hash
    # already covers the operator's files (as the baseline cache's key does).
    where = {k: v for k, v in job.items() if k != "root"}
    key = hashlib.sha256(
        json.dumps([spec_hash, where, sorted(rewrites), _code_version()], sort_keys=True).encode()
    ).hexdigest()[:24]
    path = cache_dir / "analysis" / f"{key}.json" if cache_dir is not None and spec_hash else None
    if path is not None:
        try:
            cached: dict[str, Any] = json.loads(path.read_text())
            return cached
        except (OSError, ValueError):
            pass  # absent or unreadable: analyse again
    facts = _analyze(job, rewrites, timeout_s, sandbox)
    if path is not None and "analysis_failed" not in facts:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{id(facts)}.tmp")
        tmp.write_text(json.dumps(facts))
        tmp.replace(path)
    return facts


def _analyze(job: dict[str, Any], rewrites: list[str], timeout_s: float, sandbox: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kernelbot-trace-") as tmp:
        request, answer = Path(tmp) / "in.json", Path(tmp) / "out.json"
        root = Path(job["root"]).resolve()
        request.write_text(
            json.dumps({"job": {**job, "root": str(root), "device": "cpu"}, "rewrites": rewrites})
        )
        # The operator is the pull request's code: traced in the OS sandbox (on the CPU, the tree read-only;
        # what it answers is facts for ordering rules, never a verdict).
        code, _, _ = run_jailed(
            [sys.executable, "-m", "kernelbot.analysis.tracer", str(request), str(answer)],
            sandbox=sandbox, env=worker_env(None, "cpu"), readable=[root], writable=[Path(tmp)],
            timeout_s=timeout_s,
        )  # fmt: skip
        if code is None:
            return _failed(f"analysis timed out after {timeout_s:g} s")
        try:
            result = json.loads(_read_answer(answer))
        except (OSError, ValueError) as exc:
            return _failed(f"analysis failed: {exc}")
    if not result.get("ok"):
        return _failed(result.get("error", "analysis failed"))
    facts: dict[str, Any] = result["facts"]
    return facts


def _read_answer(path: Path) -> str:
    """The tracer's answer, a plain file in the folder it could write: not through a link it left there (to a
    file of the runner's, attacker round 55's reading), nor from a FIFO that would never end."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(f"{path.name} is not a plain file")
        return handle.read().decode()  # its size is held by the sandbox's file-size limit


def _failed(why: str) -> dict[str, Any]:
    """No facts: rules that need them do not match. Marked so that it is not cached (it may be the machine)."""
    return {"traceable": False, "trace_error": why, "analysis_failed": True}
