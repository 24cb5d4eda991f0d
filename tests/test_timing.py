"""The timer's sample rules: hidden work against a loaded runner, and what a descheduled sample counts."""

from __future__ import annotations

from typing import Any

import pytest

from kernelbot.harness import timing
from kernelbot.harness.timing import (
    HIDDEN_WORK_MARGIN_MS,
    MIN_CPU_SHARE,
    Timer,
    counted_ms,
    gpu_sample_verdict,
)


@pytest.mark.parametrize(
    ("wall_ms", "gpu_ms", "cpu_share", "verdict"),
    [
        (1.05, 1.0, 1.0, "ok"),  # host latency
        (1.5 + HIDDEN_WORK_MARGIN_MS, 1.0, 0.1, "ok"),  # at the margin, whatever the CPU did
        (5.0, 1.0, 0.99, "hidden"),  # the stream saw a fifth; the process spun or computed the rest
        (5.0, 1.0, MIN_CPU_SHARE, "hidden"),
        (5.0, 1.0, 0.3, "descheduled"),  # off the CPU for most of it: a loaded runner
    ],
)
def test_a_gpu_sample_is_hidden_work_only_if_the_process_held_the_cpu(
    wall_ms: float, gpu_ms: float, cpu_share: float, verdict: str
) -> None:
    assert gpu_sample_verdict(wall_ms, gpu_ms, cpu_share) == verdict


class ScriptedTimer(Timer):
    """A CPU timer whose samples take scripted times and are scripted as descheduled or not."""

    def __init__(self, script: list[tuple[float, bool]]) -> None:
        super().__init__("cpu")
        self.script = iter(script)

    def one_sample(self, fn: Any, input_sets: list[list[Any]], calls: int) -> tuple[float, list[Any]]:
        seconds, self.last_descheduled = next(self.script, (1e-3, False))
        return seconds, [None] * len(input_sets)


def _measure(timer: Timer, max_samples: int, budget_s: float = 60.0) -> Any:
    samples, _ = timer.measure(
        lambda: None, [[]], lambda sets: None, calls=1, min_samples=max_samples,
        max_samples=max_samples, target_rse=0.0, budget_s=budget_s,
    )  # fmt: skip
    return samples


def test_descheduled_samples_are_taken_again() -> None:
    warmup = [(1e-3, False)] * timing.WARMUP_SAMPLES
    script = [*warmup, (1e-3, False), (9e-3, True), (9e-3, True), (1e-3, False), (1e-3, False)]
    samples = _measure(ScriptedTimer(script), max_samples=3)
    assert samples.descheduled == 2 and samples.times_ms == pytest.approx([1.0, 1.0, 1.0])


def test_past_the_retake_cap_a_descheduled_sample_counts_its_own_time() -> None:
    warmup = [(1e-3, False)] * timing.WARMUP_SAMPLES
    script = warmup + [(9e-3, True)] * 100  # the runner never frees up
    samples = _measure(ScriptedTimer(script), max_samples=2)
    assert samples.descheduled == 4 * 2  # retaken up to the cap, then recorded as measured (the wall time)
    assert samples.times_ms == pytest.approx([9.0, 9.0])


@pytest.mark.parametrize(
    ("wall_ms", "gpu_ms", "cpu_share", "counted"),
    [
        (1.03, 1.0, 1.0, 1.0),  # within the host latency: the event time
        (1.0, 0.35, 1.0, 0.95),  # a side stream inside the verdict's margin: the wall time less the latency
        (5.0, 1.0, 1.0, 5.0),  # hidden work counts whole, as well as being held against the subject
        (5.0, 1.0, 0.3, 5.0),  # descheduled
    ],
)
def test_a_gpu_sample_never_counts_less_than_its_wall_time_less_the_host_latency(
    wall_ms: float, gpu_ms: float, cpu_share: float, counted: float
) -> None:
    verdict = gpu_sample_verdict(wall_ms, gpu_ms, cpu_share)
    assert counted_ms(wall_ms, gpu_ms, 0.05, verdict) == pytest.approx(counted)


def test_samples_count_those_bounded_by_their_wall_time() -> None:
    class WallBound(ScriptedTimer):
        def one_sample(self, fn: Any, input_sets: list[list[Any]], calls: int) -> tuple[float, list[Any]]:
            seconds, self.last_wall_bound = next(self.script, (1e-3, False))
            return seconds, [None] * len(input_sets)

    warmup = [(1e-3, True)] * timing.WARMUP_SAMPLES  # warm-up samples are not tallied
    samples = _measure(WallBound([*warmup, (1e-3, False), (2e-3, True), (1e-3, False)]), max_samples=3)
    assert samples.wall_bound == 1 and samples.times_ms == pytest.approx([1.0, 2.0, 1.0])
