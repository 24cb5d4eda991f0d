"""The typed results contract: a review written as JSON (what the history keeps as the run's report) rebuilds
to the same object, and everything rendered from it (comment, payload) comes out the same."""

from __future__ import annotations

import json

import pytest

from kernelbot.errors import StorageError
from kernelbot.fingerprint import collect
from kernelbot.github.payload import build_payload
from kernelbot.harness.results import Evaluation, Timing
from kernelbot.pipeline.results import (
    CandidateResult,
    CheckReport,
    OperatorResult,
    OptimizeResult,
    ReviewResult,
    Suggested,
)
from kernelbot.spec import OperatorSpec


def _ev(ms: float, status: str = "ok") -> Evaluation:
    timing = Timing.from_samples(
        [ms * (1 + 0.01 * (i % 3)) for i in range(12)], 4, "rse", sm_clock_mhz=[1980, 1980]
    )
    return Evaluation("operator", status, max_abs_err=1e-6, fp64_err=2e-8, fp64_ref_err=1e-8, timing=timing)


def _review() -> ReviewResult:
    slower = OperatorResult(
        "ops/mm", "ops/mm.py", "modified", ["forward changed"], 0.03, base=_ev(2.0), head=_ev(2.6)
    )
    slower.ratio, slower.p_value, slower.ratio_ci99, slower.verdict = 1.3, 0.0021, (1.27, 1.33), "regression"
    slower.best_candidate = Suggested(
        origin="tf32x3-matmul", description="three TF32 products", precision="tf32x3", source="class ModelNew: ...\n",
        status="ok", reason="", reward=3, speedup_vs_eager=1.66, speedup_vs_compile=1.85, median_ms=1.57,
        fp64_ratio=0.8, wall_s=7.35, side_by_side={"rounds": 8, "speedup_vs_eager_ci99": [1.6, 1.7]},
        source_path="/tmp/c/00-tf32x3-matmul.py",
    )  # fmt: skip
    slower.notes.append("compile-max-autotune timed out")
    broken = OperatorResult(
        "ops/gelu", "ops/gelu.py", "modified", ["diff"], 0.03, base=_ev(1.0), head=_ev(1.0, "crashed")
    )
    broken.verdict, broken.error = "error", "head crashed: CUDA error"
    late = OperatorResult("ops/new", "ops/new.py", "added", ["new file"], 0.03, stopped_by="time")
    return ReviewResult(
        "octo-org/kernels", "b" * 40, "c" * 40, collect("cpu"), [slower, broken, late], run_id=12,
        warnings=["one operator was not measured"], time_budget_s=540.0, wall_s=301.25,
    )  # fmt: skip


def test_a_review_written_as_json_rebuilds_to_the_same_object_and_the_same_comment() -> None:
    review = _review()
    data = json.loads(json.dumps(review.to_json()))  # through text, as the history stores it
    rebuilt = ReviewResult.from_json(data)
    assert rebuilt.to_json() == data
    assert ReviewResult.from_json(rebuilt.to_json()) == rebuilt  # a fixed point: nothing drifts on re-posts
    assert rebuilt.markdown() == review.markdown()
    [slower, broken, late] = rebuilt.operators
    assert slower.p_value == 0.0021 and slower.ratio_ci99 == (1.27, 1.33)
    assert slower.best_candidate is not None and slower.best_candidate.precision == "tf32x3"
    assert slower.best_candidate.side_by_side == {"rounds": 8, "speedup_vs_eager_ci99": [1.6, 1.7]}
    assert (
        slower.head is not None
        and slower.head.timing is not None
        and slower.head.timing.calls_per_sample == 4
    )
    assert (
        rebuilt.broken_at_head == [broken] and rebuilt.regressions == [slower] and late.stopped_by == "time"
    )
    assert rebuilt.fingerprint == review.fingerprint and rebuilt.summary() == review.summary()


def test_the_payload_from_a_rebuilt_review_is_the_payload_from_the_live_one() -> None:
    review = _review()
    rebuilt = ReviewResult.from_json(json.loads(json.dumps(review.to_json())))
    kw = {"pr": 3, "fail_on_regression": True, "pointer": "see the artifact", "read_head": lambda _p: None}
    live, _ = build_payload(review, **kw)  # type: ignore[arg-type]
    again, _ = build_payload(rebuilt, **kw)  # type: ignore[arg-type]
    assert again == live and live.check_conclusion == "failure" and len(live.annotations) == 2
    assert live.comment.count("class ModelNew") == 1  # each kernel's source once


def test_a_report_of_a_newer_schema_is_refused_and_an_older_one_rebuilds() -> None:
    data = _review().to_json()
    with pytest.raises(StorageError, match="schema 2"):
        ReviewResult.from_json({**data, "schema_version": 2})
    older = {k: v for k, v in data.items() if k not in ("interrupted", "time_budget_s")}  # keys added since
    assert ReviewResult.from_json({**older, "schema_version": 0}).markdown() == _review().markdown()


def _optimize() -> OptimizeResult:
    from kernelbot.config import OperatorDecl
    from kernelbot.history.records import TurnRecord

    decl = OperatorDecl(name="fused", callable="ops/f.py:fused", inputs="ops/f.py:inputs", shapes=[[64, 64]])
    spec = OperatorSpec("fused", "declared", "ops/f.py", decl=decl, sources=("csrc/f.cu",))
    eager, compiled = _ev(2.0), _ev(1.5)
    check = CheckReport(spec, collect("cpu"), eager, eager, compiled)
    winner = CandidateResult(
        "tf32x3-matmul", "three TF32 products", "tf32x3", "class ModelNew: ...\n", "/tmp/c/00.py",
        _ev(0.9), 3, 2.22, 1.67, wall_s=7.35, side_by_side={"rounds": 8}, provisional_reward=None,
    )  # fmt: skip
    loser = CandidateResult(
        "bf16-autocast", "bf16", "bf16", "x = 1\n", "/tmp/c/01.py", _ev(1.0, "incorrect"), -1, None, None
    )
    turn = TurnRecord(0, "assistant", "try tf32x3", tool_name="compile", tool_args={"a": 1}, candidate=0)
    return OptimizeResult(
        check, "search", [winner, loser], skipped={"cuda-graph-capture": "not launch-bound"},
        facts={"ops": ["matmul"], "eager_ms": 2.0}, stopped_by="time", phases_s={"baselines": 3.5},
        best_path="/tmp/out/fused_kernelbot.py", transcript=[turn], agent_summary={"model": "m"},
    )  # fmt: skip


def test_an_optimization_and_its_check_rebuild_from_their_json() -> None:
    result = _optimize()
    data = json.loads(json.dumps(result.to_json()))  # as `kernelbot optimize --json` writes it
    rebuilt = OptimizeResult.from_json(data)
    assert rebuilt.to_json() == data
    assert OptimizeResult.from_json(rebuilt.to_json()) == rebuilt
    assert rebuilt.check.spec == result.check.spec  # the declaration and its CUDA sources too
    assert rebuilt.best is not None and rebuilt.best.source == "class ModelNew: ...\n"
    assert rebuilt.best.precision == "tf32x3" and rebuilt.best.side_by_side == {"rounds": 8}
    assert rebuilt.candidates[1].evaluation.status == "incorrect"
    assert rebuilt.transcript[0].tool_args == {"a": 1} and rebuilt.facts["ops"] == ["matmul"]
    check = CheckReport.from_json(json.loads(json.dumps(result.check.to_json())))
    assert check.to_json() == result.check.to_json() and check.reward is None
    with pytest.raises(StorageError, match=r"an optimization result of schema 99, newer"):
        OptimizeResult.from_json({**data, "schema_version": 99})


def test_text_from_code_under_review_cannot_reshape_the_comment() -> None:
    """An error's tail, a note or a runner's label may come from PR code (a shard's artifact, a subject's
    output): it stays one line of text; a kernel's source cannot close its code fence."""
    from kernelbot.render import STICKY_MARKER

    review = _review()
    slower, broken, _ = review.operators
    broken.error = f"head crashed: </details><img src=x onerror=1>\n{STICKY_MARKER}\n# Approved"
    review.warnings.append("<script>x</script>")
    assert slower.best_candidate is not None
    slower.best_candidate.source = "x = 1\n```\n<img src=y>\n````\n"
    body = review.markdown()
    assert body.count(STICKY_MARKER) == 1 and "<img src=x" not in body and "<script>" not in body
    assert "\n# Approved" not in body  # folded into the error's line
    assert "`````python\nx = 1\n```\n<img src=y>\n````\n\n`````" in body  # the source verbatim, fenced by 5


def test_each_operator_of_how_it_was_measured_starts_its_own_line() -> None:
    """Rounds and the sample mode join each operator's line; the next one still starts a line of its own."""
    review = _review()
    slower, broken, _ = review.operators
    slower.rounds, broken.rounds = 24, 8
    assert slower.head is not None and slower.head.timing is not None
    slower.head.timing.sample_mode = "graph"
    text = review.markdown()
    lines = text.splitlines()
    mm = next(line for line in lines if line.startswith("- `ops/mm` (`ops/mm.py`)"))
    assert "head 12 samples × 4 calls (one CUDA graph replay each)" in mm and mm.endswith("24 rounds")
    assert any(line.startswith("- `ops/gelu` (") and line.endswith("8 rounds") for line in lines)
    rebuilt = ReviewResult.from_json(json.loads(json.dumps(review.to_json())))
    assert rebuilt.operators[0].rounds == 24 and rebuilt.markdown() == text
