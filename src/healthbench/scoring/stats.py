"""Run-level statistics: clipped means, bootstrap standard deviations and percentile CIs.

Matches simple-evals: for each key, the mean of the unclipped per-conversation values, clipped to
[0, 1]; the bootstrap std is the population std of 1,000 resample means, each clipped. Every key is
resampled independently from its own values (as simple-evals does), but all keys and all resamples
are drawn in a few vectorized passes. Randomness comes only from the ``seed`` argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DEFAULT_RESAMPLES = 1000
_CHUNK_ELEMENTS = 1 << 18  # draws per vectorized pass: three 2 MB buffers, cache-sized


@dataclass(frozen=True)
class KeyStats:
    """The aggregate of one metric key over a run."""

    mean: float
    n_samples: int
    bootstrap_std: float
    ci_lower: float
    ci_upper: float


def clipped_mean(values: npt.ArrayLike) -> float:
    return float(np.clip(np.mean(np.asarray(values, dtype=np.float64)), 0, 1))


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
    workers: int = 1,
) -> dict[str, KeyStats]:
    """Aggregate per-conversation metrics into `KeyStats` per key (same seed, same bits)."""
    return aggregate_groups(collect(per_conversation), n_resamples=n_resamples, seed=seed,
                            confidence=confidence, workers=workers)


def aggregate_groups(
    grouped: Mapping[str, Sequence[float]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    workers: int = 1,
) -> dict[str, KeyStats]:
    keys = [key for key, values in grouped.items() if len(values) > 0]
    if not keys:
        return {}
    arrays = [np.asarray(grouped[key], dtype=np.float64) for key in keys]
    boot = bootstrap_means(arrays, n_resamples=n_resamples, seed=seed, workers=workers)
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
    samples: Sequence[npt.NDArray[np.float64]], *, n_resamples: int, seed: int, workers: int = 1
) -> npt.NDArray[np.float64]:
    """Clipped means of ``n_resamples`` resamples (with replacement) of every sample at once.

    Returns an array of shape (n_resamples, len(samples)). Resample ``r`` of sample ``k`` uses the
    uniform draws ``r * total + offset_k ... + len_k`` of ``default_rng(seed).random()`` (``total`` =
    all values of all samples), so the result depends only on the inputs and the seed: not on the
    chunking, nor on ``workers`` (threads that each take a contiguous block of resamples from the
    same stream, advanced to the block's first draw).
    """
    sizes = np.array([len(s) for s in samples], dtype=np.int64)
    if np.any(sizes == 0):
        raise ValueError("cannot bootstrap an empty sample")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    out = np.empty((n_resamples, len(samples)), dtype=np.float64)
    if not samples or n_resamples == 0:
        return out
    layout = _Layout.of(samples, sizes)
    bounds = np.linspace(0, n_resamples, min(workers, n_resamples) + 1).astype(np.int64).tolist()
    blocks = list(itertools.pairwise(bounds))
    if len(blocks) == 1:
        layout.fill(out, 0, n_resamples, np.random.PCG64(seed))
    else:
        def run(block: tuple[int, int]) -> None:
            bit_generator = np.random.PCG64(seed)
            bit_generator.advance(block[0] * layout.flat.size)  # one 64-bit draw per uniform
            layout.fill(out, block[0], block[1], bit_generator)

        with ThreadPoolExecutor(max_workers=len(blocks), thread_name_prefix="bootstrap") as pool:
            list(pool.map(run, blocks))
    np.divide(out, sizes, out=out)
    np.clip(out, 0.0, 1.0, out=out)
    return out


@dataclass(frozen=True)
class _Layout:
    """All samples concatenated, with each value's sample offset and size (for index arithmetic)."""

    flat: npt.NDArray[np.float64]
    starts: npt.NDArray[np.int64]
    element_start: npt.NDArray[np.int64]
    element_size: npt.NDArray[np.float64]

    @classmethod
    def of(cls, samples: Sequence[npt.NDArray[np.float64]], sizes: npt.NDArray[np.int64]) -> _Layout:
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        return cls(np.concatenate(samples), starts, np.repeat(starts, sizes),
                   np.repeat(sizes, sizes).astype(np.float64))

    def fill(self, out: npt.NDArray[np.float64], first: int, stop: int,
             bit_generator: np.random.BitGenerator) -> None:
        """Write the resample sums of rows ``first:stop`` of ``out``, in cache-sized blocks."""
        rng = np.random.Generator(bit_generator)
        size = self.flat.size
        per_pass = min(stop - first, max(1, _CHUNK_ELEMENTS // size))
        draws = np.empty((per_pass, size), dtype=np.float64)
        index = np.empty((per_pass, size), dtype=np.int64)
        picked = np.empty((per_pass, size), dtype=np.float64)
        for row in range(first, stop, per_pass):
            count = min(per_pass, stop - row)
            u, i, v = draws[:count], index[:count], picked[:count]
            rng.random(out=u)
            np.multiply(u, self.element_size, out=u)
            i[...] = u  # truncation == floor for these non-negative values
            np.add(i, self.element_start, out=i)
            np.take(self.flat, i, out=v)
            out[row:row + count] = np.add.reduceat(v, self.starts, axis=1)


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
