"""measure's round schedules, with stand-in sandboxes (the timing itself is tests/test_timing.py's)."""

from __future__ import annotations

from typing import Any

from kernelbot.harness.evaluate import Settings
from kernelbot.pipeline.measure import looks, side_by_side


class Stub:
    """A sandbox that calibrates to `calibrated` calls a sample and records what it was asked to use."""

    def __init__(self, calibrated: int, ms: float) -> None:
        self.calibrated, self.ms, self.calls, self.asked = calibrated, ms, None, []

    def time_batch(self, *_: Any) -> dict[str, Any]:
        self.asked.append(self.calls)
        used = self.calls or self.calibrated
        return {"calls_per_sample": used, "times_ms": [self.ms] * 6}


def test_each_subject_side_by_side_keeps_its_own_calls_per_sample() -> None:
    """A rewrite 20x faster than eager is not held to eager's one call a sample."""
    eager, candidate = Stub(1, 8.0), Stub(40, 0.2)
    batches = side_by_side({"eager": eager, "candidate": candidate}, Settings(), rounds=4)  # type: ignore[dict-item]
    assert batches == {"eager": [[8.0] * 6] * 4, "candidate": [[0.2] * 6] * 4}
    assert eager.asked == [None, 1, 1, 1] and candidate.asked == [None, 40, 40, 40]


def test_looks_come_every_four_rounds_up_to_the_extra_allowed() -> None:
    assert looks(8, 8) == [8, 12, 16] and looks(8, 0) == [8] and looks(8, 5) == [8, 12, 13]
