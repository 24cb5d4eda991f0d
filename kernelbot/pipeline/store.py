"""Store a review in the history database (before anything is rendered or posted)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from kernelbot import gitrepo
from kernelbot.errors import GitError, StorageError
from kernelbot.fingerprint import Fingerprint
from kernelbot.harness.results import Evaluation
from kernelbot.history import (
    CandidateRecord,
    FingerprintRecord,
    History,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    Trigger,
    VerdictRecord,
)
from kernelbot.pipeline.results import OptimizeResult, ReviewResult, Suggested
from kernelbot.spec import OperatorSpec


def fingerprint_record(fp: Fingerprint) -> FingerprintRecord:
    return FingerprintRecord(
        gpu=fp.gpu or "cpu",
        driver=fp.driver or "",
        cuda=fp.cuda or "",
        torch=fp.torch,
        cupy=fp.cupy or "",
        kernelbot=fp.kernelbot,
        extra={"device": fp.device, "cpu": fp.cpu, "triton": fp.triton, "python": fp.python, "key": fp.key},
    )


def optimization_measurements(result: OptimizeResult) -> list[MeasurementRecord]:
    """The baselines an optimization compared against (eager, and torch.compile when it ran)."""
    check = result.check
    sides: list[tuple[Any, Evaluation | None]] = [("eager", check.eager), ("compile", check.compiled)]
    return [MeasurementRecord.from_evaluation(side, ev) for side, ev in sides if ev is not None]


def candidate_records(result: OptimizeResult) -> list[CandidateRecord]:
    """Every candidate the agent tried (suggested or not), with its source, status, reward and timing."""
    return [
        CandidateRecord(
            source=c.source,
            origin=c.origin,
            status=c.evaluation.status,
            reward=cast(Any, c.reward),
            speedup_vs_eager=c.speedup_vs_eager,
            speedup_vs_compile=c.speedup_vs_compile,
            precision_note=None if c.precision == "exact" else f"uses {c.precision}",
            measurement=MeasurementRecord.from_evaluation("candidate", c.evaluation),
            wall_s=round(c.wall_s, 3),
        )
        for c in result.candidates
    ]


def stored_facts(result: OptimizeResult) -> dict[str, Any]:
    """The analysis facts the learned search policy trains on (agents/policy.py): the rewrites' generated
    code is left out (it is in the candidates' sources); whether each rewrite applied is kept."""
    facts = dict(result.facts)
    if isinstance(facts.get("rewrites"), dict):
        facts["rewrites"] = {
            name: {"applied": bool(r.get("applied"))}
            for name, r in facts["rewrites"].items()
            if isinstance(r, dict)
        }
    facts.pop("epilogue", None)  # its op list is pointwise_tail; the rest is code
    return facts


def run_record(review: ReviewResult, *, trigger: Trigger, pr_number: int | None = None) -> RunRecord:
    finished = datetime.now(UTC)  # the run is stored as it ends: it started wall_s before
    operators = []
    for op in review.operators:
        measurements = [
            MeasurementRecord.from_evaluation(side, ev)
            for side, ev in (("base", op.base), ("head", op.head))
            if ev is not None
        ]
        # The pipeline's strings are the history's Literal values (checked by the database tests).
        verdict = (
            VerdictRecord(cast(Any, op.verdict), op.ratio, op.p_value, op.threshold, op.error)
            if op.verdict
            else None
        )
        change = cast(Any, op.change)
        candidates = []
        transcript: list[Any] = []
        facts = None
        if op.optimization is not None:
            measurements += optimization_measurements(op.optimization)
            candidates = candidate_records(op.optimization)
            transcript = list(op.optimization.transcript)
            facts = stored_facts(op.optimization)
        elif op.best_candidate:  # a run rebuilt from a payload: only the suggested candidate travelled
            candidates = [_suggested_record(op.best_candidate)]
        operators.append(
            OperatorRecord(
                op.name,
                op.path,
                op.spec_hash or "",
                change,
                op.base_spec_hash,
                measurements,
                verdict,
                candidates,
                transcript,
                facts,
            )
        )
    return RunRecord(
        repository=review.repository,
        trigger=trigger,
        head_sha=review.head,
        base_sha=review.base,
        pr_number=pr_number,
        runner=review.fingerprint.host,
        # A stopped run keeps what it measured, but is not a whole review: trends and baselines skip it.
        status="failed" if review.interrupted else "completed",
        error=f"stopped by {review.interrupted} after {len(review.operators)} operator(s)"
        if review.interrupted
        else None,
        started_at=finished - timedelta(seconds=review.wall_s),
        finished_at=finished,
        fingerprint=fingerprint_record(review.fingerprint),
        operators=operators,
        report=review.to_json(),  # what the comment renders from: a re-post is the same comment
    )


def store_review(
    review: ReviewResult,
    url: str | None,
    *,
    trigger: Trigger,
    pr_number: int | None = None,
    fallback_dir: Path,
) -> tuple[int | None, str | None]:
    """(run id, None) when stored; (None, message) when the database failed and the run went to a JSON file."""
    record = run_record(review, trigger=trigger, pr_number=pr_number)
    run_id, problem = _record(record, url, fallback_dir, "run", review.to_json())
    review.run_id = run_id
    return run_id, problem


def _suggested_record(cand: Suggested) -> CandidateRecord:
    return CandidateRecord(
        source=cand.source,
        origin=cand.origin,
        status=cand.status,
        reward=cast(Any, cand.reward),
        speedup_vs_eager=cand.speedup_vs_eager,
        speedup_vs_compile=cand.speedup_vs_compile,
        precision_note=None if cand.precision == "exact" else f"uses {cand.precision}",
    )


def save_unstored(data: dict[str, Any], directory: Path, kind: str) -> Path:
    """When the database cannot be written, the run is kept as JSON so nothing is lost."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{time.time_ns() % 10**6}"
    path = directory / f"unsaved-{kind}-{stamp}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def _record(
    record: RunRecord, url: str | None, fallback_dir: Path, kind: str, data: dict[str, Any]
) -> tuple[int | None, str | None]:
    try:
        history = History.open(url)
        try:
            return history.record_run(record), None
        finally:
            history.close()
    except StorageError as exc:
        return None, f"{exc}; this run was saved to {save_unstored(data, fallback_dir, kind)} instead"


def _optimize_record(
    root: Path,
    fp: Fingerprint,
    operator: OperatorRecord,
    *,
    trigger: Trigger = "local",
    error: str | None = None,
    wall_s: float | None = None,
) -> RunRecord:
    """An optimize-only run of one operator, in the checkout at `root` (failed when `error` says why)."""
    try:
        repository, head = gitrepo.repository_name(root), gitrepo.resolve(root, "HEAD")
    except GitError:  # a plain directory: no commit to name
        repository, head = root.resolve().name, None
    finished = datetime.now(UTC)
    return RunRecord(
        repository=repository,
        trigger=trigger,
        head_sha=head,
        runner=fp.host,
        status="failed" if error else "completed",
        error=error,
        started_at=finished - timedelta(seconds=wall_s or 0.0),
        finished_at=finished,
        fingerprint=fingerprint_record(fp),
        operators=[operator],
    )


def optimize_run(
    result: OptimizeResult, root: Path, *, trigger: Trigger = "local", wall_s: float | None = None
) -> RunRecord:
    """An optimize-only run: the operator's baselines, every candidate and the agent's turns."""
    check = result.check
    operator = OperatorRecord(
        name=check.spec.name,
        path=check.spec.path,
        spec_hash=check.spec.spec_hash(root),
        change="unchanged",
        measurements=optimization_measurements(result),
        candidates=candidate_records(result),
        transcript=list(result.transcript),
        facts=stored_facts(result),
    )
    interrupted = result.stopped_by in ("SIGINT", "SIGTERM")  # what it found is kept, the run is not whole
    error = f"stopped by {result.stopped_by}" if interrupted else None
    return _optimize_record(root, check.fingerprint, operator, trigger=trigger, error=error, wall_s=wall_s)


def store_optimize(
    result: OptimizeResult, root: Path, url: str | None, *, fallback_dir: Path, wall_s: float | None = None
) -> tuple[int | None, str | None]:
    """(run id, None) when stored; (None, message) when the database failed and the run went to a JSON file."""
    data = result.to_json()
    return _record(optimize_run(result, root, wall_s=wall_s), url, fallback_dir, "optimize", data)


def store_failed_optimize(
    spec: OperatorSpec,
    root: Path,
    fingerprint: Fingerprint,
    error: str,
    url: str | None,
    *,
    fallback_dir: Path,
) -> tuple[int | None, str | None]:
    """An optimize run that ended before any candidate (the operator failed, the time ran out): kept as a
    failed run naming the operator, so that a table of many runs shows it."""
    operator = OperatorRecord(spec.name, spec.path, spec.spec_hash(root), "unchanged")
    record = _optimize_record(root, fingerprint, operator, error=error)
    return _record(record, url, fallback_dir, "optimize", {"operator": spec.name, "error": error})
