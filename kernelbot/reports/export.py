"""Training data from the history: one JSON line per optimization task (operator, turns, final candidate),
for the model agent's runs (`--agent llm`: their transcripts) or the search agent's (`--agent search`: the
rules tried in order, each with its reward and seconds, and the operator's facts)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from kernelbot.history import CandidateRecord, History, OperatorRecord, RunRecord, TurnRecord
from kernelbot.history.outcomes import runs_with_search
from kernelbot.history.queries import runs_with_transcripts

FORMAT = "kernelbot.trajectory"
FORMAT_VERSION = 1  # bump when a field changes meaning


@dataclass
class ExportStats:
    runs: int = 0  # runs read
    tasks: int = 0  # operators with a transcript seen
    written: int = 0  # lines written
    below_reward: int = 0  # tasks left out by --min-reward


def messages(turns: list[TurnRecord]) -> list[dict[str, Any]]:
    """The conversation as OpenAI chat messages (system, user, assistant with tool_calls, tool); events left out."""
    out: list[dict[str, Any]] = []
    for t in turns:
        if t.role in ("system", "user"):
            out.append({"role": t.role, "content": t.content})
        elif t.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": t.content or None}
            if t.tool_args:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in t.tool_args
                ]  # fmt: skip
            out.append(message)
        elif t.role == "tool":
            call_id = (t.tool_result or {}).get("call_id")
            out.append({"role": "tool", "tool_call_id": call_id, "name": t.tool_name, "content": t.content})
    return out


def _candidate(index: int, c: CandidateRecord) -> dict[str, Any]:
    m = c.measurement
    return {
        "index": index,
        "origin": c.origin,
        "status": c.status,
        "reward": c.reward,
        "speedup_vs_eager": c.speedup_vs_eager,
        "speedup_vs_compile": c.speedup_vs_compile,
        "precision_note": c.precision_note,
        "median_ms": m.median_ms if m else None,
        "max_abs_err": m.max_abs_err if m else None,
        "reason": m.reason if m else "",
        "wall_s": c.wall_s,
        "source_sha256": c.source_sha256,
        "source": c.source,
    }


def final_candidate(candidates: list[CandidateRecord]) -> tuple[int, CandidateRecord] | None:
    """The one a user would get (reward >= 2, fastest), else the best-rewarded attempt (latest on ties)."""
    if not candidates:
        return None
    ranked = sorted(
        enumerate(candidates),
        key=lambda ic: (ic[1].reward, ic[1].speedup_vs_eager or 0.0 if ic[1].reward >= 2 else ic[0]),
    )
    return ranked[-1]


def trajectory(run_id: int, run: RunRecord, op: OperatorRecord, agent: str = "llm") -> dict[str, Any]:
    task = next((t.tool_result for t in op.transcript if isinstance(t.tool_result, dict) and
                 t.tool_result.get("kind") == "task"), None) or {}  # fmt: skip
    final = final_candidate(op.candidates)
    fp = run.fingerprint
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "agent": agent,  # "llm" (messages and turns) or "search" (rules in order, no messages)
        "run_id": run_id,
        "repository": run.repository,
        "trigger": run.trigger,
        "head_sha": run.head_sha,
        "pr_number": run.pr_number,
        "started_at": run.started_at.isoformat(),
        "fingerprint": None if fp is None else {**asdict(fp), "key": fp.key},
        "model": task.get("model"),
        "operator": {
            "name": op.name,
            "path": op.path,
            "spec_hash": op.spec_hash,
            "device": task.get("device") or (fp.extra.get("device") if fp else None),
            "source": task.get("source"),
            "facts": task.get("facts") or op.facts or {},
        },
        "messages": messages(op.transcript),
        "turns": [asdict(t) for t in op.transcript],
        "candidates": [_candidate(i, c) for i, c in enumerate(op.candidates)],
        "final": None if final is None else _candidate(*final),
        "reward": -1 if final is None else final[1].reward,
        "suggested": final is not None and final[1].reward >= 2,
        "totals": {
            "replies": sum(1 for t in op.transcript if t.role == "assistant"),
            "tokens_in": sum(t.tokens_in for t in op.transcript),
            "tokens_out": sum(t.tokens_out for t in op.transcript),
            "cost_usd": sum(t.cost_usd for t in op.transcript),
            "elapsed_s": sum(t.elapsed_s for t in op.transcript),
        },
    }


def export_trajectories(
    url: str | None,
    out: Path,
    *,
    since: datetime | None = None,
    min_reward: int | None = None,
    agent: Literal["llm", "search"] = "llm",
) -> ExportStats:
    """Write every stored task of one agent (one line per run and operator) to `out` as JSON Lines: the model
    agent's transcripts, or the search agent's runs (candidates and no transcript)."""
    stats = ExportStats()
    history = History.open(url, read_only=True)
    try:
        run_ids = (
            runs_with_transcripts(history, since) if agent == "llm" else runs_with_search(history, since)
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w") as fh:
            for run_id in run_ids:
                run = history.get_run(run_id)
                stats.runs += 1
                for op in run.operators:
                    if not (op.transcript if agent == "llm" else op.candidates and not op.transcript):
                        continue
                    stats.tasks += 1
                    line = trajectory(run_id, run, op, agent)
                    if min_reward is not None and line["reward"] < min_reward:
                        stats.below_reward += 1
                        continue
                    fh.write(json.dumps(line, default=str) + "\n")
                    stats.written += 1
    finally:
        history.close()
    return stats
