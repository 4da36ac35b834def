"""Run-level statistics: clipped means, bootstrap standard deviations and percentile CIs.

Matches simple-evals: for each key, the mean of the unclipped per-answer values, clipped to [0, 1];
the bootstrap std is the population std of ``n_resamples`` resample means, each clipped; the CI is a
pair of percentiles of the same clipped means. Randomness comes only from ``seed``.

Several answers per conversation (repeats, the four reference completions of a row, pooled runs): a
conversation is the unit of the CI. Its bootstrap draws the key's C conversations with replacement
and takes all the answers of each drawn conversation (a cluster bootstrap); a resample mean is the
ratio ``sum over drawn conversations of (sum of their answers' values) / sum over drawn conversations
of (number of their answers)``, clipped. A conversation is drawn as the pair (sum, count), held as
the complex number ``sum + 1j * count`` (pairs add up component by component), so every exact
sampler of `healthbench.scoring.bootstrap` draws it as it draws a value. With one answer per
conversation this is the answers' bootstrap itself, and the code takes that path (same bits). The
``bootstrap_std`` of `KeyStats` stays simple-evals' (the answers' bootstrap, whatever the
conversations), because simple-evals' ``:bootstrap_std`` keys promise it; the CI is the
conversations'.

Every key's resamples are exact: `healthbench.scoring.bootstrap` draws them (its module doc says how,
and why sharing draws between keys changes no key's numbers).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from healthbench.defaults import (
    DEFAULT_BOOTSTRAP_WORKERS,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
)
from healthbench.scoring.bootstrap import Floats, PairSample, Sample, Workspace, resample_sums

Key = TypeVar("Key", bound=Hashable)

__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "BootstrapOptions",
    "Column",
    "KeyStats",
    "Workspace",
    "aggregate",
    "aggregate_columns",
    "aggregate_groups",
    "bootstrap_columns",
    "bootstrap_means",
    "clip_unit",
    "clipped_mean",
    "collect",
    "columns_of",
    "conversation_clusters",
    "flatten",
]


@dataclass(frozen=True)
class BootstrapOptions:
    """The bootstrap's settings, which travel together: resamples, seed, CI level and threads."""

    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE
    workers: int = DEFAULT_BOOTSTRAP_WORKERS  # bootstrap threads; the numbers do not depend on it


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
    shared by all keys of a run (its graded conversations). Rows only let keys share draws."""

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


def collect(per_conversation: Iterable[Mapping[str, float]]) -> dict[str, list[float]]:
    """Group values by key, keys in first-seen order (simple-evals' order)."""
    grouped: dict[str, list[float]] = {}
    for metrics in per_conversation:
        for key, value in metrics.items():
            grouped.setdefault(key, []).append(value)
    return grouped


def columns_of(per_conversation: Sequence[Mapping[str, float]]) -> dict[str, Column]:
    """`collect` that also records each value's row (its position in ``per_conversation``)."""
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


def aggregate(
    per_conversation: Sequence[Mapping[str, float]],
    *,
    options: BootstrapOptions | None = None,
    workspace: Workspace | None = None,
) -> dict[str, KeyStats]:
    """Aggregate per-conversation metrics into `KeyStats` per key (same seed, same bits)."""
    return aggregate_columns(
        columns_of(per_conversation), len(per_conversation), options=options, workspace=workspace
    )


def aggregate_groups(
    grouped: Mapping[str, Sequence[float]],
    *,
    options: BootstrapOptions | None = None,
    workspace: Workspace | None = None,
) -> dict[str, KeyStats]:
    """`aggregate` for values already grouped by key (no rows in common: each key on its own rows)."""
    columns: dict[str, Column] = {}
    offset = 0
    for key, values in grouped.items():
        array = np.asarray(values, dtype=np.float64)
        columns[key] = Column(np.arange(offset, offset + array.size, dtype=np.intp), array)
        offset += array.size
    return aggregate_columns(columns, offset, options=options, workspace=workspace)


def aggregate_columns(
    columns: Mapping[Key, Column],
    n_rows: int,
    *,
    options: BootstrapOptions | None = None,
    workspace: Workspace | None = None,
) -> dict[Key, KeyStats]:
    """`KeyStats` per non-empty key (in the mapping's order) of samples laid out as `Column`s (keys
    are metric names, or any hashable: (run, name) for a batch of runs drawn in one call).

    ``options`` (default `BootstrapOptions()`) sets the bootstrap. ``workspace`` holds its scratch
    buffers: a new one per call by default; a long-lived caller may pass the same one to every call
    to reuse them (the numbers never depend on it).
    """
    options = options or BootstrapOptions()
    keys = [key for key, column in columns.items() if column.values.size > 0]
    if not keys:
        return {}
    samples = [columns[key] for key in keys]
    n_resamples = options.n_resamples
    clustered = _clustered(samples)
    unclustered = [Column(c.rows, c.values) for c in samples] if clustered else samples
    boot = bootstrap_columns(unclustered, n_rows, options, workspace=workspace)
    alpha = (1.0 - options.confidence) / 2.0
    if n_resamples > 0:
        stds = boot.std(axis=0)
        if clustered:
            boot = bootstrap_columns(samples, n_rows, options, workspace=workspace)
        lows, highs = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    else:
        stds = lows = highs = np.full(len(keys), np.nan)
    return {
        key: KeyStats(
            mean=clipped_mean(column.values),
            n_samples=int(column.values.size),
            bootstrap_std=float(stds[i]),
            ci_lower=float(lows[i]),
            ci_upper=float(highs[i]),
            n_conversations=column.n_clusters,
        )
        for i, (key, column) in enumerate(zip(keys, samples, strict=True))
    }


def bootstrap_means(
    samples: Sequence[npt.ArrayLike], options: BootstrapOptions, *, workspace: Workspace | None = None
) -> Floats:
    """Clipped means of ``options.n_resamples`` resamples (with replacement) of every sample: shape
    (n_resamples, len(samples)). Samples share no rows; identical samples share their draws."""
    arrays = [np.asarray(s, dtype=np.float64) for s in samples]
    bounds = np.cumsum([0] + [a.size for a in arrays])
    columns = [
        Column(np.arange(lo, hi, dtype=np.intp), a)
        for lo, hi, a in zip(bounds[:-1], bounds[1:], arrays, strict=True)
    ]
    return bootstrap_columns(columns, int(bounds[-1]), options, workspace=workspace)


def bootstrap_columns(
    columns: Sequence[Column], n_rows: int, options: BootstrapOptions, *, workspace: Workspace | None = None
) -> Floats:
    """Clipped resample means, shape (options.n_resamples, len(columns)), each column resampled
    exactly (`resample_sums`: ``options.workers`` threads; neither they nor ``workspace`` change a
    bit); over conversations (the module doc's ratio) when a column has several answers of one
    conversation. The CI level is not used here."""
    if any(c.values.size == 0 for c in columns):
        raise ValueError("cannot bootstrap an empty sample")
    if options.workers < 1:
        raise ValueError(f"workers must be at least 1, got {options.workers}")
    clustered = _clustered(columns)
    samples: Sequence[Sample] = columns
    if clustered:  # a conversation's answers resampled together: sums of values and of counts
        pairs = [_conversation_pairs(c) for c in columns]
        samples, n_rows = pairs, max(int(p.rows[-1]) for p in pairs) + 1
    sums = resample_sums(
        samples,
        n_rows,
        n_resamples=options.n_resamples,
        seed=options.seed,
        workers=options.workers,
        workspace=workspace,
    )
    means: Floats = sums.real / sums.imag if clustered else sums
    if not clustered:
        np.divide(means, [c.values.size for c in columns], out=means)
    return clip_unit(means, out=means)


def _clustered(columns: Sequence[Column]) -> bool:
    """Whether some column holds several answers of one conversation."""
    return any(c.clusters is not None and c.n_clusters < c.values.size for c in columns)


def _conversation_pairs(column: Column) -> PairSample:
    """A key's conversations: on row c (conversation c) the pair ``sum of its answers' values + 1j *
    number of its answers``."""
    clusters = column.rows if column.clusters is None else column.clusters
    ids, inverse = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inverse, weights=column.values, minlength=ids.size)
    counts = np.bincount(inverse, minlength=ids.size)
    return PairSample(ids.astype(np.intp), sums + 1j * counts)


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
