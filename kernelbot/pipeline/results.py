"""The review's results as one typed contract: what the pipeline returns, the JSON it writes (versioned),
what the history stores as the run's report, and what the comment, the check run, the terminal table and
`publish --run-id` render from. A stored report rebuilds to the same object (from_json)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from kernelbot.fingerprint import Fingerprint
from kernelbot.harness.results import SCHEMA_VERSION, Evaluation
from kernelbot.pipeline.optimize import CandidateResult, OptimizeResult
from kernelbot.render import render


def _evaluation(subject: str, data: dict[str, Any] | None) -> Evaluation | None:
    return None if data is None else Evaluation.from_public(subject, data)


@dataclass
class Suggested:
    """The candidate a review suggests for an operator (reward 2 or 3), as the comment shows it."""

    origin: str
    description: str
    precision: str
    source: str
    status: str
    reason: str
    reward: int
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    median_ms: float | None = None
    max_abs_err: float | None = None
    fp64_ratio: float | None = None
    wall_s: float = 0.0
    side_by_side: dict[str, Any] | None = None
    provisional_reward: int | None = None
    source_path: str = ""

    @classmethod
    def from_candidate(cls, c: CandidateResult) -> Suggested:
        return cls.from_json({**c.to_json(), "source": c.source})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Suggested:
        names = {f.name for f in fields(cls)}
        # Runs stored before every field was kept (the history's legacy rows) lack the evaluation's details.
        defaults = {"description": "", "precision": "exact", "status": "ok", "reason": ""}
        return cls(**{**defaults, **{k: v for k, v in data.items() if k in names}})

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class OperatorResult:
    name: str
    path: str
    change: str  # added / modified / removed / cosmetic / unchanged (measured with --all)
    reasons: list[str]  # what in the diff touched it
    threshold: float  # the practical threshold it was judged with
    spec_hash: str | None = None  # head version (base version for removed operators)
    base_spec_hash: str | None = None
    base: Evaluation | None = None
    head: Evaluation | None = None
    ratio: float | None = None  # head median / base median
    p_value: float | None = None
    ratio_ci99: tuple[float, float] | None = None
    verdict: str | None = None  # regression / improvement / no_change / ambiguous / error; None: not compared
    error: str | None = None
    rounds: int = 0  # interleaved timing rounds taken
    best_candidate: Suggested | None = None  # filled by an optimization agent: the one suggested
    optimization: OptimizeResult | None = None  # every candidate the agent tried, when one ran
    stopped_by: str | None = None  # "time": the run's budget ended before this operator was measured
    notes: list[str] = field(default_factory=list)  # what a reader should know that is not an error
    wall_s: float = 0.0  # measuring and optimizing it

    def to_json(self) -> dict[str, Any]:
        def side(ev: Evaluation | None) -> dict[str, Any] | None:
            return None if ev is None else ev.public()

        return {
            "name": self.name,
            "path": self.path,
            "change": self.change,
            "reasons": self.reasons,
            "base": side(self.base),
            "head": side(self.head),
            "ratio": self.ratio,
            "p_value": self.p_value,
            "ratio_ci99": list(self.ratio_ci99) if self.ratio_ci99 else None,
            "threshold": self.threshold,
            "verdict": self.verdict,
            "error": self.error,
            "best_candidate": None if self.best_candidate is None else self.best_candidate.to_json(),
            "stopped_by": self.stopped_by,
            "notes": self.notes,
            "wall_s": round(self.wall_s, 2),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorResult:
        """A result as written by to_json (what a stored run's report holds); what to_json leaves out (the
        agent's every candidate, the spec hashes) stays empty."""
        ci = data.get("ratio_ci99")
        best = data.get("best_candidate")
        return cls(
            name=data["name"],
            path=data["path"],
            change=data["change"],
            reasons=list(data.get("reasons") or []),
            threshold=data.get("threshold") or 0.0,
            base=_evaluation("base", data.get("base")),
            head=_evaluation("head", data.get("head")),
            ratio=data.get("ratio"),
            p_value=data.get("p_value"),
            ratio_ci99=None if ci is None else (ci[0], ci[1]),
            verdict=data.get("verdict"),
            error=data.get("error"),
            best_candidate=None if best is None else Suggested.from_json(best),
            stopped_by=data.get("stopped_by"),
            notes=list(data.get("notes") or []),
            wall_s=data.get("wall_s") or 0.0,
        )


@dataclass
class ReviewResult:
    repository: str
    base: str  # full SHA
    head: str
    fingerprint: Fingerprint
    operators: list[OperatorResult] = field(default_factory=list)
    run_id: int | None = None  # None when the history database could not be written
    warnings: list[str] = field(default_factory=list)
    interrupted: str | None = None  # "SIGINT" / "SIGTERM": the operators measured before it are kept
    time_budget_s: float | None = None  # the run's wall-clock budget (--time, else harness.run_time_s)
    wall_s: float = 0.0

    @property
    def regressions(self) -> list[OperatorResult]:
        return [op for op in self.operators if op.verdict == "regression"]

    @property
    def broken_at_head(self) -> list[OperatorResult]:  # an operator cut by the run's budget is not broken
        return [op for op in self.operators if op.head is not None and not op.head.ok and not op.stopped_by]

    def summary(self) -> str:
        counts = Counter(
            op.verdict or ("not measured" if op.stopped_by else op.change) for op in self.operators
        )
        if not self.operators:
            return "no operator changed"
        order = [
            "regression",
            "error",
            "ambiguous",
            "improvement",
            "no_change",
            "added",
            "removed",
            "cosmetic",
            "not measured",
            "unchanged",
        ]
        words = {
            "no_change": "unchanged",
            "regression": "regression",
            "improvement": "improvement",
            "error": "error",
        }
        parts = []
        for key in order:
            if counts.get(key):
                label = words.get(key, key)
                plural = "s" if counts[key] > 1 and key in ("regression", "improvement", "error") else ""
                parts.append(f"{counts[key]} {label}{plural}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "repository": self.repository,
            "base": self.base,
            "head": self.head,
            "device": self.fingerprint.to_dict(),
            "summary": self.summary(),
            "warnings": self.warnings,
            "interrupted": self.interrupted,
            "time_budget_s": self.time_budget_s,
            "wall_s": round(self.wall_s, 2),
            "operators": [op.to_json() for op in self.operators],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReviewResult:
        """The review as to_json wrote it (schema 1): a stored run re-posts the comment it first posted."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"a review result of schema {data.get('schema_version')!r}, not {SCHEMA_VERSION}"
            )
        known = {f.name for f in fields(Fingerprint)}
        device = {k: v for k, v in data["device"].items() if k in known}
        return cls(
            repository=data["repository"],
            base=data["base"],
            head=data["head"],
            fingerprint=Fingerprint(**device),
            operators=[OperatorResult.from_json(op) for op in data["operators"]],
            run_id=data.get("run_id"),
            warnings=list(data.get("warnings") or []),
            interrupted=data.get("interrupted"),
            time_budget_s=data.get("time_budget_s"),
            wall_s=data.get("wall_s") or 0.0,
        )

    def markdown(self) -> str:
        return render("comment.md.j2", review=self.to_json(), summary=self.summary())
