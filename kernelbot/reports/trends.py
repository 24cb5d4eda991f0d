"""Change points in an operator's time series: ruptures' PELT finds them, a practical threshold keeps them.

The search itself is ruptures' (PELT, least squares on log times: a step is a ratio), not written here; this
module picks its penalty and drops changes too small to matter. The penalty is BIC's for a Gaussian mean
change, 2·σ²·ln n, with σ estimated robustly from successive differences (a step moves one difference,
not their median), so a series' own noise sets how large a step must be before it counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import Any

MIN_POINTS = 6  # fewer per-commit values than this: no change-point analysis (said so in the report)
MIN_SEGMENT = 3  # a level needs three points: its median then outvotes one outlier
PENALTY_FACTOR = 2.0  # × σ² × ln n (BIC)
SIGMA_FLOOR = 1e-3  # relative noise assumed at least 0.1%: an exactly flat series does not split on rounding
THRESHOLD = 0.05  # a step smaller than 5% of the level before it is not reported


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
    """ruptures is not installed (it is a dependency: a broken install)."""


def _pelt() -> Any:
    try:
        import ruptures
    except ImportError as err:
        raise DetectorMissing("change points need ruptures (pip install ruptures)") from err
    return ruptures.Pelt


def change_points(values: Sequence[float], threshold: float = THRESHOLD) -> list[ChangePoint]:
    """Steps of at least `threshold` that the penalty keeps, in order. Raises DetectorMissing without ruptures."""
    if len(values) < MIN_POINTS:
        return []
    import numpy as np

    pelt = _pelt()
    logs = np.log(np.asarray(values, dtype=float))
    sigma = max(float(np.median(np.abs(np.diff(logs)))) / (0.6745 * math.sqrt(2)), SIGMA_FLOOR)
    penalty = PENALTY_FACTOR * sigma**2 * math.log(len(values))
    ends = pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(logs.reshape(-1, 1)).predict(pen=penalty)
    found = [int(i) for i in ends[:-1]]  # the last "end" is the series' length
    # The penalty is about noise, not size: a real but tiny shift can pass. Drop the smallest step under
    # the threshold and re-measure its neighbours' levels, until every remaining step is large enough.
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
