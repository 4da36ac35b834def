"""Run-level statistics: clipped means, bootstrap standard deviations and percentile CIs.

Matches simple-evals: for each key, the mean of the unclipped per-conversation values, clipped to
[0, 1]; the bootstrap std is the population std of 1,000 resample means, each clipped. Every key is
resampled independently from its own values (as simple-evals does), but all keys and all resamples
are drawn in a few vectorized passes. Randomness comes only from the ``seed`` argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DEFAULT_RESAMPLES = 1000
_CHUNK_ELEMENTS = 4_000_000  # draws per vectorized pass (bounds memory at ~100 MB)


@dataclass(frozen=True)
class KeyStats:
    """The aggregate of one metric key over a run."""

    mean: float
    n_samples: int
    bootstrap_std: float
    ci_lower: float
    ci_upper: float


def clipped_mean(values: npt.ArrayLike) -> float:
    return float(np.clip(np.mean(values), 0, 1))


def collect(per_conversation: Iterable[Mapping[str, float]]) -> dict[str, list[float]]:
    """Group values by key, keys in first-seen order (simple-evals' order)."""
    grouped: dict[str, list[float]] = {}
    for metrics in per_conversation:
        for key, value in metrics.items():
            grouped.setdefault(key, []).append(value)
    return grouped


def aggregate(
    per_conversation: Sequence[Mapping[str, float]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, KeyStats]:
    """Aggregate per-conversation metrics into `KeyStats` per key (same seed, same bits)."""
    return aggregate_groups(collect(per_conversation), n_resamples=n_resamples, seed=seed,
                            confidence=confidence)


def aggregate_groups(
    grouped: Mapping[str, Sequence[float]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, KeyStats]:
    keys = [key for key, values in grouped.items() if len(values) > 0]
    if not keys:
        return {}
    arrays = [np.asarray(grouped[key], dtype=np.float64) for key in keys]
    boot = bootstrap_means(arrays, n_resamples=n_resamples, seed=seed)
    alpha = (1.0 - confidence) / 2.0
    if n_resamples > 0:
        stds = boot.std(axis=0)
        lows, highs = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    else:
        stds = lows = highs = np.full(len(keys), np.nan)
    return {
        key: KeyStats(mean=clipped_mean(values), n_samples=len(values), bootstrap_std=float(stds[i]),
                      ci_lower=float(lows[i]), ci_upper=float(highs[i]))
        for i, (key, values) in enumerate(zip(keys, arrays, strict=True))
    }


def bootstrap_means(
    samples: Sequence[npt.NDArray[np.float64]], *, n_resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    """Clipped means of ``n_resamples`` resamples (with replacement) of every sample at once.

    Returns an array of shape (n_resamples, len(samples)).
    """
    sizes = np.array([len(s) for s in samples], dtype=np.int64)
    if np.any(sizes == 0):
        raise ValueError("cannot bootstrap an empty sample")
    flat = np.concatenate(samples) if samples else np.empty(0)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    element_start = np.repeat(starts, sizes)
    element_size = np.repeat(sizes, sizes).astype(np.float64)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, len(samples)), dtype=np.float64)
    per_pass = max(1, _CHUNK_ELEMENTS // max(1, flat.size))
    for first in range(0, n_resamples, per_pass):
        count = min(per_pass, n_resamples - first)
        draws = rng.random((count, flat.size))
        index = element_start + (draws * element_size).astype(np.int64)
        sums = np.add.reduceat(flat[index], starts, axis=1)
        out[first:first + count] = sums / sizes
    np.clip(out, 0.0, 1.0, out=out)
    return out


def flatten(stats: Mapping[str, KeyStats]) -> dict[str, float | int]:
    """simple-evals key style: ``key``, ``key:n_samples``, ``key:bootstrap_std`` plus CI bounds."""
    flat: dict[str, float | int] = {}
    for key, s in stats.items():
        flat[key] = s.mean
        flat[f"{key}:n_samples"] = s.n_samples
        flat[f"{key}:bootstrap_std"] = s.bootstrap_std
        flat[f"{key}:ci_lower"] = s.ci_lower
        flat[f"{key}:ci_upper"] = s.ci_upper
    return flat
