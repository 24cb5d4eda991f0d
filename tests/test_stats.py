"""The verdict rule on synthetic rounds with known effects (no timing involved)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelbot.stats import compare


def rounds(
    center: float, n: int = 8, per: int = 6, noise: float = 0.01, drift: float = 0.0, seed: int = 0
) -> list[list[float]]:
    """n batches of `per` samples; `drift` moves whole batches (shared by both sides when seeded alike)."""
    rng = np.random.default_rng(seed)
    shifts = 1 + drift * np.random.default_rng(999).standard_normal(n)  # the same drift for base and head
    return [list(center * s * (1 + noise * rng.standard_normal(per))) for s in shifts]


def test_clear_slowdown_is_a_regression() -> None:
    result = compare(rounds(1.0, seed=1), rounds(1.10, seed=2))
    assert result.verdict == "regression"
    assert result.p_value < 0.01 and result.ratio == pytest.approx(1.10, rel=0.02)
    assert result.ratio_ci99[0] > 1.0


def test_clear_speedup_is_an_improvement() -> None:
    assert compare(rounds(1.0, seed=1), rounds(0.8, seed=2)).verdict == "improvement"


def test_significant_but_below_threshold_is_no_change() -> None:
    result = compare(rounds(1.0, n=12, noise=0.002, seed=1), rounds(1.01, n=12, noise=0.002, seed=2))
    assert result.significant and not result.practical
    assert result.verdict == "no_change" and result.settled


def test_same_distribution_is_no_change() -> None:
    assert compare(rounds(1.0, seed=1), rounds(1.0, seed=2)).verdict == "no_change"


def test_drift_shared_by_both_sides_is_not_a_change() -> None:
    """Batches that move together (clocks, neighbours) must not look like a difference between the sides."""
    base, head = rounds(1.0, drift=0.05, noise=0.005, seed=1), rounds(1.0, drift=0.05, noise=0.005, seed=2)
    assert compare(base, head).verdict in ("no_change", "ambiguous")


def test_one_drifting_batch_on_one_side_is_not_a_regression() -> None:
    """Pooled samples would call this (one slow batch of six): per-round statistics do not."""
    base, head = rounds(1.0, noise=0.002, seed=1), rounds(1.0, noise=0.002, seed=2)
    head[3] = [t * 1.5 for t in head[3]]
    assert compare(base, head).verdict != "regression"


def test_noisy_near_threshold_is_ambiguous_until_more_rounds() -> None:
    result = compare(rounds(1.0, n=4, noise=0.08, seed=7), rounds(1.04, n=4, noise=0.08, seed=8))
    assert not result.settled and result.verdict == "ambiguous"
    more = compare(rounds(1.0, n=40, noise=0.08, seed=3), rounds(1.06, n=40, noise=0.08, seed=4))
    assert more.settled and more.verdict == "regression"


def test_threshold_is_configurable() -> None:
    base, head = rounds(1.0, n=10, seed=5), rounds(1.05, n=10, seed=6)
    assert compare(base, head, threshold=0.03).verdict == "regression"
    assert compare(base, head, threshold=0.10).verdict == "no_change"


def test_too_few_rounds_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        compare([[1.0], [1.0]], [[1.0], [1.0], [1.0]])
