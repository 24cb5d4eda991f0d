"""Base against head: is the difference real (statistics) and does it matter (threshold)?

The independent unit is the *round*: base and head are timed in alternating batches, and the H200 showed
that batches drift apart by more than samples within a batch do (relative spread of batch medians 2–7%
against 1–3% inside a batch; benchmarks/results/2026-11-30-h200). Tests on pooled samples treat that drift
as signal and raised false alarms in 30–70% of A/A trials, so everything here works on rounds.

Two kinds of round-to-round noise were seen, and each defeats one test. A runner whose speed swings for a
while (clocks, a neighbour) moves both batches of a round together: a *paired* test on the per-round ratio
sees through it, an unpaired one does not. A shared VM that slows single batches 2x at random (this
project's CI: batch medians of one 7 µs operator from 5.6 to 12.4 µs in one A/A run) moves one side of a
round alone: the paired ratio then swings 2x and the *unpaired* rank test on batch medians is the one that
still finds a real shift. So both run — Mann-Whitney U on the batch medians and a paired t-test on the
per-round log ratios — each at alpha/2 (Bonferroni), and the reported p is the adjusted one, min(1, 2·min).
The bootstrap interval (whole rounds resampled) only decides when "no change" is settled: as a third
significance test it raised the A/A false-alarm rate to 2–5% under random batch swings.

On a GPU a third kind was seen (H200, benchmarks/results/2026-12-03- and 2026-12-04-h200-verdict): two
processes running the same code differ by a steady 1-5%, fixed for the process's life. Rounds of one process
pair then repeat that pair's offset, and tests on rounds see it as a precise change. `compare_processes`
takes the process as the unit instead (a random effect): the mean log ratio of each base/head process pair,
a t-test and a t-interval over pairs. It needs enough pairs to be decisive (pairs - 1 degrees of freedom).

The threshold is the size of change that must be caught, so the line between "change" and "no change" sits
inside it: a change is called once it is significant and its estimate is at least CALL_FRACTION of the
threshold. A change of the threshold's size is then called as soon as the rounds have measured it to within
half the threshold, where a line at the threshold itself would call a change of exactly that size only half
of the time (on the H200, a planted +3% against a 3% threshold: 12 of 20). Between the line and the
threshold either answer is right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Verdict = Literal["regression", "improvement", "no_change", "ambiguous", "error"]
BOOTSTRAP_RESAMPLES = 2000
CALL_FRACTION = 0.5  # a significant change is called from this share of the threshold on (see above)


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(head samples) / median(base samples); above 1 means head is slower
    p_value: float  # Bonferroni-adjusted: 2 × the smaller of the unpaired and paired round tests' p (≤ 1)
    ratio_ci99: tuple[float, float]  # 99% bootstrap interval of the ratio, resampling whole rounds
    significant: bool  # p < alpha
    practical: bool  # |ratio - 1| >= CALL_FRACTION x threshold
    settled: bool  # False: neither called nor ruled out to within the threshold — more rounds could decide it
    verdict: Verdict  # "ambiguous" only when not settled (the caller decides when to stop sampling)


def _ratio_ci(base: Sequence[Sequence[float]], head: Sequence[Sequence[float]]) -> tuple[float, float]:
    rounds = min(len(base), len(head))
    rng = np.random.default_rng(12345)  # fixed: the same data always gets the same verdict
    picks = rng.integers(0, rounds, size=(BOOTSTRAP_RESAMPLES, rounds))
    if len({len(batch) for batch in (*base[:rounds], *head[:rounds])}) == 1:
        # Batches of one size (the usual case): all resamples at once, as arrays.
        b, h = np.asarray(base[:rounds], dtype=float), np.asarray(head[:rounds], dtype=float)
        ratios = np.median(h[picks].reshape(len(picks), -1), axis=1) / np.median(
            b[picks].reshape(len(picks), -1), axis=1
        )
    else:
        ratios = np.empty(BOOTSTRAP_RESAMPLES)
        for i, pick in enumerate(picks):
            ratios[i] = np.median(np.concatenate([head[j] for j in pick])) / np.median(
                np.concatenate([base[j] for j in pick])
            )
    low, high = np.quantile(ratios, [0.005, 0.995])
    return float(low), float(high)


def _p_value(base: list[float], head: list[float]) -> float:
    unpaired = stats.mannwhitneyu(base, head, alternative="two-sided").pvalue
    rounds = min(len(base), len(head))
    b, h = np.asarray(base[:rounds]), np.asarray(head[:rounds])
    if (b <= 0).any() or (h <= 0).any():  # no ratio to take: the rank test alone
        return float(min(1.0, 2.0 * float(unpaired)))
    log_ratios = np.log(h / b)
    if np.ptp(log_ratios) <= 1e-12 * max(1.0, float(np.abs(log_ratios).max())):
        # Every round gave the same ratio (a t statistic would divide by zero): exactly 1 is no evidence,
        # anything else is as strong as rounds can be.
        paired = 1.0 if abs(float(log_ratios[0])) < 1e-12 else 0.0
    else:
        paired = stats.ttest_1samp(log_ratios, 0.0).pvalue
    return float(min(1.0, 2.0 * min(float(unpaired), float(paired))))


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
    p_value = _p_value([float(np.median(b)) for b in base], [float(np.median(h)) for h in head])
    return _judged(ratio, p_value, _ratio_ci(base, head), threshold=threshold, alpha=alpha)


def _judged(
    ratio: float, p_value: float, ci: tuple[float, float], *, threshold: float, alpha: float
) -> Comparison:
    """The verdict lines, whichever test gave p and the interval."""
    significant = p_value < alpha
    practical = abs(ratio - 1.0) >= CALL_FRACTION * threshold
    if significant and practical:
        verdict: Verdict = "regression" if ratio > 1 else "improvement"
        return Comparison(ratio, p_value, ci, True, True, True, verdict)
    # "No change" only once the interval rules out a change of the threshold's size; a small significant
    # change with a wide interval may still be a large one, and more rounds tell which.
    settled = ci[0] >= 1.0 - threshold and ci[1] <= 1.0 + threshold
    return Comparison(
        ratio, p_value, ci, significant, practical, settled, "no_change" if settled else "ambiguous"
    )


def compare_processes(
    base: Sequence[Sequence[float]],
    head: Sequence[Sequence[float]],
    pairs: Sequence[int],
    *,
    threshold: float = 0.03,
    alpha: float = 0.01,
) -> Comparison:
    """The verdict with the process as a random effect: round r's batches came from process pair pairs[r].

    Each pair's rounds give one number, the mean log ratio of its batch medians (its offset and its share of
    the change); the test and the 99% interval are Student's t over those numbers, so a pair's steady
    offset is noise of the size the pairs show, not signal. The verdict lines are compare's."""
    rounds = min(len(base), len(head), len(pairs))
    if rounds < 3 or any(len(batch) == 0 for batch in (*base[:rounds], *head[:rounds])):
        raise ValueError("need at least 3 non-empty rounds per side")
    logs: dict[int, list[float]] = {}
    for b, h, k in zip(base[:rounds], head[:rounds], pairs[:rounds], strict=True):
        mb, mh = float(np.median(b)), float(np.median(h))
        if mb <= 0 or mh <= 0:
            raise ValueError("batch medians must be positive to take their ratio")
        logs.setdefault(k, []).append(np.log(mh / mb))
    means = np.array([np.mean(v) for v in logs.values()])
    ratio = float(np.exp(means.mean()))
    if len(means) < 2:  # one pair: its offset cannot be told from a change
        return Comparison(ratio, 1.0, (0.0, float("inf")), False, False, False, "ambiguous")
    se = float(means.std(ddof=1)) / np.sqrt(len(means))
    df = len(means) - 1
    if se <= 1e-12 * max(1.0, float(np.abs(means).max())):
        p_value = 1.0 if abs(float(means.mean())) < 1e-12 else 0.0
        low = high = ratio
    else:
        p_value = float(2 * stats.t.sf(abs(float(means.mean())) / se, df))
        half = float(stats.t.ppf(0.995, df)) * se  # 99%, as compare's bootstrap interval
        low, high = float(np.exp(means.mean() - half)), float(np.exp(means.mean() + half))
    return _judged(ratio, p_value, (low, high), threshold=threshold, alpha=alpha)
