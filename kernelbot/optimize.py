"""Optimize one operator: an agent proposes, the harness verifies and times, the best verified one wins."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelbot import baselines
from kernelbot.agents.analysis import analyze_operator
from kernelbot.agents.base import Agent, Feedback, Task, job_at_precision
from kernelbot.check import CheckReport, check_operator, settings_for
from kernelbot.config import Config, PrecisionPolicy
from kernelbot.fingerprint import Fingerprint
from kernelbot.harness.evaluate import evaluate
from kernelbot.harness.results import Evaluation, reward, speedup
from kernelbot.render import render
from kernelbot.spec import OperatorSpec

Progress = Callable[[str], None]


@dataclass
class CandidateResult:
    origin: str  # rule id, model name or replay file
    description: str
    precision: str  # "exact", or the lower precision it uses (reported)
    source: str  # the full candidate source
    source_path: str  # where it was written
    evaluation: Evaluation
    reward: int
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None

    @property
    def suggested(self) -> bool:
        return self.reward >= 2  # only candidates faster than eager (by >5%) are ever suggested

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "description": self.description,
            "precision": self.precision,
            "status": self.evaluation.status,
            "reason": self.evaluation.reason,
            "reward": self.reward,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "median_ms": self.evaluation.timing.median_ms if self.evaluation.timing else None,
            "max_abs_err": self.evaluation.max_abs_err,
            "source_path": self.source_path,
        }


@dataclass
class OptimizeResult:
    check: CheckReport  # the operator, eager and torch.compile baselines
    agent: str
    candidates: list[CandidateResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # rule id -> why it did not apply
    facts: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = "exhausted"  # "exhausted" | "budget" | "time"
    best_path: str | None = None  # the drop-in file written for the winner
    transcript: list[Any] = field(default_factory=list)  # the agent's turns (history.TurnRecord)
    agent_summary: dict[str, Any] = field(default_factory=dict)  # the agent's account: model, cost, stop

    @property
    def best(self) -> CandidateResult | None:
        suggested = [c for c in self.candidates if c.suggested]
        return max(suggested, key=lambda c: (c.reward, c.speedup_vs_eager or 0.0), default=None)

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "operator": self.check.spec.name,
            "agent": self.agent,
            "device": self.check.fingerprint.to_dict(),
            "baselines": self.check.to_json()["baselines"],
            "stopped_by": self.stopped_by,
            "candidates": [c.to_json() for c in self.candidates],
            "skipped_rules": self.skipped,
            "agent_summary": self.agent_summary,
            "best": None if best is None else {**best.to_json(), "drop_in_path": self.best_path},
        }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:60]


def optimize_operator(
    spec: OperatorSpec,
    root: Path,
    config: Config,
    fingerprint: Fingerprint,
    agent: Agent,
    *,
    out_dir: Path,
    budget: int | None = None,
    time_s: float | None = None,
    rules_for_analysis: list[str] | None = None,
    progress: Progress = lambda _: None,
) -> OptimizeResult:
    budget = budget or config.agent.budget
    deadline = time.monotonic() + (time_s or config.agent.time_s)
    check = check_operator(spec, root, config, fingerprint, with_compile=True, progress=progress)
    job = spec.job(root, fingerprint.device)
    cache = baselines.cache_root(fingerprint.key)
    settings = settings_for(config, cache)
    progress(f"{spec.name}: analysing the operator")
    facts = analyze_operator(job, rules_for_analysis or [], cache_dir=cache, spec_hash=spec.spec_hash(root))
    facts["eager_ms"] = check.eager.timing.median_ms if check.eager.timing else None
    policy: PrecisionPolicy = (
        spec.decl.precision if spec.decl and spec.decl.precision else None
    ) or config.precision
    task = Task(spec, root, fingerprint.device, (root / spec.path).read_text(), policy, facts, budget)
    result = OptimizeResult(check, agent.name, facts=facts)
    feedback: list[Feedback] = []
    candidates_dir = out_dir / "candidates" / _slug(spec.name)
    candidates_dir.mkdir(parents=True, exist_ok=True)
    while True:
        if len(feedback) >= budget:
            result.stopped_by = "budget"
            break
        if time.monotonic() > deadline:
            result.stopped_by = "time"
            break
        proposal = agent.propose(task, feedback)
        if proposal is None:
            break
        path = candidates_dir / f"{len(feedback):02d}-{_slug(proposal.origin)}.py"
        path.write_text(proposal.source)
        progress(f"{spec.name}: candidate {len(feedback) + 1} ({proposal.origin}): checking and timing")
        ev = evaluate(
            job_at_precision(job, proposal.precision),
            "candidate",
            settings,
            candidate=str(path),
            require_kernel=proposal.require_kernel,
        )
        fb = Feedback(
            proposal,
            ev,
            reward(ev, check.eager, check.compiled),
            speedup(check.eager, ev),
            speedup(check.compiled, ev),
        )
        feedback.append(fb)
        result.candidates.append(
            CandidateResult(
                proposal.origin,
                proposal.description,
                proposal.precision,
                proposal.source,
                str(path),
                ev,
                fb.reward,
                fb.speedup_vs_eager,
                fb.speedup_vs_compile,
            )
        )
    result.skipped = dict(getattr(agent, "skipped", {}))
    result.transcript = list(getattr(agent, "transcript", []))
    summary = getattr(agent, "summary", None)
    result.agent_summary = summary() if callable(summary) else {}
    best = result.best
    if best is not None:
        target = out_dir / f"{_slug(spec.name.replace('/', '_'))}_kernelbot.py"
        target.write_text(render("kernels/winner_header.py.j2", best=best, check=check) + best.source)
        result.best_path = str(target)
    return result
