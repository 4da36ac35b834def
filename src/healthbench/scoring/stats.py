"""Run-level statistics: clipped means, bootstrap standard deviations and percentile CIs.

Matches simple-evals: for each key, the mean of the unclipped per-answer values, clipped to [0, 1].
Its uncertainty comes from the one bootstrap, `healthbench.scoring.bootstrap` (its docstring is the
formula): ``n_resamples`` resamples of the conversations, seeded by ``seed``, each key's resample
mean clipped to [0, 1]. ``bootstrap_std`` is the population std of a key's resample means over its
answers (simple-evals' ``:bootstrap_std``: each answer its own unit); the CI is the pair of
percentiles of its resample means over conversations: with several answers of one conversation
(repeats, the reference completions of a row, pooled runs: `Column.clusters`) a conversation is
drawn with all its answers, otherwise the two are the same resamples. Keys of one call share the
draws of their row space (a key on some of the rows is the mean over the drawn rows it covers).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from healthbench.defaults import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from healthbench.scoring.bootstrap import Floats, nan_std, percentile_ci, resample_means

Key = TypeVar("Key", bound=Hashable)

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "BootstrapOptions",
    "Column",
    "KeyStats",
    "aggregate_columns",
    "clip_unit",
    "clipped_mean",
    "columns_of",
    "conversation_clusters",
    "flatten",
]


@dataclass(frozen=True)
class BootstrapOptions:
    """The bootstrap's settings, which travel together: resamples, seed and CI level."""

    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE


@dataclass(frozen=True)
class KeyStats:
    """The aggregate of one metric key over a run."""

    mean: float
    n_samples: int  # answers (simple-evals' n_samples)
    bootstrap_std: float  # simple-evals': over answers
    ci_lower: float  # over conversations (the cluster bootstrap) when some have several answers
    ci_upper: float
    n_conversations: int  # the unit of the CI: n_samples unless some conversations have several answers


@dataclass(frozen=True)
class Column:
    """One key's sample: ``values[i]`` belongs to row ``rows[i]`` (strictly increasing) of a row space
    shared by all keys of a run (its graded answers): keys share the draws of the rows."""

    rows: npt.NDArray[np.intp]
    values: Floats
    clusters: npt.NDArray[np.intp] | None = None  # per value: its conversation (None: its own)

    def in_clusters(self, clusters: npt.NDArray[np.intp] | None) -> Column:
        """This column with ``clusters[row]`` as each value's conversation (``clusters`` per row of
        the row space, as `conversation_clusters` gives; None: one answer per conversation)."""
        return self if clusters is None else Column(self.rows, self.values, clusters[self.rows])

    @property
    def n_clusters(self) -> int:
        """How many conversations the values belong to."""
        if self.clusters is None:
            return int(self.values.size)
        return int(np.unique(self.clusters).size)


def conversation_clusters(ids: Sequence[Hashable]) -> npt.NDArray[np.intp] | None:
    """Per answer, its conversation as 0, 1, ... (by first appearance of ``ids``), for
    `Column.in_clusters`; None when every answer is the only one of its conversation (the answers'
    bootstrap is then the conversations')."""
    if len(set(ids)) == len(ids):
        return None
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(i, len(index)) for i in ids), dtype=np.intp, count=len(ids))


def clip_unit(values: npt.ArrayLike, out: Floats | None = None) -> Floats:
    """Means clipped to [0, 1], as simple-evals clips every mean (into ``out`` when given)."""
    return np.clip(values, 0.0, 1.0, out=out)


def clipped_mean(values: npt.ArrayLike) -> float:
    """simple-evals' ``np.clip(np.mean(values), 0, 1)``."""
    return float(clip_unit(np.mean(np.asarray(values, dtype=np.float64))))


def columns_of(per_conversation: Sequence[Mapping[str, float]]) -> dict[str, Column]:
    """Values grouped by key, keys in first-seen order (simple-evals' order), each with its row (its
    position in ``per_conversation``)."""
    rows: dict[str, list[int]] = {}
    values: dict[str, list[float]] = {}
    for row, metrics in enumerate(per_conversation):
        for key, value in metrics.items():
            if key not in rows:
                rows[key], values[key] = [], []
            rows[key].append(row)
            values[key].append(value)
    return {
        key: Column(np.array(rows[key], dtype=np.intp), np.array(values[key], dtype=np.float64))
        for key in rows
    }


def aggregate_columns(
    columns: Mapping[Key, Column], n_rows: int, *, options: BootstrapOptions | None = None
) -> dict[Key, KeyStats]:
    """`KeyStats` per non-empty key (in the mapping's order) of samples laid out as `Column`s on
    ``n_rows`` shared rows (keys are metric names, or any hashable: (run, name) for a batch of runs
    bootstrapped in one call), as ``options`` says (default `BootstrapOptions()`; module doc)."""
    options = options or BootstrapOptions()
    keys = [key for key, column in columns.items() if column.values.size > 0]
    samples = [columns[key] for key in keys]
    nan = np.full(len(keys), np.nan)
    stds = lows = highs = nan
    if samples and options.n_resamples > 0:
        by_answer = _resample(samples, [c.rows for c in samples], n_rows, options)
        stds = nan_std(by_answer)
        lows, highs = percentile_ci(by_answer, options.confidence)
        clustered = [i for i, c in enumerate(samples) if c.clusters is not None]
        if clustered:
            units = [c for c in (samples[i].clusters for i in clustered) if c is not None]
            n_conversations = max(int(u.max()) for u in units) + 1
            by_conversation = _resample([samples[i] for i in clustered], units, n_conversations, options)
            lows[clustered], highs[clustered] = percentile_ci(by_conversation, options.confidence)
    out = {}
    for i, (key, column) in enumerate(zip(keys, samples, strict=True)):
        mean = clipped_mean(column.values)
        spread = (nan[i],) * 3 if np.isnan(mean) else (stds[i], lows[i], highs[i])  # NaN values
        out[key] = KeyStats(
            mean=mean,
            n_samples=int(column.values.size),
            bootstrap_std=float(spread[0]),
            ci_lower=float(spread[1]),
            ci_upper=float(spread[2]),
            n_conversations=column.n_clusters,
        )
    return out


def _resample(
    samples: Sequence[Column],
    units: Sequence[npt.NDArray[np.intp]],
    n_units: int,
    options: BootstrapOptions,
) -> Floats:
    """Clipped resample means (n_resamples, len(samples)) with each value's unit (row or conversation)
    in ``units``: per unit, each key's sum of values and number of values (`resample_means`)."""
    sums = np.zeros((n_units, len(samples)))
    counts = np.zeros((n_units, len(samples)))
    for k, (column, unit) in enumerate(zip(samples, units, strict=True)):
        sums[:, k] = np.bincount(unit, weights=column.values, minlength=n_units)
        counts[:, k] = np.bincount(unit, minlength=n_units)
    rng = np.random.default_rng(options.seed)
    return clip_unit(resample_means(sums, counts, options.n_resamples, rng))


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
