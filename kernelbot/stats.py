"""Base against head: is the difference real (statistics) and does it matter (threshold)?

The independent unit is the *round*: base and head are timed in alternating batches, and the H200 showed
that batches drift apart by more than samples within a batch do (relative spread of batch medians 2–7%
against 1–3% inside a batch; benchmarks/results/2026-11-30-h200). Tests on pooled samples treat that drift
as signal and raised false alarms in 30–70% of A/A trials, so both tests here work on rounds: Mann-Whitney U
on the batch medians, and a bootstrap that resamples whole rounds (pairs of batches timed back to back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Verdict = Literal["regression", "improvement", "no_change", "ambiguous", "error"]
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(head samples) / median(base samples); above 1 means head is slower
    p_value: float  # two-sided Mann-Whitney U on the per-round batch medians
    ratio_ci99: tuple[float, float]  # 99% bootstrap interval of the ratio, resampling whole rounds
    significant: bool  # p < alpha, or the 99% interval excludes 1
    practical: bool  # |ratio - 1| >= threshold
    settled: bool  # False: near the threshold and not significant — more rounds could decide it
    verdict: Verdict  # "ambiguous" only when not settled (the caller decides when to stop sampling)


def _ratio_ci(base: Sequence[Sequence[float]], head: Sequence[Sequence[float]]) -> tuple[float, float]:
    rounds = min(len(base), len(head))
    rng = np.random.default_rng(12345)  # fixed: the same data always gets the same verdict
    ratios = np.empty(BOOTSTRAP_RESAMPLES)
    for i, pick in enumerate(rng.integers(0, rounds, size=(BOOTSTRAP_RESAMPLES, rounds))):
        b = np.concatenate([base[j] for j in pick])
        h = np.concatenate([head[j] for j in pick])
        ratios[i] = np.median(h) / np.median(b)
    low, high = np.quantile(ratios, [0.005, 0.995])
    return float(low), float(high)


def compare(
    base: Sequence[Sequence[float]],
    head: Sequence[Sequence[float]],
    *,
    threshold: float = 0.03,
    alpha: float = 0.01,
) -> Comparison:
    """The verdict rule of measurement.md on per-round batches: significant AND at least `threshold` apart."""
    if min(len(base), len(head)) < 3 or any(len(batch) == 0 for batch in (*base, *head)):
        raise ValueError("need at least 3 non-empty rounds per side")
    all_base, all_head = np.concatenate(base), np.concatenate(head)
    ratio = float(np.median(all_head) / np.median(all_base))
    p_value = float(
        stats.mannwhitneyu(
            [np.median(b) for b in base], [np.median(h) for h in head], alternative="two-sided"
        ).pvalue
    )
    low, high = _ratio_ci(base, head)
    significant = p_value < alpha or low > 1.0 or high < 1.0
    practical = abs(ratio - 1.0) >= threshold
    if significant and practical:
        verdict: Verdict = "regression" if ratio > 1 else "improvement"
        return Comparison(ratio, p_value, (low, high), True, True, True, verdict)
    # Settled as "no change" when the interval lies inside the threshold band, or the effect is significant but small.
    inside_band = low >= 1.0 - threshold and high <= 1.0 + threshold
    settled = inside_band or (significant and not practical)
    return Comparison(
        ratio, p_value, (low, high), significant, practical, settled, "no_change" if settled else "ambiguous"
    )
