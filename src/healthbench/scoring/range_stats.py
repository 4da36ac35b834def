"""Descriptive statistics of one metric's per-sample values: NeMo Evaluator's "range" score fields.

Pure numpy. NaN (and infinite) values are counted (``nan_count``) and left out of every other
figure. A statistic
that is undefined for the values given (the mean of nothing, a sample variance of one value) is None,
so the result never holds NaN or infinity.

- ``std_dev`` / ``variance``: population (÷n); ``sample_std_dev`` / ``sample_variance``: ÷(n−1),
  None below 2 values.
- percentiles ``p10`` … ``p100``: the value at rank position (p/100)(n+1)−1 (0-based), linearly
  interpolated between neighbours and clamped to the smallest and largest value (numpy's
  ``method="weibull"``).
- histogram: 10 equal-width bins from min to max, each half-open ``[lower, upper)`` except the last,
  which is closed; a single bin ``[min, max]`` when every value is equal; no bins without values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

PERCENTILES = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
HISTOGRAM_BINS = 10


@dataclass(frozen=True)
class HistogramBin:
    lower_bound: float
    upper_bound: float
    count: int


@dataclass(frozen=True)
class RangeStats:
    """The range-score figures of one list of values (see the module doc for each definition)."""

    count: int
    nan_count: int
    sum: float
    mean: float | None
    min: float | None
    max: float | None
    median: float | None
    std_dev: float | None
    variance: float | None
    sample_std_dev: float | None
    sample_variance: float | None
    percentiles: dict[str, float | None]
    histogram: tuple[HistogramBin, ...]

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape: NeMo's field names, ``histogram`` as ``{"bins": [...]}``."""
        return {
            "count": self.count,
            "nan_count": self.nan_count,
            "sum": self.sum,
            "mean": self.mean,
            "min": self.min,
            "max": self.max,
            "median": self.median,
            "std_dev": self.std_dev,
            "variance": self.variance,
            "sample_std_dev": self.sample_std_dev,
            "sample_variance": self.sample_variance,
            "percentiles": dict(self.percentiles),
            "histogram": {
                "bins": [
                    {"lower_bound": b.lower_bound, "upper_bound": b.upper_bound, "count": b.count}
                    for b in self.histogram
                ]
            },
        }


def range_stats(values: npt.ArrayLike) -> RangeStats:
    """The range-score figures of ``values`` (a 1-D sequence of numbers; NaN = a missing value,
    infinities are counted as missing too)."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    missing = ~np.isfinite(array)
    finite = np.sort(array[~missing])
    n = int(finite.size)
    if n == 0:
        return RangeStats(
            count=0,
            nan_count=int(missing.sum()),
            sum=0.0,
            mean=None,
            min=None,
            max=None,
            median=None,
            std_dev=None,
            variance=None,
            sample_std_dev=None,
            sample_variance=None,
            percentiles={f"p{p}": None for p in PERCENTILES},
            histogram=(),
        )
    variance = float(np.var(finite))
    sample_variance = float(np.var(finite, ddof=1)) if n >= 2 else None
    return RangeStats(
        count=n,
        nan_count=int(missing.sum()),
        sum=float(np.sum(finite)),
        mean=float(np.mean(finite)),
        min=float(finite[0]),
        max=float(finite[-1]),
        median=float(np.median(finite)),
        std_dev=float(np.sqrt(variance)),
        variance=variance,
        sample_std_dev=None if sample_variance is None else float(np.sqrt(sample_variance)),
        sample_variance=sample_variance,
        percentiles=percentiles(finite),
        histogram=histogram(finite),
    )


def percentiles(values: npt.NDArray[np.float64]) -> dict[str, float | None]:
    """``p10`` … ``p100`` of non-empty, NaN-free ``values`` by rank position (p/100)(n+1)−1."""
    points = np.percentile(values, PERCENTILES, method="weibull")
    return {f"p{p}": float(v) for p, v in zip(PERCENTILES, points, strict=True)}


def histogram(values: npt.NDArray[np.float64]) -> tuple[HistogramBin, ...]:
    """10 equal-width bins from min to max (last bin closed); one bin when min == max."""
    if values.size == 0:
        return ()
    low, high = float(values.min()), float(values.max())
    if low == high:
        return (HistogramBin(low, high, int(values.size)),)
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS, range=(low, high))
    return tuple(
        HistogramBin(float(edges[i]), float(edges[i + 1]), int(counts[i])) for i in range(HISTOGRAM_BINS)
    )
