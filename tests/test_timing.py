"""The timer's sample rules: hidden work against a loaded runner, and what a descheduled sample counts."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from kernelbot.harness import timing
from kernelbot.harness.judge import COPY_TOLERANCE, GROSS, TOLERANCE, Failure, Judge, bound, charge, own_clock
from kernelbot.harness.timing import (
    HIDDEN_WORK_MARGIN_MS,
    MIN_CPU_SHARE,
    Sample,
    counted_ms,
    gpu_sample_verdict,
    measure,
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


def _measure(
    script: list[tuple[float, bool]], max_samples: int, budget_s: float = 60.0, field: str = "descheduled"
) -> Any:
    """The judge's adaptive rule over scripted samples: (seconds, flag) each, the flag set on `field`."""
    samples = iter(script)

    def take() -> Sample:
        seconds, flag = next(samples, (1e-3, False))
        return Sample(seconds * 1e3, **{field: flag})

    return measure(
        take, calls=1, min_samples=max_samples, max_samples=max_samples, target_rse=0.0, budget_s=budget_s
    )


def test_descheduled_samples_are_taken_again() -> None:
    warmup = [(1e-3, False)] * timing.WARMUP_SAMPLES
    script = [*warmup, (1e-3, False), (9e-3, True), (9e-3, True)] + [(1e-3, False)] * 18
    samples = _measure(script, max_samples=20)
    assert samples.descheduled == 2 and samples.times_ms == pytest.approx([1.0] * 20)


def test_past_the_retake_cap_a_descheduled_sample_counts_its_own_time() -> None:
    """The subject says when it was descheduled, and the judge cannot check it: a tenth of the samples at most
    are retaken, so a subject cannot drop its own slow samples to move its median."""
    warmup = [(1e-3, False)] * timing.WARMUP_SAMPLES
    script = warmup + [(9e-3, True)] * 100  # the runner never frees up (or the subject says so)
    samples = _measure(script, max_samples=20)
    assert samples.descheduled == 2  # retaken up to the cap, then recorded as measured (the wall time)
    assert samples.times_ms == pytest.approx([9.0] * 20)


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


def test_the_recorded_samples_are_kept_and_warm_up_and_retaken_ones_are_not() -> None:
    warmup = [(5e-3, False)] * timing.WARMUP_SAMPLES
    samples = _measure([*warmup, (1e-3, False), (9e-3, True), (2e-3, False)], max_samples=2)
    assert [s.ms for s in samples.kept] == pytest.approx([1.0, 2.0])  # the descheduled one was retaken


def _bound(device: str, rows: list[tuple[float, float, float]]) -> list[float]:
    return bound(rows, TOLERANCE[device], GROSS[device])


def test_an_honest_batch_counts_its_claims_whatever_the_judges_clock_jitters() -> None:
    rows = [(10.0, over, 0.0) for over in (0.05, 0.3, 0.1, 0.45, 0.2)]  # a loaded 2-core runner's jitter
    assert _bound("cpu", rows) == pytest.approx([10.0] * 5)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_batch_that_understates_every_sample_is_charged_what_it_hid(device: str) -> None:
    factor, margin = TOLERANCE[device]
    allowed = (factor - 1) * 5.0 + margin
    rows = [(5.0, 4.0 + jitter, 0.0) for jitter in (0.0, 0.1, 0.2)]  # 4 ms a sample left out of the claim
    assert _bound(device, rows) == pytest.approx([5.0 + 4.1 - allowed] * 3)


def test_work_moved_into_the_refresh_is_charged_to_every_sample() -> None:
    rows = [(5.0, 0.0, moved) for moved in (1.9, 2.0, 2.1)]
    assert _bound("cpu", rows) == pytest.approx([7.0] * 3)


def test_one_sample_far_past_the_judges_clock_counts_that_clock() -> None:
    rows = [(5.0, 0.1, 0.0), (5.0, 0.1, 0.0), (0.001, 4.999, 0.0)]  # a lie in one sample of three
    counted = _bound("cpu", rows)
    assert counted[:2] == pytest.approx([5.0, 5.0]) and counted[2] == pytest.approx(5.0)


def test_untimed_steps_are_charged_beyond_their_floor() -> None:
    assert charge(1.0, 1.0, (1.1, 0.2)) == 0.0  # an honest refresh
    assert charge(3.0, 1.0, (1.1, 0.2)) == pytest.approx(1.7)  # work moved into it


class _Outputs:
    """The judge's end of the link with a subject whose answer to `outputs` (one 1 MiB tensor) comes `copy_s`
    after the question."""

    def __init__(self, copy_s: float) -> None:
        self.copy_s = copy_s

    def post(self, command: dict[str, Any]) -> int:
        return 7

    def answer(self, nonce: int, *, max_bytes: int, heard: list[int]) -> tuple[dict[str, Any], list[Any]]:
        time.sleep(self.copy_s)
        heard.append(time.perf_counter_ns())
        spec = {"dtype": "float32", "shape": [512, 512], "strided": False}
        return {"ok": True, "n": nonce, "outputs": [], "tensors": [spec]}, [torch.empty(512, 512)]


@pytest.mark.parametrize("candidate", [True, False])
def test_work_done_before_the_outputs_copy_is_charged_and_refused_when_it_recurs(candidate: bool) -> None:
    """Attacker round 52: native code hooked a C function the subject's copy path calls and computed the
    timed calls' outputs there, after the sample's answer (reward 3). The judge holds the subject's part of
    the copy to its floor (here 2 ms for 1 MiB, a line through trusted copies): an honest copy is charged
    nothing; 9 ms is charged beyond COPY_TOLERANCE, and a candidate that late in 3/4 of its rechecks is refused
    (base and head are PR code, not adversaries of their own verdict: neither)."""
    judge = Judge(_Outputs(copy_s=0.002))  # type: ignore[arg-type]
    judge.candidate = candidate
    line = [(0.0, 1.0), (float(1 << 20), 2.0), (float(8 << 20), 9.0)]
    judge.copy_points = {False: line, True: [(x, 5 * y) for x, y in line]}
    assert [judge._outputs(1)[1] for _ in range(2)] == [0.0] * 2
    judge._refuse_late_copies()  # nothing to refuse
    judge.peer = _Outputs(copy_s=0.009)  # type: ignore[assignment]
    factor, margin = COPY_TOLERANCE["cpu"]
    late = [judge._outputs(1)[1] for _ in range(7)]
    if not candidate:  # PR code's copies are neither charged nor refused
        assert late == [0.0] * 7
        judge._refuse_late_copies()
        return
    assert all(9.0 - factor * 2.0 - margin <= ms <= 9.0 + 50 for ms in late), (
        late
    )  # (a loaded runner sleeps longer)
    with pytest.raises(Failure, match="in 7 of 9 rechecks the subject's copy") as failed:
        judge._refuse_late_copies()
    assert failed.value.status == "rejected"


def test_short_samples_count_the_judges_clock_less_only_a_ping() -> None:
    """On an H100 host a full-length honest sample's overhead (the go floor) exceeded a short sample's: less the
    go floor, a forged claim of ~0 for 0.038 ms of work counted 0.017 ms. A bare round trip (the ping floor)
    is the least any sample's overhead can be, so less that, a forgery counts at least its work."""
    go_floor, ping, work = 0.045, 0.012, 0.038
    for overhead in (0.012, 0.020, 0.045):  # what this sample's round trip really cost: a ping or more
        forged = (0.0, overhead + work - go_floor, 0.0)  # (claimed, over, excess) as Judge._time builds it
        honest = (work, overhead - go_floor, 0.0)
        counted = own_clock([0.0, work], [forged, honest], go_floor, ping)
        assert counted[0] >= work - 1e-12  # the forgery counts its work, at least
        assert counted[1] == pytest.approx(work + overhead - ping)  # honest: its overhead beyond a ping
        assert forged[0] + forged[1] + forged[2] == pytest.approx(work + overhead - go_floor)  # the old rule


def test_what_the_last_sample_left_is_dropped_inside_the_next_samples_window() -> None:
    """Attacker round 37: a weakref callback on a timed output ran when the next `go` dropped the outputs,
    after the refresh and before the window, and computed that sample's products there (on the CPU the judge's
    clock charged more than it saved; on CUDA its margin is wider). The drop is inside the window now, so what
    such a callback does is timed: here a 30 ms sleep in it shows in the sample."""
    import time
    import weakref

    import torch

    timer = timing.Timer("cpu")
    left = [torch.ones(4)]
    weakref.finalize(left[0], time.sleep, 0.03)
    seconds, _ = timer.one_sample(torch.neg, [[torch.ones(4)]], 1, drop=left)
    assert left == [] and seconds >= 0.03, seconds
    seconds, _ = timer.one_sample(torch.neg, [[torch.ones(4)]], 1)  # nothing left: nothing of it timed
    assert seconds < 0.03, seconds
