"""The verdict rule on synthetic samples with known effects (no timing involved)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelbot.stats import compare


def samples(center: float, n: int = 40, noise: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(center * (1 + noise * rng.standard_normal(n)))


def test_clear_slowdown_is_a_regression() -> None:
    result = compare(samples(1.0, seed=1), samples(1.10, seed=2))
    assert result.verdict == "regression"
    assert result.p_value < 0.01 and result.ratio == pytest.approx(1.10, rel=0.02)
    assert result.ratio_ci99[0] > 1.0


def test_clear_speedup_is_an_improvement() -> None:
    assert compare(samples(1.0, seed=1), samples(0.8, seed=2)).verdict == "improvement"


def test_significant_but_below_threshold_is_no_change() -> None:
    result = compare(samples(1.0, n=200, noise=0.002, seed=1), samples(1.01, n=200, noise=0.002, seed=2))
    assert result.significant and not result.practical
    assert result.verdict == "no_change" and result.settled


def test_same_distribution_is_no_change() -> None:
    result = compare(samples(1.0, seed=1), samples(1.0, seed=2))
    assert result.verdict == "no_change"


def test_noisy_near_threshold_is_ambiguous_until_more_samples() -> None:
    result = compare(samples(1.0, n=10, noise=0.08, seed=3), samples(1.04, n=10, noise=0.08, seed=4))
    assert not result.settled and result.verdict == "ambiguous"
    more = compare(samples(1.0, n=400, noise=0.08, seed=3), samples(1.06, n=400, noise=0.08, seed=4))
    assert more.settled and more.verdict == "regression"


def test_threshold_is_configurable() -> None:
    base, head = samples(1.0, n=100, seed=5), samples(1.05, n=100, seed=6)
    assert compare(base, head, threshold=0.03).verdict == "regression"
    assert compare(base, head, threshold=0.10).verdict == "no_change"


def test_too_few_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        compare([1.0, 1.0], [1.0, 1.0, 1.0])
