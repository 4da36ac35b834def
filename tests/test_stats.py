"""Bootstrap statistics: seeded and reproducible, and statistically the simple-evals bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from healthbench.scoring import stats
from healthbench.scoring.stats import (
    aggregate,
    aggregate_groups,
    bootstrap_means,
    clipped_mean,
    collect,
    flatten,
)

VALUES = np.array([0.1, 0.9, 0.4, 0.4, 1.0, 0.0, 0.75, -0.3, 0.6, 0.2, 0.55, 0.8] * 4)


def naive_bootstrap_std(values: np.ndarray, n_resamples: int, seed: int) -> float:
    """simple-evals' loop: one resample at a time, each mean clipped to [0, 1], population std."""
    rng = np.random.default_rng(seed)
    means = [float(np.clip(np.mean(rng.choice(values, len(values))), 0, 1)) for _ in range(n_resamples)]
    return float(np.std(means))


def test_clipped_mean() -> None:
    assert clipped_mean([0.2, 0.4]) == pytest.approx(0.3, abs=1e-15)
    assert clipped_mean([-1.0, 0.5]) == 0.0  # mean -0.25
    assert clipped_mean([1.0, 2.0]) == 1.0  # mean 1.5


def test_collect_keeps_first_seen_key_order() -> None:
    grouped = collect([{"b": 1.0, "a": 0.0}, {"c": 0.5, "a": 1.0}])
    assert list(grouped) == ["b", "a", "c"]
    assert grouped == {"b": [1.0], "a": [0.0, 1.0], "c": [0.5]}


def test_same_seed_identical_bits_different_seed_different() -> None:
    samples = [VALUES, VALUES[:7], VALUES[::3]]
    first = bootstrap_means(samples, n_resamples=400, seed=5)
    assert first.shape == (400, 3)
    assert np.array_equal(first, bootstrap_means(samples, n_resamples=400, seed=5))
    assert not np.array_equal(first, bootstrap_means(samples, n_resamples=400, seed=6))


def test_chunking_and_workers_do_not_change_the_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [VALUES, VALUES[:5], VALUES[10:30]]
    reference = bootstrap_means(samples, n_resamples=257, seed=9)
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 50)  # one resample per pass
    assert np.array_equal(reference, bootstrap_means(samples, n_resamples=257, seed=9))
    for workers in (2, 3, 300):
        assert np.array_equal(reference, bootstrap_means(samples, n_resamples=257, seed=9, workers=workers))


def test_resample_r_uses_the_r_th_block_of_uniform_draws() -> None:
    # Documented layout: resample r of sample k uses draws r * total + offset_k ... of default_rng(seed)
    a, b = np.array([0.0, 0.25, 0.5]), np.array([0.1, 0.9])
    draws = np.random.default_rng(4).random((3, 5))
    expected = np.column_stack(
        [a[(draws[:, :3] * 3).astype(int)].sum(axis=1) / 3, b[(draws[:, 3:] * 2).astype(int)].sum(axis=1) / 2]
    )
    assert np.array_equal(bootstrap_means([a, b], n_resamples=3, seed=4), np.clip(expected, 0, 1))


def test_bootstrap_std_matches_a_naive_implementation() -> None:
    ours = aggregate_groups({"k": list(VALUES)}, n_resamples=4000, seed=1)["k"].bootstrap_std
    naive = naive_bootstrap_std(VALUES, 4000, seed=2)
    # both estimate the same quantity: the std of the resample mean ~ std(VALUES) / sqrt(n)
    assert ours == pytest.approx(naive, rel=0.08)
    assert ours == pytest.approx(float(np.std(VALUES)) / math.sqrt(len(VALUES)), rel=0.08)


def test_keys_are_resampled_independently() -> None:
    # two keys with identical values still get different resamples (as simple-evals' separate loops)
    boot = bootstrap_means([VALUES, VALUES], n_resamples=300, seed=0)
    assert not np.array_equal(boot[:, 0], boot[:, 1])
    assert abs(np.corrcoef(boot[:, 0], boot[:, 1])[0, 1]) < 0.2


def test_ci_bounds_are_ordered_and_inside_zero_one() -> None:
    result = aggregate([{"x": v, "y": 1.0 - v} for v in VALUES], n_resamples=1000, seed=0)
    for key_stats in result.values():
        assert 0.0 <= key_stats.ci_lower <= key_stats.mean <= key_stats.ci_upper <= 1.0
        assert key_stats.n_samples == len(VALUES)


def test_constant_values_have_zero_spread() -> None:
    result = aggregate_groups({"k": [0.5] * 9}, n_resamples=100, seed=0)["k"]
    assert (result.mean, result.bootstrap_std, result.ci_lower, result.ci_upper) == (0.5, 0.0, 0.5, 0.5)


def test_zero_resamples() -> None:
    assert bootstrap_means([VALUES], n_resamples=0, seed=0).shape == (0, 1)
    result = aggregate_groups({"k": [0.2, 0.4]}, n_resamples=0)["k"]
    assert result.mean == pytest.approx(0.3, abs=1e-15) and result.n_samples == 2
    assert math.isnan(result.bootstrap_std) and math.isnan(result.ci_lower) and math.isnan(result.ci_upper)


def test_empty_inputs() -> None:
    assert aggregate([]) == {}
    assert aggregate_groups({"k": []}) == {}
    with pytest.raises(ValueError, match="empty sample"):
        bootstrap_means([VALUES, np.array([])], n_resamples=3, seed=0)
    with pytest.raises(ValueError, match="workers"):
        bootstrap_means([VALUES], n_resamples=3, seed=0, workers=0)


def test_flatten_layout() -> None:
    flat = flatten(aggregate_groups({"axis:accuracy": [0.25, 0.75]}, n_resamples=10))
    assert list(flat) == [
        "axis:accuracy",
        "axis:accuracy:n_samples",
        "axis:accuracy:bootstrap_std",
        "axis:accuracy:ci_lower",
        "axis:accuracy:ci_upper",
    ]
    assert flat["axis:accuracy"] == 0.5 and flat["axis:accuracy:n_samples"] == 2
