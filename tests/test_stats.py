"""Run statistics through the one bootstrap: exact means, seeded and reproducible CIs, resamples with
the bootstrap's law (checked against the distribution enumerated with fractions, by a chi-square test
on 50,000+ resamples; the seeds are fixed, so the tests are too), hand-computed small cases.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from healthbench.scoring.bootstrap import percentile_ci, resample_counts, resample_means
from healthbench.scoring.stats import (
    BootstrapOptions,
    Column,
    KeyStats,
    aggregate_columns,
    clipped_mean,
    columns_of,
    flatten,
)

VALUES = np.array([0.1, 0.9, 0.4, 0.4, 1.0, 0.0, 0.75, -0.3, 0.6, 0.2, 0.55, 0.8] * 4)


def stats_of(grouped: dict[str, list[float]], options: BootstrapOptions) -> dict[str, KeyStats]:
    """Each key alone on its own rows (what a caller with one key per sample gets)."""
    return {
        key: aggregate_columns({key: Column(np.arange(len(v)), np.array(v))}, len(v), options=options)[key]
        for key, v in grouped.items()
        if v
    }


def clipped_resample_means(values: list[float], n_resamples: int, seed: int) -> np.ndarray:
    sums = np.array(values)[:, None]
    means = resample_means(sums, np.ones_like(sums), n_resamples, np.random.default_rng(seed))
    return np.clip(means[:, 0], 0, 1)


# --- exact distributions ----------------------------------------------------------------------------


def exact_clipped_means(values: list[Fraction]) -> dict[Fraction, Fraction]:
    """The exact distribution of clip(mean of n draws with replacement from ``values``, 0, 1)."""
    n = len(values)
    step = {v: Fraction(c, n) for v, c in Counter(values).items()}
    sums = {Fraction(0): Fraction(1)}
    for _ in range(n):
        nxt: dict[Fraction, Fraction] = {}
        for total, p in sums.items():
            for v, q in step.items():
                nxt[total + v] = nxt.get(total + v, Fraction(0)) + p * q
        sums = nxt
    out: dict[Fraction, Fraction] = {}
    for total, p in sums.items():
        mean = min(max(total / n, Fraction(0)), Fraction(1))
        out[mean] = out.get(mean, Fraction(0)) + p
    return out


def assert_exact(means: np.ndarray, values: list[Fraction]) -> None:
    """Chi-square test of sampled clipped means against the exact distribution (values on a grid)."""
    exact = exact_clipped_means(values)
    scale = len(values) * math.lcm(*(v.denominator for v in values))  # means are multiples of 1/scale
    observed = Counter(np.rint(np.asarray(means) * scale).astype(np.int64).tolist())
    support = {int(m * scale): p for m, p in exact.items()}
    assert set(observed) <= set(support), "a resample mean that no resample can have"
    total = len(means)
    big = [k for k, p in support.items() if p * total >= 10]
    expected = [float(support[k]) * total for k in big] + [
        total - sum(float(support[k]) * total for k in big)
    ]
    counts = [observed.get(k, 0) for k in big] + [total - sum(observed.get(k, 0) for k in big)]
    chi2 = sum((o - e) ** 2 / e for o, e in zip(counts, expected, strict=True) if e > 0)
    dof = len(big)
    assert chi2 < dof + 6 * math.sqrt(2 * dof) + 10, (chi2, dof)


def as_fractions(values: list[float]) -> list[Fraction]:
    return [Fraction(v) for v in values]


# small samples with repeated values, and values outside [0, 1] so that clipping matters
SMALL = [0.5, -0.5, 0.25, 1.25, 0.5, 0.75]


# --- basics --------------------------------------------------------------------------------------------


def test_clipped_mean() -> None:
    assert clipped_mean([0.2, 0.4]) == pytest.approx(0.3, abs=1e-15)
    assert clipped_mean([-1.0, 0.5]) == 0.0  # mean -0.25
    assert clipped_mean([1.0, 2.0]) == 1.0  # mean 1.5


def test_columns_keep_first_seen_key_order() -> None:
    rows = [{"b": 1.0, "a": 0.0}, {"c": 0.5, "a": 1.0}]
    columns = columns_of(rows)
    assert list(columns) == ["b", "a", "c"]
    assert columns["a"].rows.tolist() == [0, 1] and columns["a"].values.tolist() == [0.0, 1.0]
    assert columns["c"].rows.tolist() == [1]


def test_means_are_simple_evals_exactly_whatever_the_bootstrap() -> None:
    rows = run_like_rows(n=300, seed=2)
    columns = columns_of(rows)
    for options in (BootstrapOptions(n_resamples=0), BootstrapOptions(n_resamples=50, seed=9)):
        result = aggregate_columns(columns, len(rows), options=options)
        for key, key_stats in result.items():
            values = [r[key] for r in rows if key in r]
            assert key_stats.mean == float(np.clip(np.mean(values), 0, 1)), key  # bit for bit
            assert key_stats.n_samples == key_stats.n_conversations == len(values)


def test_same_seed_identical_bits_different_seed_different() -> None:
    rows = run_like_rows(n=200, seed=1)
    columns = columns_of(rows)
    first = aggregate_columns(columns, len(rows), options=BootstrapOptions(n_resamples=400, seed=5))
    assert first == aggregate_columns(columns, len(rows), options=BootstrapOptions(n_resamples=400, seed=5))
    other = aggregate_columns(columns, len(rows), options=BootstrapOptions(n_resamples=400, seed=6))
    assert all(first[k].mean == other[k].mean for k in first)
    assert any(first[k].ci_lower != other[k].ci_lower for k in first)


def test_a_keys_figures_do_not_depend_on_the_other_keys_of_the_call() -> None:
    rows = run_like_rows(n=200, seed=4)
    columns = columns_of(rows)
    options = BootstrapOptions(n_resamples=300, seed=2)
    together = aggregate_columns(columns, len(rows), options=options)
    for key in ("overall_score", "theme:1", "axis:accuracy"):
        alone = aggregate_columns({key: columns[key]}, len(rows), options=options)[key]
        for field in ("mean", "bootstrap_std", "ci_lower", "ci_upper"):  # the same draws (last bits: BLAS)
            assert getattr(alone, field) == pytest.approx(getattr(together[key], field), abs=1e-12)


def run_like_rows(n: int = 600, seed: int = 3) -> list[dict[str, float]]:
    """Per-conversation rows shaped like a run: overall, a theme and one of its categories (subsets of
    the overall column), an axis on most rows, two-valued clusters and a three-valued level."""
    generator = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        overall = float(np.round(generator.uniform(-0.4, 1.0), 2))
        row = {"overall_score": overall, f"theme:{i % 6 // 2}": overall, f"category:{i % 6}": overall}
        if generator.random() < 0.9:
            row["axis:accuracy"] = float(np.round(generator.uniform(0, 1), 1))
        row[f"cluster:{i % 5}"] = float(generator.random() < 0.6)
        row["level:cluster"] = float(generator.choice([0.0, 0.5, 1.0]))
        row["score"] = overall
        rows.append(row)
    return rows


# --- the law of the resamples --------------------------------------------------------------------------


def test_counts_are_multinomial_draws_of_every_conversation() -> None:
    counts = resample_counts(7, 100_000, np.random.default_rng(3))
    assert counts.shape == (100_000, 7) and (counts.sum(axis=1) == 7).all() and counts.min() >= 0
    p = np.full(7, 1 / 7)
    np.testing.assert_allclose(counts.mean(axis=0), 7 * p, atol=0.02)
    np.testing.assert_allclose(np.cov(counts.T), 7 * (np.diag(p) - np.outer(p, p)), atol=0.03)


def test_resample_means_have_the_exact_bootstrap_law() -> None:
    assert_exact(clipped_resample_means(SMALL, 60_000, 8), as_fractions(SMALL))


def test_clipping_applies_to_each_resample_mean() -> None:
    values = [-2.0, 1.0, 1.0, 3.0]  # mean 0.75, but many resample means fall outside [0, 1]
    boot = clipped_resample_means(values, 50_000, 0)
    assert boot.min() == 0.0 and boot.max() == 1.0
    assert_exact(boot, as_fractions(values))


def test_hand_computed_resample_means() -> None:
    # two conversations: c0 with answers 1 and 1 (sum 2, count 2), c1 with one answer 0. Drawing two
    # conversations: (c0, c0) w.p. 1/4 -> 4/4 = 1, (c0, c1) w.p. 1/2 -> 2/3, (c1, c1) w.p. 1/4 -> 0
    rng = np.random.default_rng(1)
    means = resample_means([[2.0], [0.0]], [[2.0], [1.0]], 40_000, rng)[:, 0]
    observed = Counter(np.round(means, 12).tolist())
    assert set(observed) == {1.0, round(2 / 3, 12), 0.0}
    assert observed[1.0] / 40_000 == pytest.approx(0.25, abs=0.01)
    assert observed[round(2 / 3, 12)] / 40_000 == pytest.approx(0.5, abs=0.01)
    # the counts times the values, resample by resample (two figures on the same answers, then a third)
    w = resample_counts(2, 5, np.random.default_rng(7))
    sums, counts = [[2.0, 2.0, 0.5], [0.0, 1.0, 1.5]], [[2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    means = resample_means(sums, counts, 5, np.random.default_rng(7))
    np.testing.assert_array_equal(means[:, 0], (2 * w[:, 0]) / (2 * w[:, 0] + w[:, 1]))
    np.testing.assert_array_equal(means[:, 1], (2 * w[:, 0] + w[:, 1]) / (2 * w[:, 0] + w[:, 1]))
    np.testing.assert_array_equal(means[:, 2], (0.5 * w[:, 0] + 1.5 * w[:, 1]) / 2)


def test_a_key_on_some_rows_is_the_mean_over_its_drawn_rows() -> None:
    # rows 0..3, the key on rows 1 and 3: a resample drawing neither has no mean (left out)
    w = resample_counts(4, 2000, np.random.default_rng(0))
    sums, counts = np.array([[0.0], [0.25], [0.0], [0.75]]), np.array([[0.0], [1.0], [0.0], [1.0]])
    means = resample_means(sums, counts, 2000, np.random.default_rng(0))[:, 0]
    drawn = w[:, 1] + w[:, 3]
    assert np.isnan(means[drawn == 0]).all() and (drawn == 0).any()
    some = drawn > 0
    np.testing.assert_allclose(means[some], (0.25 * w[some, 1] + 0.75 * w[some, 3]) / drawn[some])
    low, high = percentile_ci(means[:, None], 0.95)
    assert 0.25 <= low[0] <= high[0] <= 0.75


def test_the_bootstrap_std_of_every_key_of_a_run_is_right() -> None:
    # each key's std (keys on every row, and on some rows) matches the std of the mean of its values
    rows = run_like_rows(n=900, seed=5)
    columns = columns_of(rows)
    result = aggregate_columns(columns, len(rows), options=BootstrapOptions(n_resamples=10_000, seed=1))
    for key, column in columns.items():
        values = column.values
        if np.mean(values) < 0.05 or np.std(values) == 0:  # (clipping at 0 changes the std)
            continue
        exact = np.std(values) / math.sqrt(values.size)
        assert result[key].bootstrap_std == pytest.approx(exact, rel=0.05), key


def test_bootstrap_std_matches_a_naive_implementation() -> None:
    ours = stats_of({"k": list(VALUES)}, BootstrapOptions(n_resamples=4000, seed=1))["k"].bootstrap_std
    generator = np.random.default_rng(2)
    naive = np.std([np.clip(np.mean(generator.choice(VALUES, VALUES.size)), 0, 1) for _ in range(4000)])
    assert ours == pytest.approx(naive, rel=0.08)
    assert ours == pytest.approx(float(np.std(VALUES)) / math.sqrt(len(VALUES)), rel=0.08)


def test_ci_coverage_of_a_run_mean() -> None:
    """600 simulated runs of 200 answers (skewed, in [0, 1]): the 95% CI covers the true mean in
    93-97% of them (seeded: the count is fixed)."""
    generator = np.random.default_rng(21)
    covered = 0
    for sim in range(600):
        values = generator.beta(2, 5, 200)  # true mean 2/7
        key = aggregate_columns(
            {"k": Column(np.arange(200), values)}, 200, options=BootstrapOptions(n_resamples=400, seed=sim)
        )["k"]
        covered += key.ci_lower <= 2 / 7 <= key.ci_upper
    assert 558 <= covered <= 582, covered


# --- edge cases ----------------------------------------------------------------------------------------


def test_a_single_value_and_constant_values_have_zero_spread() -> None:
    result = stats_of(
        {"one": [0.3], "same": [0.5] * 9, "binary-like": [1.0] * 4}, BootstrapOptions(n_resamples=100)
    )
    assert (result["one"].ci_lower, result["one"].ci_upper) == (0.3, 0.3)  # every resample is [0.3]
    assert result["one"].bootstrap_std < 1e-15  # (np.std of a constant 0.3 is not exactly 0)
    assert (result["same"].mean, result["same"].bootstrap_std) == (0.5, 0.0)
    assert (result["same"].ci_lower, result["same"].ci_upper) == (0.5, 0.5)
    assert result["binary-like"].bootstrap_std == 0.0


def test_ci_bounds_are_ordered_and_inside_zero_one() -> None:
    rows = [{"x": v, "y": 1.0 - v} for v in VALUES]
    options = BootstrapOptions(n_resamples=1000, seed=0)
    result = aggregate_columns(columns_of(rows), len(rows), options=options)
    for key_stats in result.values():
        assert 0.0 <= key_stats.ci_lower <= key_stats.mean <= key_stats.ci_upper <= 1.0
        assert key_stats.n_samples == len(VALUES)


def test_nan_values_give_nan_statistics() -> None:
    result = stats_of({"k": [0.5, float("nan"), 0.25]}, BootstrapOptions(n_resamples=50))["k"]
    assert math.isnan(result.mean) and math.isnan(result.bootstrap_std) and math.isnan(result.ci_lower)


def test_zero_resamples() -> None:
    result = stats_of({"k": [0.2, 0.4]}, BootstrapOptions(n_resamples=0))["k"]
    assert result.mean == pytest.approx(0.3, abs=1e-15) and result.n_samples == 2
    assert math.isnan(result.bootstrap_std) and math.isnan(result.ci_lower) and math.isnan(result.ci_upper)
    assert resample_means([[1.0]], [[1.0]], 0, np.random.default_rng(0)).shape == (0, 1)


def test_empty_inputs_and_bad_shapes() -> None:
    assert aggregate_columns({}, 0) == {}
    assert aggregate_columns({"k": Column(np.zeros(0, np.intp), np.zeros(0))}, 3) == {}
    with pytest.raises(ValueError, match="conversations, figures"):
        resample_means([1.0, 2.0], [1.0, 1.0], 3, np.random.default_rng(0))


def test_flatten_layout() -> None:
    flat = flatten(stats_of({"axis:accuracy": [0.25, 0.75]}, BootstrapOptions(n_resamples=10)))
    assert list(flat) == [
        "axis:accuracy",
        "axis:accuracy:n_samples",
        "axis:accuracy:bootstrap_std",
        "axis:accuracy:ci_lower",
        "axis:accuracy:ci_upper",
    ]
    assert flat["axis:accuracy"] == 0.5 and flat["axis:accuracy:n_samples"] == 2
