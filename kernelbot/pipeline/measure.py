"""Measure one operator at base and at head: live sandboxes for each side, timed in interleaved rounds (ABBA…).

Each side gets several sandbox processes, used in turn: two processes running the same code can differ by a
steady few percent (memory placement, allocator state), and with one process per side that offset would
look like a change. Rotating processes turns it into round-to-round noise, which the per-round test sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelbot.harness.evaluate import Handle, Settings, timing_from
from kernelbot.harness.results import Evaluation
from kernelbot.stats import Comparison, Verdict, compare

SAMPLES_PER_BATCH = 6  # one batch per side per round; rounds alternate which side goes first
ROUNDS = 8  # rounds before the first verdict (the round is the statistical unit: see stats.py)
LOOK_STEP = 4  # undecided: this many more rounds before the next look


def looks(rounds: int, max_extra_rounds: int) -> list[int]:
    """The round counts at which the verdict is looked at: ROUNDS, then every LOOK_STEP more while undecided.

    Looking again until something shows would raise the false-alarm rate with every look, so each look is
    tested at alpha / len(looks) (Bonferroni over looks: a group-sequential rule whose overall false-alarm
    rate stays at most alpha however many of the looks are taken)."""
    last = rounds + max(0, max_extra_rounds)
    return [*range(rounds, last, LOOK_STEP), last]


PROCESSES_PER_SIDE = 2  # sandboxes per side, used in turn round by round


@dataclass
class PairResult:
    base: Evaluation | None  # None when the operator does not exist at base (added)
    head: Evaluation | None  # None when it does not exist at head (removed)
    comparison: Comparison | None  # None unless both sides ran correctly
    verdict: Verdict | None  # None for added/removed operators (nothing to compare)
    error: str | None  # why a side failed, prefixed with the side
    rounds: int  # interleaved rounds taken (more when the first answer was ambiguous)


def open_checked(job: dict[str, Any] | None, settings: Settings) -> Handle | None:
    """A sandbox for `job` (None: no such side), checked once; its failure is on the handle."""
    if job is None:
        return None
    handle = Handle(job, "operator", settings)
    if handle.failure is None:
        handle.check()
    return handle


def _failure(handles: list[Handle]) -> Evaluation | None:
    return next((h.failure for h in handles if h.failure is not None), None)


def _evaluation(handles: list[Handle], answers: list[dict[str, Any]]) -> Evaluation:
    return _failure(handles) or Evaluation("operator", "ok", timing=timing_from(answers) if answers else None)


def run_rounds(
    handles: dict[str, list[Handle]],
    settings: Settings,
    *,
    threshold: float,
    alpha: float,
    rounds: int = ROUNDS,
    max_extra_rounds: int = ROUNDS,
) -> tuple[Comparison | None, dict[str, list[dict[str, Any]]], int]:
    """Interleaved timing rounds on open, checked sandboxes {"base": [...], "head": [...]} (an empty list: the
    side does not exist); the comparison when both ran. Round r uses each side's sandbox r mod their number.

    One batch per side per round, the order alternating (ABBA cancels slow drift), both sides averaging the
    same number of calls per sample. Undecided near the threshold: more rounds before "ambiguous".
    """
    answers: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
    budget = max(settings.time_budget_s / rounds, 0.05)
    schedule = looks(rounds, max_extra_rounds)
    alpha_per_look = alpha / len(schedule)
    total, target = 0, schedule.pop(0)
    comparison: Comparison | None = None
    while total < target:
        order = ("base", "head") if total % 2 == 0 else ("head", "base")
        for side in order:
            side_handles = handles[side]
            if side_handles and _failure(side_handles) is None:
                handle = side_handles[total % len(side_handles)]
                answer = handle.time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, budget)
                if answer is not None:
                    answers[side].append(answer)
                    for other in (h for hs in handles.values() for h in hs):
                        if other.calls is None:
                            other.calls = answer["calls_per_sample"]
        total += 1
        both = all(hs and _failure(hs) is None for hs in handles.values())
        if total == target and both:
            comparison = compare(
                _batches(answers["base"]),
                _batches(answers["head"]),
                threshold=threshold,
                alpha=alpha_per_look,
            )
            if not comparison.settled and schedule:
                target = schedule.pop(0)
    return comparison, answers, total


def measure_pair(
    base_job: dict[str, Any] | None,
    head_job: dict[str, Any] | None,
    settings: Settings,
    *,
    threshold: float,
    alpha: float,
    rounds: int = ROUNDS,
    max_extra_rounds: int = ROUNDS,
) -> PairResult:
    """Time base and head of one operator in fresh sandboxes, interleaved, and call the verdict."""
    handles: dict[str, list[Handle]] = {"base": [], "head": []}
    for side, job in (("base", base_job), ("head", head_job)):
        for _ in range(PROCESSES_PER_SIDE):
            handle = open_checked(job, settings)
            if handle is not None:
                handles[side].append(handle)
                if handle.failure is not None:
                    break  # a broken side needs no second sandbox
    try:
        comparison, answers, total = run_rounds(
            handles,
            settings,
            threshold=threshold,
            alpha=alpha,
            rounds=rounds,
            max_extra_rounds=max_extra_rounds,
        )
        base = _evaluation(handles["base"], answers["base"]) if handles["base"] else None
        head = _evaluation(handles["head"], answers["head"]) if handles["head"] else None
    finally:
        for handle in (h for hs in handles.values() for h in hs):
            handle.close()
    return _result(base, head, comparison, total)


def side_by_side(
    handles: dict[str, Handle], settings: Settings, rounds: int = ROUNDS
) -> dict[str, list[list[float]]] | None:
    """Batches of several live, checked sandboxes timed in the same rounds, the order rotating each round and
    reversed every other one: {name: [batch, ...]} of per-call times. None when a sandbox failed meanwhile
    (its handle says why). Each subject keeps the calls per sample its own first batch chose: a candidate
    20x faster than eager, held to eager's one call a sample, would time mostly the harness's own round trip
    (on a loaded 2-core runner, a 0.2 ms rewrite of an 8 ms operator came out only 1.19x faster so)."""
    names = list(handles)
    batches: dict[str, list[list[float]]] = {name: [] for name in names}
    budget = max(settings.time_budget_s / rounds, 0.05)
    calls: dict[str, int | None] = {name: None for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order if r % 2 == 0 else reversed(order):
            handle = handles[name]
            handle.calls = calls[name]
            answer = handle.time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, budget)
            if answer is None:
                return None
            calls[name] = answer["calls_per_sample"]
            batches[name].append(list(answer["times_ms"]))
    return batches


def _batches(answers: list[dict[str, Any]]) -> list[list[float]]:
    return [list(answer["times_ms"]) for answer in answers]


def raw_samples(answers: list[dict[str, Any]]) -> list[float]:
    """Every timing sample of a side's answers, in the order taken."""
    return [t for answer in answers for t in answer["times_ms"]]


def _result(
    base: Evaluation | None, head: Evaluation | None, comparison: Comparison | None, rounds: int
) -> PairResult:
    errors = [
        f"{side}: {ev.status}: {ev.reason}"
        for side, ev in (("base", base), ("head", head))
        if ev is not None and not ev.ok
    ]
    if errors:
        return PairResult(base, head, None, "error", "; ".join(errors), rounds)
    if base is None or head is None or comparison is None:
        return PairResult(base, head, None, None, None, rounds)
    return PairResult(base, head, comparison, comparison.verdict, None, rounds)
