"""Measure one operator at base and at head: live sandboxes for each side, timed in interleaved rounds (ABBA…).

Each side gets several sandbox processes, used in turn: two processes running the same code can differ by a
steady few percent, and with one process per side that offset would look like a change. Rotating two
processes a side does not average it away on a GPU (H200: 1-5% between processes, fixed for each one's
life), so `thresholds.process_pairs` offers the process as the unit instead: fresh base/head process pairs,
a few rounds each, judged over pairs (run_pairs, stats.compare_processes).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kernelbot.harness.evaluate import Handle, Settings, start_ahead, timing_from
from kernelbot.harness.gpustate import GpuState, Monitor, disturbed
from kernelbot.harness.results import Evaluation
from kernelbot.harness.sandbox import Sandbox
from kernelbot.stats import Comparison, Verdict, compare, compare_processes

SAMPLES_PER_BATCH = 6  # one batch per side per round; rounds alternate which side goes first
ROUNDS = 8  # rounds before the first verdict (the round is the statistical unit: see stats.py)
# Side by side (a reward's rounds) with the run's clock short: the rounds that fit, down to this many, rather
# than none (a wider interval decides less; on an H100 a 3.45x candidate of a 4.9 ms operator lost its reward
# when its 8 rounds did not fit the --time left).
MIN_SIDE_BY_SIDE_ROUNDS = 4
LOOK_STEP = 4  # undecided: this many more rounds before the next look
# Rounds allowed past the first ROUNDS while undecided (thresholds.max_rounds overrides). A GPU round of a
# short operator takes a fraction of a second, and the H200 needed up to ~30 rounds to settle a 3% change
# of a 25 µs kernel; the CPU's rounds are slower and its noise is the machine's, which more rounds do not fix.
EXTRA_ROUNDS = {"cuda": 32, "cpu": 8}
# Rounds taken again because the GPU's clocks moved or another process came onto it, at most this share of
# the rounds allowed: past it the rounds are kept as timed and the result says so.
REPEAT_SHARE = 0.5


def looks(rounds: int, max_extra_rounds: int) -> list[int]:
    """The round counts at which the verdict is looked at: ROUNDS, then every LOOK_STEP more while undecided.

    Looking again until something shows would raise the false-alarm rate with every look, so each look is
    tested at alpha / len(looks) (Bonferroni over looks: a group-sequential rule whose overall false-alarm
    rate stays at most alpha however many of the looks are taken)."""
    last = rounds + max(0, max_extra_rounds)
    return [*range(rounds, last, LOOK_STEP), last]


PROCESSES_PER_SIDE = 2  # sandboxes per side, used in turn round by round
ROUNDS_PER_PAIR = 2  # run_pairs: rounds from each fresh process pair (base-head, then head-base)
PAIR_LOOK_STEP = 8  # run_pairs: the verdict is looked at after every 8 pairs (and after the last)
# run_pairs: a batch gets this share of a side's time budget. Within a process the batches agree closely; the
# spread that matters is between processes, so more pairs buy more than longer batches (a pair's four
# batches take ~0.6 s at the default 5 s, about what opening the next pair takes).
PAIR_BATCH_SHARE = 1 / 32
# run_pairs on a GPU runner: the sandboxes of this many later pairs are started ahead. Their interpreters
# import torch (~3-4 s on the H200) while a pair is loaded, checked and timed (~1.5-2 s), so one pair ahead
# left each pair waiting for the rest of its imports.
AHEAD_PAIRS = 2
# run_pairs: seeds of the check in every pair after the first. The first pair's processes take the full check
# (settings.seeds); later ones run the same code again and are checked on one fresh seed, which still catches
# a process that loads or computes differently, at a fifth of the check's time.
RECHECK_SEEDS = 1


def pair_looks(max_pairs: int) -> list[int]:
    """The pair counts at which run_pairs looks at the verdict, each look at alpha / their number."""
    return [*range(min(PAIR_LOOK_STEP, max_pairs), max_pairs, PAIR_LOOK_STEP), max_pairs]


@dataclass
class PairResult:
    base: Evaluation | None  # None when the operator does not exist at base (added)
    head: Evaluation | None  # None when it does not exist at head (removed)
    comparison: Comparison | None  # None unless both sides ran correctly
    verdict: Verdict | None  # None for added/removed operators (nothing to compare)
    error: str | None  # why a side failed, prefixed with the side
    rounds: int  # interleaved rounds taken (more when the first answer was ambiguous)
    notes: list[str] = field(default_factory=list)  # how it was measured, where that differs from the usual


@dataclass
class Rounds:
    """What run_rounds measured: the comparison (None unless both sides ran), each side's answers, the rounds
    kept, and what was noted on the way (sample mode changes, rounds taken again and why)."""

    comparison: Comparison | None
    answers: dict[str, list[dict[str, Any]]]
    total: int
    repeated: int = 0
    notes: list[str] = field(default_factory=list)


class Ahead:
    """Sandboxes started ahead (evaluate.start_ahead) for the next `depth` of `total` openings of the same
    jobs, one per job an opening, handed out in order; whatever is never taken is closed by `close`."""

    def __init__(self, jobs: dict[str, dict[str, Any]], settings: Settings, depth: int, total: int) -> None:
        self.jobs, self.settings, self.depth, self.total = jobs, settings, depth, total
        self.taken = 0
        self.queue: deque[dict[str, Sandbox | None]] = deque()

    def take(self) -> dict[str, Sandbox | None]:
        """The started sandboxes of the next opening (none for one that was not started ahead)."""
        self.taken += 1
        return self.queue.popleft() if self.queue else {}

    def top_up(self) -> None:
        """Start the openings after the one just taken, up to `depth` of them."""
        while len(self.queue) < self.depth and self.taken + len(self.queue) < self.total:
            self.queue.append({n: start_ahead(j, "operator", self.settings) for n, j in self.jobs.items()})

    def close(self) -> None:
        while self.queue:
            for box in self.queue.popleft().values():
                if box is not None:
                    box.close()


def open_checked(
    job: dict[str, Any], settings: Settings, started: Sandbox | None = None, n_seeds: int | None = None
) -> Handle:
    """A sandbox for `job` (`started`: one started ahead for it), checked once (on `n_seeds` fresh seeds,
    default the settings'); its failure is on the handle."""
    handle = Handle(job, "operator", settings, started=started)
    if handle.failure is None:
        handle.check(n_seeds)
    return handle


def _failure(handles: list[Handle]) -> Evaluation | None:
    return next((h.failure for h in handles if h.failure is not None), None)


def _evaluation(failure: Evaluation | None, answers: list[dict[str, Any]]) -> Evaluation:
    """A side's result: its failure, or its timing over every batch it answered."""
    return failure or Evaluation("operator", "ok", timing=timing_from(answers) if answers else None)


def run_rounds(
    handles: dict[str, list[Handle]],
    settings: Settings,
    *,
    threshold: float,
    alpha: float,
    rounds: int = ROUNDS,
    max_extra_rounds: int = EXTRA_ROUNDS["cpu"],
    graph: bool = True,
    monitor: Monitor | None = None,
    judge: bool = True,
    batch_s: float | None = None,
) -> Rounds:
    """Interleaved timing rounds on open, checked sandboxes {"base": [...], "head": [...]} (an empty list: the
    side does not exist). Rounds 2k and 2k+1 use each side's sandbox k mod their number.

    One batch per side per round, the order alternating (ABBA cancels slow drift), both sides averaging the
    same number of calls per sample, taken the same way: the first batch fixes the calls and, on CUDA with
    `graph`, whether samples replay a captured graph; a side that cannot capture one puts every side back
    on plain calls and the rounds start again. With a `monitor`, a round during which the GPU's clocks
    moved or another process came onto it is taken again (up to REPEAT_SHARE of the rounds allowed).
    Undecided: more rounds, looked at on measure.looks' schedule, before "ambiguous". `judge` False: the
    rounds only (run_pairs judges over pairs). `batch_s`: seconds a batch (default: the time budget over
    `rounds`).
    """
    every = [h for hs in handles.values() for h in hs]
    for h in every:
        h.graph = "auto" if graph else "off"
    answers: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
    budget = max(batch_s or settings.time_budget_s / rounds, 0.05)
    schedule = looks(rounds, max_extra_rounds)
    alpha_per_look = alpha / len(schedule)
    out = Rounds(None, answers, 0)
    target = schedule.pop(0)
    first = monitor.read() if monitor is not None else None
    at_start = first.foreign if first is not None else ()
    if at_start:
        out.notes.append(f"other processes used the GPU throughout (pid {', '.join(map(str, at_start[:3]))})")
    allowed_repeats = int(REPEAT_SHARE * (rounds + max(0, max_extra_rounds)))
    while out.total < target:
        order = ("base", "head") if out.total % 2 == 0 else ("head", "base")
        got: dict[str, dict[str, Any]] = {}
        why: str | None = None
        # Clocks are compared inside a round, after each side's batch: a GPU that settles a little below its
        # first boost slows both sides alike, and taking such rounds again would gain nothing.
        reference: GpuState | None = None
        state: GpuState | None = None
        for side in order:
            side_handles = handles[side]
            if not side_handles or _failure(side_handles) is not None:
                continue
            # A sandbox serves two rounds in a row, one in each order: used in turn round by round, each
            # side's first sandbox would always have gone first and its second always last.
            handle = side_handles[(out.total // 2) % len(side_handles)]
            answer = handle.time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, budget)
            if answer is None:
                continue
            got[side] = answer
            _fix_how(every, answer)
            note = answer.get("sample_note")
            if note and f"samples are plain calls: {note}" not in out.notes:
                out.notes.append(f"samples are plain calls: {note}")
            if monitor is not None and why is None:
                state = monitor.read()
                if state is not None:
                    reference = reference or state
                    why = disturbed(state, reference, at_start)
        if any(a.get("sample_mode") == "calls" for a in got.values()) and any(
            h.graph == "on" for h in every
        ):  # one side could not be captured: all sides on plain calls, and the rounds again
            for h in every:
                h.graph = "off"
            answers["base"].clear()
            answers["head"].clear()
            out.total, out.comparison = 0, None
            schedule = looks(rounds, max_extra_rounds)  # the plain-call rounds get the whole schedule
            target = schedule.pop(0)
            continue
        if why is not None and out.repeated < allowed_repeats:
            out.repeated += 1
            if why.startswith("another process") and state is not None:
                at_start = tuple(sorted({*at_start, *state.foreign}))  # it stays: waiting more will not help
            if out.repeated == 1 or out.repeated == allowed_repeats:
                out.notes.append(
                    f"round taken again: {why}"
                    + (" (last allowed)" if out.repeated == allowed_repeats else "")
                )
            continue
        for side, answer in got.items():
            answers[side].append(answer)
        out.total += 1
        both = all(hs and _failure(hs) is None for hs in handles.values())
        if out.total == target and both and judge:
            out.comparison = compare(
                _batches(answers["base"]),
                _batches(answers["head"]),
                threshold=threshold,
                alpha=alpha_per_look,
            )
            if not out.comparison.settled and schedule:
                target = schedule.pop(0)
    if out.repeated:
        out.notes.append(f"{out.repeated} round(s) taken again for clock changes or other processes")
    if monitor is not None and monitor.note:  # unreadable from the start, or since some round
        out.notes.append(monitor.note)
    return out


def run_pairs(
    jobs: dict[str, dict[str, Any]],
    settings: Settings,
    *,
    threshold: float,
    alpha: float,
    max_pairs: int,
    monitor: Monitor | None = None,
    ahead: bool = False,
) -> tuple[Rounds, dict[str, Evaluation]]:
    """Base against head with the process as the unit: for each pair, a fresh checked sandbox per side (opened
    together), ROUNDS_PER_PAIR interleaved rounds (run_rounds), then closed; the verdict over pairs
    (stats.compare_processes) after every PAIR_LOOK_STEP pairs, each look at alpha / the number of looks,
    until settled. Calls per sample and the sample mode are fixed by the first pair's first batch. Returns
    the rounds and each side's failure, if one failed (the pairs stop there). `ahead`: the next
    AHEAD_PAIRS pairs' sandboxes start (lazily: interpreters and imports, no device) while this pair is
    timed, which leaves each pair little more than its load and check; on a GPU runner only, where the
    host's other cores are idle during a timing (on a 2-core CPU runner the imports would be the timing's
    neighbours)."""
    schedule = pair_looks(max_pairs)
    alpha_per_look = alpha / len(schedule)
    out = Rounds(None, {"base": [], "head": []}, 0)
    pair_of: list[int] = []
    calls: int | None = None
    graph = True
    failures: dict[str, Evaluation] = {}
    waiting = Ahead(jobs, settings, AHEAD_PAIRS if ahead else 0, schedule[-1])
    with ThreadPoolExecutor(max_workers=2) as pool, contextlib.ExitStack() as leftovers:
        leftovers.callback(waiting.close)  # started ahead for pairs that never came
        for k in range(schedule[-1]):
            started = waiting.take()
            opening = {
                side: pool.submit(
                    open_checked, job, settings, started.get(side), RECHECK_SEEDS if k else None
                )
                for side, job in jobs.items()
            }
            opened = {side: future.result() for side, future in opening.items()}
            waiting.top_up()
            try:
                for h in opened.values():
                    h.calls = calls
                if not any(h.failure for h in opened.values()):
                    measured = run_rounds(
                        {side: [h] for side, h in opened.items()}, settings, threshold=threshold,
                        alpha=alpha, rounds=ROUNDS_PER_PAIR, max_extra_rounds=0, graph=graph,
                        monitor=monitor, judge=False, batch_s=settings.time_budget_s * PAIR_BATCH_SHARE,
                    )  # fmt: skip
                # at opening (its check) or during the rounds
                failures = {s: h.failure for s, h in opened.items() if h.failure is not None}
            finally:
                for h in opened.values():
                    h.close()
            if failures:
                break
            if k == 0:
                first = (measured.answers["base"] or measured.answers["head"] or [{}])[0]
                calls = first.get("calls_per_sample")
                graph = first.get("sample_mode") == "graph"
            out.notes.extend(n for n in measured.notes if n not in out.notes)
            out.repeated += measured.repeated
            for side in out.answers:
                out.answers[side].extend(measured.answers[side])
            pair_of.extend([k] * measured.total)
            out.total += measured.total
            if k + 1 == schedule[0] and all(out.answers.values()):
                schedule.pop(0)
                out.comparison = compare_processes(
                    _batches(out.answers["base"]),
                    _batches(out.answers["head"]),
                    pair_of,
                    threshold=threshold,
                    alpha=alpha_per_look,
                )
                if out.comparison.settled or not schedule:
                    break
    out.notes.insert(0, f"judged over {len(set(pair_of))} fresh process pairs")
    return out, failures


def _fix_how(handles: list[Handle], answer: dict[str, Any]) -> None:
    """The first batch's calls per sample and sample mode, for every sandbox's later batches."""
    for other in handles:
        if other.calls is None:
            other.calls = answer["calls_per_sample"]
        if other.graph == "auto":
            other.graph = "on" if answer.get("sample_mode") == "graph" else "off"


def measure_pair(
    base_job: dict[str, Any] | None,
    head_job: dict[str, Any] | None,
    settings: Settings,
    *,
    threshold: float,
    alpha: float,
    rounds: int = ROUNDS,
    max_extra_rounds: int | None = None,
    process_pairs: int = 0,
) -> PairResult:
    """Time base and head of one operator in fresh sandboxes, interleaved, and call the verdict.
    `max_extra_rounds` None: the device's EXTRA_ROUNDS. `process_pairs` > 0: judged over up to that many
    fresh process pairs (run_pairs) when both sides exist."""
    device = (base_job or head_job or {}).get("device", "cpu")
    extra = EXTRA_ROUNDS.get(device, EXTRA_ROUNDS["cpu"]) if max_extra_rounds is None else max_extra_rounds
    monitor = Monitor(settings.gpu, processes=settings.sandbox != "container") if device == "cuda" else None
    if process_pairs and base_job is not None and head_job is not None:
        measured, failures = run_pairs(
            {"base": base_job, "head": head_job}, settings, threshold=threshold, alpha=alpha,
            max_pairs=process_pairs, monitor=monitor, ahead=device == "cuda",
        )  # fmt: skip
        result = _result(
            _evaluation(failures.get("base"), measured.answers["base"]),
            _evaluation(failures.get("head"), measured.answers["head"]),
            None if failures else measured.comparison,
            measured.total,
        )
        result.notes = measured.notes
        return result
    handles: dict[str, list[Handle]] = {"base": [], "head": []}
    for side, job in (("base", base_job), ("head", head_job)):
        if job is None:  # no such side
            continue
        for _ in range(PROCESSES_PER_SIDE):
            handle = open_checked(job, settings)
            handles[side].append(handle)
            if handle.failure is not None:
                break  # a broken side needs no second sandbox
    try:
        measured = run_rounds(
            handles,
            settings,
            threshold=threshold,
            alpha=alpha,
            rounds=rounds,
            max_extra_rounds=extra,
            monitor=monitor,
        )
        base, head = (
            _evaluation(_failure(handles[side]), measured.answers[side]) if handles[side] else None
            for side in ("base", "head")
        )
    finally:
        for handle in (h for hs in handles.values() for h in hs):
            handle.close()
    result = _result(base, head, measured.comparison, measured.total)
    result.notes = measured.notes
    return result


def round_order(names: list[str], r: int) -> list[str]:
    """The order of round r: rotated by one every two rounds, reversed in odd rounds. Over 2n rounds each of n
    subjects goes first twice and last twice (ABBA for two). Rotating every round and reversing every other
    one cancels out for two subjects: the first stayed first in every round, and on a loaded CPU runner an
    unchanged copy of the operator, always timed second, came out 0.67x eager side by side."""
    k = (r // 2) % len(names)
    order = names[k:] + names[:k]
    return order if r % 2 == 0 else order[::-1]


def side_by_side(
    handles: dict[str, Handle], settings: Settings, rounds: int = ROUNDS
) -> dict[str, list[list[float]]] | None:
    """Batches of several live, checked sandboxes timed in the same rounds, in round_order: {name: [batch,
    ...]} of per-call times. None when a sandbox failed meanwhile
    (its handle says why). Each subject keeps the calls per sample its own first batch chose: a candidate
    20x faster than eager, held to eager's one call a sample, would time mostly the harness's own round trip
    (on a loaded 2-core runner, a 0.2 ms rewrite of an 8 ms operator came out only 1.19x faster so)."""
    names = list(handles)
    batches: dict[str, list[list[float]]] = {name: [] for name in names}
    budget = max(settings.time_budget_s / rounds, 0.05)
    calls: dict[str, int | None] = {name: None for name in names}
    longest = 0.0  # the longest round so far, s
    for r in range(rounds):
        began = time.monotonic()
        if (
            settings.deadline is not None
            and r >= MIN_SIDE_BY_SIDE_ROUNDS
            and r % 2 == 0  # each subject first as often as last
            and began + 1.5 * longest > settings.deadline
        ):
            break  # the run's clock: the rounds done, and their wider interval
        for name in round_order(names, r):
            handle = handles[name]
            handle.calls = calls[name]
            answer = handle.time_batch(SAMPLES_PER_BATCH, SAMPLES_PER_BATCH, budget)
            if answer is None:
                return None
            calls[name] = answer["calls_per_sample"]
            batches[name].append(list(answer["times_ms"]))
        longest = max(longest, time.monotonic() - began)
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
