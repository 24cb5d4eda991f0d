"""Rewards 2 and 3 timed side by side: a candidate faster than the baselines it was held against (timed at
other moments, torch.compile's cached across runs) is timed again in the same rounds as live eager and
torch.compile sandboxes, and keeps the reward only if it wins there (CUDA Agent's milestones: more than 5%
faster than eager for 2, than both for 3). On a CPU, eager of one operator measured 227 us and then 137 us:
a reward from separate moments is noise."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kernelbot.harness.evaluate import Handle, Settings, out_of_time
from kernelbot.harness.results import Evaluation
from kernelbot.pipeline.measure import side_by_side
from kernelbot.pipeline.results import CheckReport
from kernelbot.stats import compare

REWARD_MARGIN = 0.05  # rewards 2 and 3: more than 5% faster


@dataclass
class Confirmed:
    """A candidate's reward from shared rounds, with the evidence (rounds, wall time, speedups and their 99%
    intervals); or `failure`, where the candidate failed its check when opened again."""

    reward: int
    evidence: dict[str, Any]
    failure: Evaluation | None = None


def confirm_once(
    check: CheckReport,
    job: dict[str, Any],
    limits: Settings,
    candidate: str,
    claimed: int,
    candidate_job: dict[str, Any] | None = None,
) -> Confirmed | None:
    """One candidate with a `claimed` reward of 2 or 3 timed side by side with live, checked eager and (where
    a reward of 3 is at stake: it is slow to build) torch.compile sandboxes. `job`: the operator's, for the
    baselines; `candidate_job`: the candidate's at its precision (default: the same). None when a baseline
    broke or the rounds could not finish (the caller then keeps reward 1: never claimed faster untimed)."""
    subjects = {"eager": check.eager.subject}
    if claimed == 3 and check.compiled is not None and check.compiled.ok:
        subjects["compile"] = "compile"
    baselines: dict[str, Handle] = {}
    try:
        for name, subject in subjects.items():  # checked once already in this run (check_operator)
            baselines[name] = Handle(job, subject, limits)
        if any(h.failure is not None for h in baselines.values()):
            return None
        began = time.monotonic()
        with Handle(candidate_job or job, "candidate", limits, candidate=candidate) as handle:
            if handle.failure is None:
                handle.check()
            if handle.failure is not None and out_of_time(handle.failure.status, handle.failure.reason):
                return None  # the run's clock, not the candidate: it keeps its check (seen on an H100)
            if handle.failure is not None:  # it passed once and not now: wrong on these fresh inputs
                return Confirmed(-1, {}, handle.failure)
            batches = side_by_side({**baselines, "candidate": handle}, limits)
            failure = (
                handle.failure
            )  # a sandbox that failed in the rounds: the candidate's own, unless the clock
            if batches is None and failure is not None and not out_of_time(failure.status, failure.reason):
                return Confirmed(-1, {}, failure)
    finally:
        for baseline in baselines.values():
            baseline.close()
    if batches is None:
        return None
    evidence: dict[str, Any] = {
        "rounds": len(batches["candidate"]),
        "wall_s": round(time.monotonic() - began, 2),
    }
    beats = {}
    for base, times in batches.items():
        if base != "candidate":
            c = compare(times, batches["candidate"], threshold=1 - 1 / (1 + REWARD_MARGIN))
            evidence[f"speedup_vs_{base}"] = 1 / c.ratio
            evidence[f"speedup_vs_{base}_ci99"] = [1 / c.ratio_ci99[1], 1 / c.ratio_ci99[0]]
            beats[base] = c.verdict == "improvement" and c.ratio < 1 / (1 + REWARD_MARGIN)
    # A torch.compile baseline that failed cannot be beaten, only skipped: level 2 (results.reward). One left
    # out of the rounds (no reward 3 at stake) caps the reward at what was asked: 2.
    return Confirmed(1 if not beats["eager"] else 3 if beats.get("compile") else 2, evidence)
