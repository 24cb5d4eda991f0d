"""The pipeline's results as one typed contract: a check (CheckReport), each candidate and an optimization
(CandidateResult, OptimizeResult), an operator's and a review's (OperatorResult, ReviewResult). What the
pipeline returns, the JSON it writes (versioned), what the history stores as a run's report, and what the
comment, the check run, the terminal tables and `publish --run-id` render from. A stored review report
rebuilds to the same object (from_json)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, TypeVar

from kernelbot.errors import StorageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.harness.results import SCHEMA_VERSION, Evaluation, reward, speedup
from kernelbot.history.records import TurnRecord
from kernelbot.render import render
from kernelbot.spec import OperatorSpec


class _Rewarded(Protocol):
    reward: Any
    speedup_vs_eager: float | None


R = TypeVar("R", bound=_Rewarded)


def suggested_best(candidates: Iterable[R]) -> R | None:
    """The candidate a user is offered: reward 2 or 3 only (faster than eager by >5%), the highest reward,
    then the fastest. One rule for live results, stored rows and benchmark tables."""
    suggested = [c for c in candidates if c.reward >= 2]
    return max(suggested, key=lambda c: (c.reward, c.speedup_vs_eager or 0.0), default=None)


@dataclass
class CheckReport:
    spec: OperatorSpec
    fingerprint: Fingerprint
    reference: Evaluation  # the operator itself (its callable, or Model), checked and timed
    eager: (
        Evaluation  # eager PyTorch baseline (the reference; same object as `reference` for KernelBench form)
    )
    compiled: Evaluation | None  # torch.compile of the reference, None when skipped
    candidate: Evaluation | None = None
    candidate_path: str | None = None
    # A reward of 2 or 3 on the separate timings above is timed again side by side (pipeline/confirm.py):
    # the reward that holds (1 where those rounds could not finish) and their evidence.
    confirmed_reward: int | None = None
    side_by_side: dict[str, Any] | None = None
    claimed: int | None = None  # the claim as it stood before confirming (the candidate may fail there)

    @property
    def claimed_reward(self) -> int | None:
        """The reward on the separate timings (the baselines' from other moments)."""
        if self.claimed is not None:
            return self.claimed
        return None if self.candidate is None else reward(self.candidate, self.eager, self.compiled)

    @property
    def reward(self) -> int | None:
        return self.confirmed_reward if self.confirmed_reward is not None else self.claimed_reward

    def speedups(self) -> tuple[float | None, float | None]:
        """The candidate's speedups over eager and torch.compile: side by side where it was so timed."""
        if self.side_by_side is not None:
            return self.side_by_side["speedup_vs_eager"], self.side_by_side.get("speedup_vs_compile")
        if self.candidate is None:
            return None, None
        return speedup(self.eager, self.candidate), speedup(self.compiled, self.candidate)

    def to_json(self) -> dict[str, Any]:
        def timing(ev: Evaluation | None) -> dict[str, Any] | None:
            return None if ev is None else {**ev.public(), "cached": ev.cached}

        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "operator": self.spec.name,
            "path": self.spec.path,
            "spec": self.spec.to_json(),
            "device": self.fingerprint.to_dict(),
            "reference": timing(self.reference),
            "baselines": {"eager": timing(self.eager), "compile": timing(self.compiled)},
        }
        if self.candidate is not None:
            vs_eager, vs_compile = self.speedups()
            data["candidate"] = {
                **self.candidate.public(),
                "source_path": self.candidate_path,
                "speedup_vs_eager": vs_eager,
                "speedup_vs_compile": vs_compile,
                "reward": self.reward,
                "claimed_reward": self.claimed_reward,
                "side_by_side": self.side_by_side,
            }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckReport:
        """The report as to_json wrote it (this schema or an older one; a newer one is a StorageError)."""
        _readable(data, "a check report")
        baselines = data["baselines"]
        reference = _evaluation("operator", data["reference"])
        eager = _evaluation("eager", baselines["eager"])
        assert reference is not None and eager is not None, "a check report always holds both"
        candidate = data.get("candidate")
        # confirmed only where a claim of 2 or 3 was timed again (older reports hold no claim)
        claim = None if candidate is None else candidate.get("claimed_reward")
        return cls(
            spec=OperatorSpec.from_json(data["spec"]),
            fingerprint=_fingerprint(data["device"]),
            reference=reference,
            eager=eager,
            compiled=_evaluation("compile", baselines.get("compile")),
            candidate=_evaluation("candidate", candidate),
            candidate_path=None if candidate is None else candidate.get("source_path"),
            claimed=claim,
            confirmed_reward=candidate["reward"] if candidate is not None and claim in (2, 3) else None,
            side_by_side=None if candidate is None else candidate.get("side_by_side"),
        )


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
    wall_s: float = 0.0  # its verification and timing, start to end
    # its reward's evidence: timed in the same rounds as eager and torch.compile (confirm); None if not
    side_by_side: dict[str, Any] | None = None
    provisional_reward: int | None = None  # what the cached baselines said, where side by side did not run

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
            "fp64_ratio": self.evaluation.fp64_ratio,
            "wall_s": round(self.wall_s, 2),
            "side_by_side": self.side_by_side,
            "provisional_reward": self.provisional_reward,
            "source_path": self.source_path,
            "evaluation": self.evaluation.public(),
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CandidateResult:
        evaluation = _evaluation("candidate", data["evaluation"])
        assert evaluation is not None
        return cls(
            origin=data["origin"],
            description=data["description"],
            precision=data["precision"],
            source=data["source"],
            source_path=data["source_path"],
            evaluation=evaluation,
            reward=data["reward"],
            speedup_vs_eager=data.get("speedup_vs_eager"),
            speedup_vs_compile=data.get("speedup_vs_compile"),
            wall_s=data.get("wall_s") or 0.0,
            side_by_side=data.get("side_by_side"),
            provisional_reward=data.get("provisional_reward"),
        )


@dataclass
class OptimizeResult:
    check: CheckReport  # the operator, eager and torch.compile baselines
    agent: str
    candidates: list[CandidateResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # rule id -> why it did not apply
    facts: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = "exhausted"  # "exhausted" | "budget" | "time" | "SIGINT" | "SIGTERM"
    phases_s: dict[str, float] = field(default_factory=dict)  # wall time of baselines and analysis
    best_path: str | None = None  # the drop-in file written for the winner
    transcript: list[Any] = field(default_factory=list)  # the agent's turns (history.TurnRecord)
    agent_summary: dict[str, Any] = field(default_factory=dict)  # the agent's account: model, cost, stop

    @property
    def best(self) -> CandidateResult | None:
        return suggested_best(self.candidates)

    def to_json(self) -> dict[str, Any]:
        best = self.best
        check = self.check.to_json()
        return {
            "schema_version": SCHEMA_VERSION,
            "operator": self.check.spec.name,
            "agent": self.agent,
            "device": self.check.fingerprint.to_dict(),
            "baselines": check["baselines"],
            "check": check,
            "stopped_by": self.stopped_by,
            "wall_s": {k: round(v, 2) for k, v in self.phases_s.items()},
            "candidates": [c.to_json() for c in self.candidates],
            "skipped_rules": self.skipped,
            "facts": self.facts,
            "agent_summary": self.agent_summary,
            "transcript": [asdict(t) for t in self.transcript],
            "best": None if best is None else {**best.to_json(), "drop_in_path": self.best_path},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OptimizeResult:
        """The result as to_json wrote it: `kernelbot optimize --json`, or a run saved when the database
        could not be written (this schema or an older one; a newer one is a StorageError)."""
        _readable(data, "an optimization result")
        best = data.get("best")
        return cls(
            check=CheckReport.from_json(data["check"]),
            agent=data["agent"],
            candidates=[CandidateResult.from_json(c) for c in data.get("candidates") or []],
            skipped=dict(data.get("skipped_rules") or {}),
            facts=dict(data.get("facts") or {}),
            stopped_by=data.get("stopped_by") or "exhausted",
            phases_s=dict(data.get("wall_s") or {}),
            best_path=None if best is None else best.get("drop_in_path"),
            transcript=[TurnRecord(**t) for t in data.get("transcript") or []],
            agent_summary=dict(data.get("agent_summary") or {}),
        )


def _evaluation(subject: str, data: dict[str, Any] | None) -> Evaluation | None:
    return None if data is None else Evaluation.from_public(subject, data)


def _fingerprint(device: dict[str, Any]) -> Fingerprint:
    known = {f.name for f in fields(Fingerprint)}
    return Fingerprint(**{k: v for k, v in device.items() if k in known})


def _readable(data: dict[str, Any], what: str) -> None:
    """Older schemas rebuild (what they lack stays at its default); a newer one is one line."""
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise StorageError(
            f"{what} of schema {version!r}, newer than this kernelbot's ({SCHEMA_VERSION}): "
            "upgrade kernelbot to read it"
        )


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
            "rounds": self.rounds,
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
            rounds=data.get("rounds") or 0,
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
        """The review as to_json wrote it, in this or an earlier schema (what those lack stays at its default):
        a stored run re-posts the comment it first posted."""
        _readable(data, "a review result")
        return cls(
            repository=data["repository"],
            base=data["base"],
            head=data["head"],
            fingerprint=_fingerprint(data["device"]),
            operators=[OperatorResult.from_json(op) for op in data["operators"]],
            run_id=data.get("run_id"),
            warnings=list(data.get("warnings") or []),
            interrupted=data.get("interrupted"),
            time_budget_s=data.get("time_budget_s"),
            wall_s=data.get("wall_s") or 0.0,
        )

    def markdown(self) -> str:
        return render("comment.md.j2", review=self.to_json(), summary=self.summary())
