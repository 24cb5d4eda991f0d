"""`python -m benchmarks.suite table`: runs resume from the history database, and the table comes from it."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from benchmarks import suite
from kernelbot.history import CandidateRecord, History, MeasurementRecord, OperatorRecord, RunRecord

REPO = Path(__file__).resolve().parents[1]


def _run(
    name: str, eager: float, compile_ms: float | None, cands: list[CandidateRecord], error: str | None = None
) -> RunRecord:
    measurements = [MeasurementRecord("eager", "ok", median_ms=eager)]
    if compile_ms is not None:
        measurements.append(MeasurementRecord("compile", "ok", median_ms=compile_ms))
    op = OperatorRecord(f"benchmarks/realsize/{name}", f"benchmarks/realsize/{name}.py", "h" * 16, "unchanged",
                        measurements=[] if error else measurements, candidates=cands)  # fmt: skip
    end = datetime.now(UTC)
    return RunRecord("kernelbot", "local", None, started_at=end - timedelta(seconds=120.5), finished_at=end,
                     status="failed" if error else "completed", error=error, operators=[op])  # fmt: skip


def _store(out: Path, runs: list[RunRecord]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    history = History.open(suite.db_url(out))
    try:
        for run in runs:
            history.record_run(run)
    finally:
        history.close()


def _args(out: Path, *only: str, stop_after: int = 0) -> argparse.Namespace:
    return argparse.Namespace(
        set="realsize", device="cpu", out=out, time=30, gpus=1, only=list(only), stop_after=stop_after
    )


def test_the_table_is_rendered_from_the_database_with_shares_and_the_geometric_mean(tmp_path: Path) -> None:
    _store(tmp_path, [
        _run("05_matmul_sum_cancel", 2.894, 2.953, [
            CandidateRecord("x", "reduce-before-matmul", "ok", 3, 27.28, 28.69),
            CandidateRecord("y", "tf32x3-matmul", "incorrect", -1),
        ]),
        _run("13_rmsnorm_manual", 1.239, 0.348, [CandidateRecord("z", "fused-elementwise-epilogue", "ok", 2, 1.79, 0.5)]),
        _run("26_vit_like", 6.765, 6.923, [CandidateRecord("w", "channels-last-conv", "ok", 1, 0.98, 0.96)]),
        _run("07_gelu_6p4gb", 3.183, None, [], error="the time limit ran out while the operator itself was timed"),
    ])  # fmt: skip
    rows = {r.name: r for r in suite.rows_from(suite.stored_runs(tmp_path))}
    assert (
        rows["05_matmul_sum_cancel"].best == "reduce-before-matmul"
        and rows["05_matmul_sum_cancel"].reward == 3
    )
    assert rows["05_matmul_sum_cancel"].tried == 2 and rows["05_matmul_sum_cancel"].wall_s == pytest.approx(
        120.5
    )
    assert rows["26_vit_like"].reward is None and rows["26_vit_like"].best == "no candidate with reward >= 2"
    assert rows["07_gelu_6p4gb"].best.startswith("the time limit ran out")
    text = suite.table(list(rows.values()), "t")
    geo = math.exp((math.log(27.28) + math.log(1.79)) / 4)
    assert "4 problems: reward >= 2 on 2 (50%), reward 3 on 1 (25%)" in text and f"{geo:.2f}x" in text
    assert (
        "| 13_rmsnorm_manual | 1.239 | 0.348 | 1 | fused-elementwise-epilogue | 2 | 1.79 | 0.50 | 120.5 |"
        in text
    )


def test_a_second_call_runs_only_what_the_database_does_not_hold(tmp_path: Path) -> None:
    ran: list[str] = []

    def fake_optimize(problem: Path, out: Path, args: argparse.Namespace, gpu: int | None) -> float:
        ran.append(problem.stem)
        if problem.stem == "01_gemm_4096":  # stored, whole
            _store(out, [_run(problem.stem, 2.9, 3.0, [])])
        else:  # stopped by a SIGTERM after its baselines: stored as failed, so it runs again
            _store(out, [_run(problem.stem, 2.9, 3.0, [], error="stopped by SIGTERM")])
        return 1.0

    only = ("01_gemm_4096", "05_matmul_sum_cancel")
    assert suite.run_set(_args(tmp_path, *only), fake_optimize) == [f"benchmarks/realsize/{s}" for s in only]
    assert suite.run_set(_args(tmp_path, *only), fake_optimize) == [
        "benchmarks/realsize/05_matmul_sum_cancel"
    ]
    assert ran == ["01_gemm_4096", "05_matmul_sum_cancel", "05_matmul_sum_cancel"]


def test_stop_after_starts_only_the_problems_that_can_end_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device call's limit: a problem of --time 30 (plus the 60 s margin) that took 35 s leaves too
    little of 120 s for a second one, and 50 s is too little for any."""
    ran: list[str] = []
    clock = [1000.0]
    monkeypatch.setattr(suite, "clock", lambda: clock[0])

    def fake_optimize(problem: Path, out: Path, args: argparse.Namespace, gpu: int | None) -> float:
        ran.append(problem.stem)
        _store(out, [_run(problem.stem, 2.9, 3.0, [])])
        clock[0] += 35.0
        return 35.0

    only = ("01_gemm_4096", "05_matmul_sum_cancel")
    assert suite.run_set(_args(tmp_path, *only, stop_after=120), fake_optimize) == [
        "benchmarks/realsize/01_gemm_4096"
    ]
    assert suite.run_set(_args(tmp_path, *only, stop_after=50), fake_optimize) == []
    assert ran == ["01_gemm_4096"]


def test_an_unknown_set_or_a_missing_database_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no problem set 'nope'"):
        suite.problems("nope")
    with pytest.raises(SystemExit, match=r"history\.db; run `table` without --render-only first"):
        suite.main(["table", "--out", str(tmp_path / "none"), "--render-only"])


@pytest.mark.slow  # ~55 s; the suite's table and resume are tested on stored runs in CI
def test_the_command_runs_a_problem_and_renders_its_table(tmp_path: Path) -> None:
    """End to end on the CPU: one small problem through `kernelbot optimize`, stored, rendered (~30 s)."""
    cmd = [sys.executable, "-m", "benchmarks.suite", "table", "--set", "problems", "--only", "31_small_matmul",
           "--device", "cpu", "--time", "60", "--out", str(tmp_path)]  # fmt: skip
    first = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "| 31_small_matmul |" in (tmp_path / "table.md").read_text()
    [run] = suite.stored_runs(tmp_path)
    assert run.operators[0].name == "benchmarks/problems/31_small_matmul"
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "31_small_matmul:" not in again.stdout  # resumed: nothing ran
    assert len(suite.stored_runs(tmp_path)) == 1
