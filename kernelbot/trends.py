"""Change points in an operator's time series: MongoDB's E-divisive finds them, a practical threshold keeps them."""

# NOTE: the detection itself is signal-processing-algorithms' e_divisive (MongoDB), not written here;
# this module only picks its parameters, makes it deterministic and drops changes too small to matter.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import Any

MIN_POINTS = 6  # fewer per-commit values than this: no change-point analysis (said so in the report)
PVALUE = 0.01  # of E-divisive's permutation test
PERMUTATIONS = 199
THRESHOLD = 0.05  # a step smaller than 5% of the level before it is not reported
SEED = 20250301  # the permutation test draws from numpy's global generator; fixed so reports are stable


@dataclass
class ChangePoint:
    """A step in a series: the value at `index` is the first of the new level."""

    index: int  # position in the series of the first value after the step
    before_ms: float  # median of the segment before
    after_ms: float  # median of the segment after

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms

    @property
    def kind(self) -> str:
        return "regression" if self.ratio > 1 else "improvement"


class DetectorMissing(RuntimeError):
    """signal-processing-algorithms is not installed."""


def _e_divisive() -> Any:
    try:
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
    except ImportError as err:
        raise DetectorMissing(
            "change points need signal-processing-algorithms (pip install signal-processing-algorithms)"
        ) from err
    return e_divisive


def change_points(values: Sequence[float], threshold: float = THRESHOLD) -> list[ChangePoint]:
    """Significant steps of at least `threshold`, in order. Raises DetectorMissing without the library."""
    if len(values) < MIN_POINTS:
        return []
    import numpy as np

    e_divisive = _e_divisive()
    state = np.random.get_state()
    np.random.seed(SEED)
    try:
        found = sorted(int(i) for i in e_divisive(np.asarray(values, dtype=float), PVALUE, PERMUTATIONS))
    finally:
        np.random.set_state(state)
    # E-divisive is significance-only: a real but tiny shift counts. Drop the smallest step under the
    # threshold and re-measure its neighbours' levels, until every remaining step is large enough.
    while True:
        points = _levels(values, found)
        small = [p for p in points if abs(p.ratio - 1) < threshold]
        if not small:
            return points
        found.remove(min(small, key=lambda p: abs(p.ratio - 1)).index)


def _levels(values: Sequence[float], indices: list[int]) -> list[ChangePoint]:
    bounds = [0, *indices, len(values)]
    levels = [median(values[a:b]) for a, b in pairwise(bounds)]
    return [ChangePoint(i, levels[n], levels[n + 1]) for n, i in enumerate(indices)]
