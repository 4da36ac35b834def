"""The paired bootstrap of `healthbench.scoring.paired`, checked against a plain-Python reference."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from healthbench.scoring.multiplicity import holm
from healthbench.scoring.paired import (
    BETTER,
    NO_DIFFERENCE,
    WORSE,
    PairedDifference,
    paired_bootstrap,
    paired_resample_means,
    paired_t_p,
    significance_level,
    student_t_two_sided,
    verdict,
)
from healthbench.scoring.stats import BootstrapOptions


def ci_bounds(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """The k-th smallest and k-th largest of B values, k = ceil(B (1 - confidence) / 2)."""
    ordered = sorted(values)
    k = math.ceil(round(len(ordered) * (1 - confidence) / 2, 9))
    return ordered[k - 1], ordered[-k]


def reference(
    a: list[float], b: list[float], seed: int, n_resamples: int
) -> tuple[float, float, float, float]:
    """The definition: the same n indices drawn for both runs, unclipped means, their difference."""
    rng = np.random.default_rng(seed)
    n = len(a)
    indices = rng.integers(0, n, size=(n_resamples, n)).tolist()  # numpy's stream, plain Python after
    diffs = []
    for draw in indices:
        diffs.append(sum(b[i] for i in draw) / n - sum(a[i] for i in draw) / n)
    below = sum(d <= 0 for d in diffs) / n_resamples
    above = sum(d >= 0 for d in diffs) / n_resamples
    diff = sum(b) / n - sum(a) / n
    return diff, *ci_bounds(diffs), min(1.0, 2 * min(below, above))


def test_agrees_with_the_definition_within_monte_carlo_noise() -> None:
    rng = np.random.default_rng(5)
    a = rng.uniform(-0.2, 1.0, 1500).tolist()
    b = [x + d for x, d in zip(a, rng.normal(0.02, 0.1, 1500).tolist(), strict=True)]
    ours = paired_bootstrap(a, b, BootstrapOptions(n_resamples=2000, seed=9))
    diff, low, high, p = reference(a, b, 9, 2000)
    assert ours.n == 1500
    assert ours.difference == pytest.approx(diff, abs=1e-12)
    sd = (high - low) / 3.92  # the differences' spread; percentiles of 2,000 resamples move ~0.05 sd
    assert ours.ci_lower == pytest.approx(low, abs=0.15 * sd)
    assert ours.ci_upper == pytest.approx(high, abs=0.15 * sd)
    assert ours.p_value == pytest.approx(p, abs=0.01)


def test_paired_resamples_are_exact() -> None:
    """Each resample draws the same indices in both runs: the joint distribution of the two sums
    equals the one enumerated over all n^n index draws (chi-square on 150,000 resamples)."""
    a, b = [0.0, 0.5, 1.0, 0.5, 0.25], [0.25, 0.5, 0.75, 1.0, 0.25]
    n, total = len(a), 150_000
    exact: Counter[tuple[int, int]] = Counter()
    for draw in itertools.product(range(n), repeat=n):  # sums on a grid of 1/4: count in quarters
        exact[round(4 * sum(a[i] for i in draw)), round(4 * sum(b[i] for i in draw))] += 1
    means_a, means_b = paired_resample_means(a, b, n_resamples=total, seed=2)
    observed = Counter(
        zip(
            np.rint(4 * n * means_a).astype(int).tolist(),
            np.rint(4 * n * means_b).astype(int).tolist(),
            strict=True,
        )
    )
    assert set(observed) <= set(exact)
    big = [key for key, c in exact.items() if c / n**n * total >= 10]
    expected = [exact[key] / n**n * total for key in big]
    counts = [observed[key] for key in big]
    expected.append(total - sum(expected))
    counts.append(total - sum(counts))
    chi2 = sum((o - e) ** 2 / e for o, e in zip(counts, expected, strict=True) if e > 0)
    assert chi2 < len(big) + 6 * math.sqrt(2 * len(big)) + 10, (chi2, len(big))


def test_reproducible_for_a_seed_and_different_across_seeds() -> None:
    a, b = [0.1, 0.5, 0.9, 0.3, 0.7], [0.2, 0.4, 1.0, 0.6, 0.5]
    assert paired_bootstrap(a, b, BootstrapOptions(seed=3)) == paired_bootstrap(
        a, b, BootstrapOptions(seed=3)
    )
    assert (
        paired_bootstrap(a, b, BootstrapOptions(seed=3)).ci_lower
        != paired_bootstrap(a, b, BootstrapOptions(seed=4)).ci_lower
    )


def test_pairs_are_resampled_together() -> None:
    """B is A plus 0.01 on every conversation, and conversations vary a lot: unpaired, the 95% CI
    would be about +-0.08 wide; paired, the difference is exactly 0.01 in every resample."""
    a = np.linspace(0.0, 0.98, 101)
    result = paired_bootstrap(a, a + 0.01, BootstrapOptions(n_resamples=500, seed=0))
    assert result.ci_lower == pytest.approx(0.01) and result.ci_upper == pytest.approx(0.01)
    assert result.p_value == 0.0


def test_identical_runs_have_no_difference() -> None:
    a = [0.2, 0.4, 0.9]
    result = paired_bootstrap(a, a, BootstrapOptions(n_resamples=100, seed=0))
    assert (result.difference, result.ci_lower, result.ci_upper, result.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert verdict(result) == NO_DIFFERENCE


def test_scores_are_clipped_like_simple_evals_but_the_test_is_not() -> None:
    result = paired_bootstrap([-0.5, -0.3], [0.2, 0.4], BootstrapOptions(n_resamples=10, seed=0))
    assert (result.mean_a, result.mean_b) == (0.0, pytest.approx(0.3))
    assert result.difference == pytest.approx(0.7)  # unclipped means: 0.3 - (-0.4)
    assert result.clipped


def test_clipping_creates_no_ties() -> None:
    """Both runs score below 0 on average and B is better on every conversation: clipped, every
    resampled difference would be 0 (p = 1); on the unclipped means the difference is clear."""
    a = np.linspace(-0.9, -0.3, 40)
    result = paired_bootstrap(a, a + 0.1, BootstrapOptions(n_resamples=200, seed=1))
    assert result.difference == pytest.approx(0.1)
    assert result.ci_lower == pytest.approx(0.1) and result.p_value == 0.0
    assert result.clipped and verdict(result) == BETTER
    inside = paired_bootstrap([0.2, 0.4, 0.6], [0.3, 0.5, 0.6], BootstrapOptions(n_resamples=50, seed=0))
    assert not inside.clipped


def test_p_below_alpha_exactly_when_the_ci_excludes_0() -> None:
    """Runs with scores near 0 (where clipping used to bind): p < 0.05 <=> the 95% CI excludes 0."""
    rng = np.random.default_rng(11)
    for sim in range(60):
        a = rng.normal(0.02, 0.2, 35)
        b = a + rng.normal(rng.choice([0.0, 0.05]), 0.1, 35)
        r = paired_bootstrap(a, b, BootstrapOptions(n_resamples=400, seed=sim))
        assert (r.p_value < 0.05) == (r.ci_lower > 0 or r.ci_upper < 0), (sim, r)


def test_no_resamples_gives_nan_interval() -> None:
    result = paired_bootstrap([0.1, 0.2], [0.3, 0.4], BootstrapOptions(n_resamples=0))
    assert result.difference == pytest.approx(0.2)
    assert np.isnan(result.ci_lower) and np.isnan(result.p_value)


def test_bad_shapes_are_errors() -> None:
    with pytest.raises(ValueError, match="one length"):
        paired_bootstrap([0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="no common conversation"):
        paired_bootstrap([], [])


@pytest.mark.parametrize(
    ("difference", "low", "high", "margin", "expected"),
    [
        (0.05, 0.01, 0.09, 0.0, BETTER),
        (0.05, 0.01, 0.09, 0.05, NO_DIFFERENCE),  # not more than the margin
        (0.05, -0.01, 0.09, 0.0, NO_DIFFERENCE),  # CI includes 0
        (-0.03, -0.05, -0.01, 0.02, WORSE),
        (-0.03, -0.05, -0.01, 0.03, NO_DIFFERENCE),
    ],
)
def test_verdict_at_a_margin(
    difference: float, low: float, high: float, margin: float, expected: str
) -> None:
    result = PairedDifference(100, 0.5, 0.5 + difference, difference, low, high, 0.01, 0.01)
    assert verdict(result, margin) == expected


def test_verdict_on_an_adjusted_p_value() -> None:
    result = PairedDifference(100, 0.5, 0.55, 0.05, 0.01, 0.09, 0.01, 0.01)
    assert verdict(result) == BETTER
    assert verdict(result, p_value=0.04) == BETTER
    assert verdict(result, p_value=0.06) == NO_DIFFERENCE  # Holm-adjusted above alpha: no verdict


def test_holm_against_hand_computed_values() -> None:
    # sorted: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> running max 0.06)
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # NaN is no test: the family is the three others; 0.5 x 1 = 0.5 but the running max keeps 0.6
    assert holm([0.2, float("nan"), 0.5, 0.001]) == pytest.approx(
        [0.4, float("nan"), 0.5, 0.003], nan_ok=True
    )
    assert holm([0.4, 0.6]) == [0.8, 0.8]  # min(1, 2 x 0.4), then max(0.8, 0.6)
    assert holm([0.7, 0.9]) == [1.0, 1.0]
    assert holm([]) == []
    assert np.isnan(holm([float("nan")])[0])  # no test in the family


def test_false_positive_rate_under_the_null() -> None:
    """1,000 simulated pairs of runs with no true difference (conversations of varied difficulty,
    both runs equally good): p < 0.05 in 3-7% of them."""
    rng = np.random.default_rng(2026)
    rejected = 0
    for sim in range(1000):
        difficulty = rng.beta(2, 2, 80)
        a = np.clip(difficulty + rng.normal(0, 0.15, 80), -0.2, 1)
        b = np.clip(difficulty + rng.normal(0, 0.15, 80), -0.2, 1)
        rejected += paired_bootstrap(a, b, BootstrapOptions(n_resamples=1000, seed=sim)).p_value < 0.05
    assert 30 <= rejected <= 70, rejected


@pytest.mark.parametrize(
    ("t", "df", "p"),  # two-sided p of Student's t, from printed tables
    [(2.045230, 29, 0.05), (3.169273, 10, 0.01), (1.0, 1, 0.5), (12.706205, 1, 0.05), (2.919986, 2, 0.1)],
)
def test_student_t_tail_against_tables(t: float, df: int, p: float) -> None:
    assert student_t_two_sided(t, df) == pytest.approx(p, rel=1e-5)
    assert student_t_two_sided(-t, df) == student_t_two_sided(t, df)


def test_paired_t_p_is_the_paired_t_test() -> None:
    a, b = np.array([0.2, 0.5, 0.4, 0.9, 0.3]), np.array([0.3, 0.7, 0.4, 1.0, 0.6])
    d = b - a  # mean 0.14, sd (ddof 1) 0.1140175..., t = 2.7456 on 4 df: p = 0.0516
    result = paired_bootstrap(a, b, BootstrapOptions(n_resamples=0))
    assert result.p_t == pytest.approx(student_t_two_sided(d.mean() / (d.std(ddof=1) / np.sqrt(5)), 4))
    assert result.p_t == pytest.approx(0.0516, abs=1e-4)
    assert paired_t_p(np.zeros(4)) == 1.0 and paired_t_p(np.full(4, 0.1)) == 0.0
    assert np.isnan(paired_t_p(np.array([0.3])))


def test_alpha_is_one_minus_confidence_as_written() -> None:
    assert significance_level(0.95) == 0.05  # 1.0 - 0.95 is 0.050000000000000044
    assert significance_level(0.9) == 0.1 and significance_level(0.99) == 0.01
    result = PairedDifference(100, 0.5, 0.55, 0.05, 0.01, 0.09, 0.01, 0.01)
    assert verdict(result, p_value=0.05, alpha=significance_level(0.95)) == NO_DIFFERENCE
