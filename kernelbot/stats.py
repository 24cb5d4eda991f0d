"""Base against head: is the difference real (statistics) and does it matter (threshold)?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Verdict = Literal["regression", "improvement", "no_change", "ambiguous", "error"]


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(head) / median(base); above 1 means head is slower
    p_value: float  # two-sided Mann-Whitney U
    ratio_ci99: tuple[float, float]  # 99% bootstrap interval of the ratio of medians
    significant: bool  # p < alpha, or the 99% interval excludes 1
    practical: bool  # |ratio - 1| >= threshold
    settled: bool  # False: near the threshold and not significant — more samples could decide it
    verdict: Verdict  # "ambiguous" only when not settled (the caller decides when to stop sampling)


def _ratio_of_medians(base: np.ndarray, head: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(head, axis=axis) / np.median(base, axis=axis)


def compare(
    base: list[float], head: list[float], *, threshold: float = 0.03, alpha: float = 0.01
) -> Comparison:
    """The verdict rule of measurement.md: significant AND at least `threshold` apart."""
    b, h = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if len(b) < 3 or len(h) < 3:
        raise ValueError("need at least 3 samples per side")
    ratio = float(np.median(h) / np.median(b))
    p_value = float(stats.mannwhitneyu(b, h, alternative="two-sided").pvalue)
    boot = stats.bootstrap(
        (b, h),
        _ratio_of_medians,
        n_resamples=2000,
        confidence_level=0.99,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(12345),
    )
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    significant = p_value < alpha or low > 1.0 or high < 1.0
    practical = abs(ratio - 1.0) >= threshold
    if significant and practical:
        return Comparison(
            ratio, p_value, (low, high), True, True, True, "regression" if ratio > 1 else "improvement"
        )
    # Settled as "no change" when the interval lies inside the threshold band, or the effect is significant but small.
    inside_band = low >= 1.0 - threshold and high <= 1.0 + threshold
    settled = inside_band or (significant and not practical)
    return Comparison(
        ratio, p_value, (low, high), significant, practical, settled, "no_change" if settled else "ambiguous"
    )
