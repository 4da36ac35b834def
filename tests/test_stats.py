"""Bootstrap statistics: seeded and reproducible, and exactly simple-evals' bootstrap for every key.

The exactness tests compare each sampling method (gather, counts, their mix, the shared frame, the
binary keys) with the exact distribution of the clipped resample mean, enumerated with fractions,
by a chi-square test on 100,000+ resamples: a sampler that is wrong by more than a fraction of a
percent in any category fails by orders of magnitude. The seeds are fixed, so the tests are too.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
import pytest

from healthbench.scoring import bootstrap, stats
from healthbench.scoring.bootstrap import (
    Scratch,
    _Binary,
    _Counted,
    _Frame,
    _multinomial,
    _plan,
    _segmented_draws,
    _Tallied,
    _uniform_indices,
)
from healthbench.scoring.stats import (
    BootstrapOptions,
    Column,
    Workspace,
    aggregate,
    aggregate_columns,
    aggregate_groups,
    bootstrap_columns,
    bootstrap_means,
    clipped_mean,
    collect,
    columns_of,
    flatten,
)

VALUES = np.array([0.1, 0.9, 0.4, 0.4, 1.0, 0.0, 0.75, -0.3, 0.6, 0.2, 0.55, 0.8] * 4)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.Generator(np.random.SFC64(seed))


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
BINARY = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]


# --- basics --------------------------------------------------------------------------------------------


def test_clipped_mean() -> None:
    assert clipped_mean([0.2, 0.4]) == pytest.approx(0.3, abs=1e-15)
    assert clipped_mean([-1.0, 0.5]) == 0.0  # mean -0.25
    assert clipped_mean([1.0, 2.0]) == 1.0  # mean 1.5


def test_collect_and_columns_keep_first_seen_key_order() -> None:
    rows = [{"b": 1.0, "a": 0.0}, {"c": 0.5, "a": 1.0}]
    grouped = collect(rows)
    assert list(grouped) == ["b", "a", "c"]
    assert grouped == {"b": [1.0], "a": [0.0, 1.0], "c": [0.5]}
    columns = columns_of(rows)
    assert list(columns) == ["b", "a", "c"]
    assert columns["a"].rows.tolist() == [0, 1] and columns["a"].values.tolist() == [0.0, 1.0]
    assert columns["c"].rows.tolist() == [1]


def test_same_seed_identical_bits_different_seed_different() -> None:
    samples = [VALUES, VALUES[:7], VALUES[::3], np.array([0.0, 1.0, 1.0])]
    first = bootstrap_means(samples, BootstrapOptions(n_resamples=400, seed=5))
    assert first.shape == (400, 4)
    assert np.array_equal(first, bootstrap_means(samples, BootstrapOptions(n_resamples=400, seed=5)))
    assert not np.array_equal(first, bootstrap_means(samples, BootstrapOptions(n_resamples=400, seed=6)))


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


def test_a_run_is_planned_with_every_kind_of_sampler() -> None:
    columns = list(columns_of(run_like_rows()).values())
    kinds = {type(s) for s in _plan(columns, 600)}
    assert kinds == {_Frame, _Binary, _Counted}


def test_workers_and_repeats_do_not_change_the_bits() -> None:
    rows = run_like_rows()
    reference = aggregate(rows, options=BootstrapOptions(n_resamples=300, seed=9))
    for workers in (1, 2, 3, 64):
        assert (
            aggregate(rows, options=BootstrapOptions(n_resamples=300, seed=9, workers=workers)) == reference
        )
    columns = list(columns_of(rows).values())
    first = bootstrap_columns(columns, len(rows), BootstrapOptions(n_resamples=300, seed=9))
    assert np.array_equal(
        first, bootstrap_columns(columns, len(rows), BootstrapOptions(n_resamples=300, seed=9, workers=2))
    )


def test_a_workspace_kept_across_calls_changes_no_bit() -> None:
    # a long-lived caller may pass one workspace to every call, with any workers, whatever it held
    rows = run_like_rows()
    reference = aggregate(rows, options=BootstrapOptions(n_resamples=300, seed=9))
    workspace = Workspace()
    for workers in (1, 3, 1):
        assert (
            aggregate(
                rows, workspace=workspace, options=BootstrapOptions(n_resamples=300, seed=9, workers=workers)
            )
            == reference
        )
        big = {"big": np.random.default_rng(workers).uniform(0, 1, 300_000).tolist(), "small": [0.5, 0.25]}
        expected = aggregate_groups(big, options=BootstrapOptions(n_resamples=20, seed=1))
        assert (
            aggregate_groups(big, workspace=workspace, options=BootstrapOptions(n_resamples=20, seed=1))
            == expected
        )
    columns = list(columns_of(rows).values())
    first = bootstrap_columns(columns, len(rows), BootstrapOptions(n_resamples=300, seed=9))
    assert np.array_equal(
        first,
        bootstrap_columns(columns, len(rows), BootstrapOptions(n_resamples=300, seed=9), workspace=workspace),
    )
    assert np.array_equal(
        bootstrap_means([VALUES], BootstrapOptions(n_resamples=50, seed=2), workspace=workspace),
        bootstrap_means([VALUES], BootstrapOptions(n_resamples=50, seed=2)),
    )
    with ThreadPoolExecutor(max_workers=4) as pool:  # concurrent calls sharing it
        calls = [
            pool.submit(
                aggregate, rows, options=BootstrapOptions(n_resamples=300, seed=9), workspace=workspace
            )
            for _ in range(4)
        ]
        assert all(call.result() == reference for call in calls)


def test_the_scoring_core_keeps_no_module_state() -> None:
    # no I/O, no globals: buffers live in a caller's Workspace, never in a module (or thread) cache
    mutable = (dict, list, set, np.ndarray, threading.local, Workspace, Scratch)
    for module in (stats, bootstrap):
        state = [k for k, v in vars(module).items() if not k.startswith("__") and isinstance(v, mutable)]
        assert not state, (module.__name__, state)


def test_a_workspace_lends_each_running_sampler_its_own_scratch() -> None:
    workspace = Workspace()
    with workspace.scratch() as first, workspace.scratch() as second:
        assert first is not second  # two samplers running at once (two worker threads)
    with workspace.scratch() as again:
        assert again in (first, second)  # returned buffers are reused, not reallocated


def test_a_scratch_buffer_is_one_memory_for_every_dtype() -> None:
    scratch = Scratch()
    floats = scratch.buffer("picked", 3000, np.float64)
    pairs = scratch.buffer("picked", 1000, np.complex128)
    assert floats.shape == (3000,) and pairs.shape == (1000,) and np.shares_memory(floats, pairs)
    grown = scratch.buffer("picked", 5000, np.complex128)
    assert grown.shape == (5000,) and not np.shares_memory(grown, floats)


def test_identical_keys_share_their_draws() -> None:
    # allowed: every key's own resamples stay exact, only keys are correlated (score = overall_score)
    boot = bootstrap_means([VALUES, VALUES.copy()], BootstrapOptions(n_resamples=300, seed=0))
    assert np.array_equal(boot[:, 0], boot[:, 1])


# --- exactness of every sampling method --------------------------------------------------------------


@pytest.mark.parametrize("n_heavy", [0, 1, 2, 4])  # 0: gather; 4: every distinct value counted; else mixed
def test_counted_sample_is_exact(n_heavy: int) -> None:
    values = np.array(SMALL)
    sampler = _Counted.of((0,), values, n_heavy=n_heavy)
    assert (
        sampler.heavy.size == n_heavy and sampler.tail.size == len(SMALL) - sampler.categories[:n_heavy].sum()
    )
    means = np.clip(sampler.sums(150_000, rng(n_heavy), Scratch())[:, 0] / len(SMALL), 0, 1)
    assert_exact(means, as_fractions(SMALL))


def test_gather_and_counts_agree_with_each_other() -> None:
    # the same distribution from two different methods, with a mid-sized sample
    values = np.round(np.random.default_rng(1).choice([0.0, 0.25, 0.5, 1.0, 0.125], 40), 3)
    gathered = _Counted.of((0,), values, n_heavy=0).sums(100_000, rng(1), Scratch())[:, 0]
    counted = _Counted.of((0,), values, n_heavy=5).sums(100_000, rng(2), Scratch())[:, 0]
    grid = np.rint(np.concatenate([gathered, counted]) * 8).astype(np.int64)
    levels = np.unique(grid)
    a = np.array([np.sum(grid[:100_000] == k) for k in levels], dtype=float)
    b = np.array([np.sum(grid[100_000:] == k) for k in levels], dtype=float)
    keep = (a + b) >= 20
    a, b = np.append(a[keep], a[~keep].sum()), np.append(b[keep], b[~keep].sum())
    chi2 = np.sum((a - b) ** 2 / np.maximum(a + b, 1))
    dof = len(a) - 1
    assert chi2 < dof + 6 * math.sqrt(2 * dof) + 10
    assert gathered.std() == pytest.approx(counted.std(), rel=0.02)


def test_binary_samples_are_exact() -> None:
    other = [1.0, 0.0, 0.0]  # a second two-valued sample, drawn in the same call
    pair = [_Counted.of((0,), np.array(BINARY), n_heavy=2), _Counted.of((1, 2), np.array(other), n_heavy=2)]
    sampler = _Binary.of(pair)
    sums = sampler.sums(150_000, rng(3), Scratch())
    assert sums.shape == (150_000, 3) and np.array_equal(sums[:, 1], sums[:, 2])
    assert_exact(sums[:, 0] / len(BINARY), as_fractions(BINARY))
    assert_exact(sums[:, 1] / len(other), as_fractions(other))


def test_tallied_samples_are_exact() -> None:
    # samples on the same rows with different values, drawn by one tally per resample; more
    # resamples than one pass holds, and a sample with two keys (identical values)
    other = [0.0, 1.0, 0.25, 0.25, 1.5, -0.25]
    samples = [_Counted.of((0,), np.array(SMALL)), _Counted.of((1, 2), np.array(other))]
    sampler = _Tallied.of(samples, [np.array(SMALL), np.array(other)])
    sums = sampler.sums(150_000, rng(9), Scratch())
    assert sampler.keys == (0, 1, 2) and sums.shape == (150_000, 3) and np.array_equal(sums[:, 1], sums[:, 2])
    assert_exact(np.clip(sums[:, 0] / len(SMALL), 0, 1), as_fractions(SMALL))
    assert_exact(np.clip(sums[:, 1] / len(other), 0, 1), as_fractions(other))


def test_many_runs_of_the_same_conversations_are_tallied_together() -> None:
    # one key on the same 500 rows in 12 runs (different values): one tally instead of 12 gathers
    generator = np.random.default_rng(2)
    rows = np.arange(500)
    columns = [Column(rows, np.round(generator.uniform(0, 1, 500), 3)) for _ in range(12)]
    plan = _plan(columns, 500)
    assert [type(s) for s in plan] == [_Tallied] and sorted(plan[0].keys) == list(range(12))
    assert not any(isinstance(s, _Tallied) for s in _plan(columns[:1], 500))  # alone: gathered


def frame_columns() -> list[Column]:
    """A full column on 8 rows and key subsets of it that overlap (rows 2 and 5 are in both) and
    leave row 7 in none, so the atoms have different numbers of classes; plus two other full columns."""
    full = np.array([0.5, -0.5, 0.25, 1.25, 0.5, 0.75, 0.0, 1.0])
    other = np.array([0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875])
    third = np.array([1.0, 0.0, 0.5, 0.5, 0.0, 0.25, 0.75, 1.0])
    a, b = np.array([0, 1, 2, 5]), np.array([2, 3, 4, 5, 6])
    rows = np.arange(8)
    return [
        Column(rows, full),
        Column(a, full[a]),
        Column(b, full[b]),
        Column(rows, other),
        Column(rows, third),
    ]


def expensive(sampler: _Counted) -> _Counted:
    """The same sampler, with a cost that makes a frame take its column."""
    return _Counted(sampler.keys, sampler.n, sampler.heavy, sampler.categories, sampler.tail, cost=1e9)


@pytest.mark.parametrize("n_columns", [1, 2, 3])  # one column, two (read as one complex), three
def test_frame_keys_are_exact(n_columns: int) -> None:
    columns = frame_columns()
    alone = {i: _Counted.of((i,), c.values) for i, c in enumerate(columns)}
    alone = {
        i: expensive(s)
        if i in (3, 4)[: n_columns - 1]
        else _Counted(s.keys, s.n, s.heavy, s.categories, s.tail, cost=0.0)
        for i, s in alone.items()
    }
    alone.update({i: expensive(alone[i]) for i in (0, 1, 2)})
    frame = _Frame.of(columns, alone, 8)
    assert frame is not None and frame.table.shape == (8, n_columns)
    assert set(frame.keys) == {0, 1, 2, 3, 4}.intersection(range(n_columns + 2))
    assert frame.slot_class.shape == (4, 3) and (frame.slot_class == 3).any()  # atoms with padding
    sums = frame.sums(150_000, rng(4 + n_columns), Scratch())
    for position, key in enumerate(frame.keys):
        values = columns[key].values
        assert_exact(np.clip(sums[:, position] / values.size, 0, 1), as_fractions(values.tolist()))


def test_the_bootstrap_std_of_every_key_of_a_run_is_right() -> None:
    # every sampler in one plan: each key's std matches the exact std of the resample mean
    rows = run_like_rows(n=900, seed=5)
    columns = columns_of(rows)
    boot = bootstrap_columns(list(columns.values()), len(rows), BootstrapOptions(n_resamples=20_000, seed=1))
    for i, column in enumerate(columns.values()):
        values = column.values
        if np.mean(values) < 0.05 or np.std(values) == 0:  # (clipping at 0 changes the std)
            continue
        exact = np.std(values) / math.sqrt(values.size)
        assert boot[:, i].std() == pytest.approx(exact, rel=0.03), list(columns)[i]
        assert boot[:, i].mean() == pytest.approx(np.mean(values), abs=4 * exact / math.sqrt(20_000))


def test_bootstrap_std_matches_a_naive_implementation() -> None:
    ours = aggregate_groups({"k": list(VALUES)}, options=BootstrapOptions(n_resamples=4000, seed=1))[
        "k"
    ].bootstrap_std
    generator = np.random.default_rng(2)
    naive = np.std([np.clip(np.mean(generator.choice(VALUES, VALUES.size)), 0, 1) for _ in range(4000)])
    assert ours == pytest.approx(naive, rel=0.08)
    assert ours == pytest.approx(float(np.std(VALUES)) / math.sqrt(len(VALUES)), rel=0.08)


# --- edge cases ----------------------------------------------------------------------------------------


def test_a_single_value_and_constant_values_have_zero_spread() -> None:
    result = aggregate_groups(
        {"one": [0.3], "same": [0.5] * 9, "binary-like": [1.0] * 4}, options=BootstrapOptions(n_resamples=100)
    )
    assert (result["one"].ci_lower, result["one"].ci_upper) == (0.3, 0.3)  # every resample is [0.3]
    assert result["one"].bootstrap_std < 1e-15  # (np.std of a constant 0.3 is not exactly 0)
    assert (result["same"].mean, result["same"].bootstrap_std) == (0.5, 0.0)
    assert (result["same"].ci_lower, result["same"].ci_upper) == (0.5, 0.5)
    assert result["binary-like"].bootstrap_std == 0.0
    tenths = aggregate_groups({"k": [0.1] * 7}, options=BootstrapOptions(n_resamples=100))["k"]
    assert tenths.bootstrap_std < 1e-15 and tenths.ci_lower == pytest.approx(0.1, abs=1e-15)


def test_clipping_applies_to_each_resample_mean() -> None:
    values = [-2.0, 1.0, 1.0, 3.0]  # mean 0.75, but many resample means fall outside [0, 1]
    boot = bootstrap_means([values], BootstrapOptions(n_resamples=50_000, seed=0))[:, 0]
    assert boot.min() == 0.0 and boot.max() == 1.0
    assert_exact(boot, as_fractions(values))


def test_ci_bounds_are_ordered_and_inside_zero_one() -> None:
    result = aggregate(
        [{"x": v, "y": 1.0 - v} for v in VALUES], options=BootstrapOptions(n_resamples=1000, seed=0)
    )
    for key_stats in result.values():
        assert 0.0 <= key_stats.ci_lower <= key_stats.mean <= key_stats.ci_upper <= 1.0
        assert key_stats.n_samples == len(VALUES)


def test_nan_values_give_nan_statistics() -> None:
    result = aggregate_groups({"k": [0.5, float("nan"), 0.25]}, options=BootstrapOptions(n_resamples=50))["k"]
    assert math.isnan(result.mean) and math.isnan(result.bootstrap_std)


def test_zero_resamples() -> None:
    assert bootstrap_means([VALUES], BootstrapOptions(n_resamples=0, seed=0)).shape == (0, 1)
    result = aggregate_groups({"k": [0.2, 0.4]}, options=BootstrapOptions(n_resamples=0))["k"]
    assert result.mean == pytest.approx(0.3, abs=1e-15) and result.n_samples == 2
    assert math.isnan(result.bootstrap_std) and math.isnan(result.ci_lower) and math.isnan(result.ci_upper)


def test_empty_inputs() -> None:
    assert aggregate([]) == {}
    assert aggregate_groups({"k": []}) == {}
    assert aggregate_columns({}, 0) == {}
    with pytest.raises(ValueError, match="empty sample"):
        bootstrap_means([VALUES, np.array([])], BootstrapOptions(n_resamples=3, seed=0))
    with pytest.raises(ValueError, match="workers"):
        bootstrap_means([VALUES], BootstrapOptions(n_resamples=3, seed=0, workers=0))


def test_flatten_layout() -> None:
    flat = flatten(
        aggregate_groups({"axis:accuracy": [0.25, 0.75]}, options=BootstrapOptions(n_resamples=10))
    )
    assert list(flat) == [
        "axis:accuracy",
        "axis:accuracy:n_samples",
        "axis:accuracy:bootstrap_std",
        "axis:accuracy:ci_lower",
        "axis:accuracy:ci_upper",
    ]
    assert flat["axis:accuracy"] == 0.5 and flat["axis:accuracy:n_samples"] == 2


# --- the building blocks --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 7, 250, 3001])
def test_uniform_indices_are_uniform_and_independent(size: int) -> None:
    count = 600_000
    indices = _uniform_indices(size, count, rng(size), Scratch()).copy()
    assert indices.min() >= 0 and indices.max() < size
    if size == 1:
        return
    observed = np.bincount(indices, minlength=size)
    chi2 = np.sum((observed - count / size) ** 2 / (count / size))
    assert chi2 < size - 1 + 6 * math.sqrt(2 * (size - 1)) + 10
    if size <= 7:  # successive indices (digits of one random number, or of two) are independent
        pairs = np.bincount(indices[:-1] * size + indices[1:], minlength=size * size)
        expected = (count - 1) / size**2
        chi2 = np.sum((pairs - expected) ** 2 / expected)
        assert chi2 < size**2 - 1 + 6 * math.sqrt(2 * (size**2 - 1)) + 10


def test_multinomial_has_the_multinomial_moments() -> None:
    categories = np.array([5, 1, 30, 2, 2, 60])
    counts = _multinomial(100, categories, 200_000, rng(7))
    assert (counts.sum(axis=1) == 100).all() and counts.min() >= 0
    p = categories / categories.sum()
    np.testing.assert_allclose(counts.mean(axis=0), 100 * p, atol=0.05)
    np.testing.assert_allclose(np.cov(counts.T), 100 * (np.diag(p) - np.outer(p, p)), atol=0.08)
    assert np.array_equal(_multinomial(9, np.array([4]), 3, rng()), [[9], [9], [9]])


def test_segmented_draws_with_empty_segments() -> None:
    pool = np.array([1.0, 10.0, 100.0])
    sums = _segmented_draws(pool, np.array([0, 3, 0, 0, 1, 0]), rng(), Scratch())
    assert sums[[0, 2, 3, 5]].tolist() == [0.0] * 4
    assert sums[1] in {a + b + c for a in pool for b in pool for c in pool} and sums[4] in set(pool)


def test_chunk_size_only_changes_which_draws_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # smaller passes change the random stream (the chunking is part of its definition), not the law
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 97)
    values = np.array(SMALL)
    sums = _Counted.of((0,), values, n_heavy=0).sums(60_000, rng(8), Scratch())
    means = np.clip(sums[:, 0] / values.size, 0, 1)
    assert_exact(means, as_fractions(SMALL))
