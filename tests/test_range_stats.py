"""NeMo range-score statistics, checked against numpy and against values worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from healthbench.scoring.range_stats import PERCENTILES, range_stats


def _bins(stats_dict: dict) -> list[tuple[float, float, int]]:
    return [(b["lower_bound"], b["upper_bound"], b["count"]) for b in stats_dict["histogram"]["bins"]]


def test_empty_list_has_only_counts_and_a_zero_sum() -> None:
    got = range_stats([]).as_dict()
    assert got["count"] == 0 and got["nan_count"] == 0 and got["sum"] == 0.0
    for field in ("mean", "min", "max", "median", "std_dev", "variance", "sample_std_dev", "sample_variance"):
        assert got[field] is None, field
    assert got["percentiles"] == {f"p{p}": None for p in PERCENTILES}
    assert got["histogram"] == {"bins": []}
    json.dumps(got, allow_nan=False)


def test_only_nan_counts_every_value_as_missing() -> None:
    got = range_stats([math.nan, math.nan, math.inf]).as_dict()
    assert (got["count"], got["nan_count"], got["mean"]) == (0, 3, None)


def test_one_value() -> None:
    got = range_stats([0.25]).as_dict()
    assert (got["count"], got["sum"], got["mean"], got["min"], got["max"], got["median"]) == (
        1,
        0.25,
        0.25,
        0.25,
        0.25,
        0.25,
    )
    assert (got["std_dev"], got["variance"]) == (0.0, 0.0)
    assert got["sample_std_dev"] is None and got["sample_variance"] is None
    assert set(got["percentiles"].values()) == {0.25}
    assert _bins(got) == [(0.25, 0.25, 1)]


def test_all_equal_values_make_a_single_bin() -> None:
    got = range_stats([0.5] * 4).as_dict()
    assert _bins(got) == [(0.5, 0.5, 4)]
    assert got["std_dev"] == 0.0 and got["sample_variance"] == 0.0
    assert set(got["percentiles"].values()) == {0.5}


def test_nan_mixed_in_is_counted_and_left_out() -> None:
    values = [0.1, math.nan, 0.9, 0.4, math.nan, 0.6]
    clean = np.array([0.1, 0.9, 0.4, 0.6])
    got = range_stats(values).as_dict()
    assert got["count"] == 4 and got["nan_count"] == 2
    assert got["sum"] == pytest.approx(float(clean.sum()), abs=1e-15)
    assert got["mean"] == pytest.approx(float(clean.mean()), abs=1e-15)
    assert got["median"] == pytest.approx(float(np.median(clean)), abs=1e-15)
    assert got["std_dev"] == pytest.approx(float(np.std(clean)), abs=1e-15)
    assert got["variance"] == pytest.approx(float(np.var(clean)), abs=1e-15)
    assert got["sample_std_dev"] == pytest.approx(float(np.std(clean, ddof=1)), abs=1e-15)
    assert got["sample_variance"] == pytest.approx(float(np.var(clean, ddof=1)), abs=1e-15)
    assert (got["min"], got["max"]) == (0.1, 0.9)
    assert sum(b[2] for b in _bins(got)) == 4
    json.dumps(got, allow_nan=False)


def test_matches_numpy_on_a_random_list() -> None:
    values = np.random.default_rng(7).normal(0.4, 0.3, size=57)
    got = range_stats(values).as_dict()
    assert got["mean"] == pytest.approx(float(np.mean(values)), rel=1e-12)
    assert got["std_dev"] == pytest.approx(float(np.std(values)), rel=1e-12)
    assert got["sample_std_dev"] == pytest.approx(float(np.std(values, ddof=1)), rel=1e-12)
    expected = np.percentile(values, PERCENTILES, method="weibull")
    assert list(got["percentiles"].values()) == pytest.approx(list(expected), rel=1e-12)
    counts, edges = np.histogram(values, bins=10)
    assert [b[2] for b in _bins(got)] == counts.tolist()
    assert [b[0] for b in _bins(got)] == pytest.approx(edges[:-1].tolist())


def test_percentiles_by_rank_position_by_hand() -> None:
    # n = 4, rank (p/100)(n+1) - 1: p10 -> -0.5 (clamped to the first value), p20 -> 0.0,
    # p50 -> 1.5 (halfway between 2nd and 3rd), p70 -> 2.5, p80 -> 3.0, p90 -> 3.5 (clamped)
    got = range_stats([40.0, 10.0, 30.0, 20.0]).percentiles
    assert got["p10"] == 10.0
    assert got["p20"] == 10.0
    assert got["p30"] == pytest.approx(15.0)  # rank 0.5
    assert got["p50"] == 25.0
    assert got["p70"] == pytest.approx(35.0)
    assert got["p80"] == 40.0
    assert got["p90"] == 40.0 and got["p100"] == 40.0


def test_histogram_bins_are_half_open_except_the_last() -> None:
    # bins of width 1 from 0 to 10: 1.0 starts bin 1 (not bin 0), 10.0 falls in the closed last bin
    got = _bins(range_stats([0.0, 1.0, 1.0, 9.999, 10.0]).as_dict())
    assert len(got) == 10
    assert got[0] == (0.0, 1.0, 1)
    assert got[1] == (1.0, 2.0, 2)
    assert got[9] == (9.0, 10.0, 2)
    assert sum(count for _, _, count in got[2:9]) == 0
