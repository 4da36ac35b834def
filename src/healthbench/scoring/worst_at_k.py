"""Worst-at-k as the HealthBench paper defines it: how good the worst of k answers to a conversation is.

For a conversation with n graded answers and k <= n, its worst-at-k is the expected minimum score of
k answers drawn without replacement from its n: with the scores sorted ascending s_1 <= ... <= s_n,

    E[min] = sum_i s_i * C(n - i, k - 1) / C(n, k)

(s_i is the minimum of a k-subset exactly when the subset holds answer i and k - 1 of the n - i
answers above it; the unbiased order-statistic estimator). A run's worst-at-k is the mean of that
over the conversations with at least k graded answers (the others are left out of that k, and
counted), clipped to [0, 1] like every other run figure; its CI is the bootstrap over those
conversations (one value each: `healthbench.scoring.stats`). worst-at-1 is the mean over
conversations of their mean answer. Pure: arrays in, numbers out; randomness from the seed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np
import numpy.typing as npt

from healthbench.scoring.stats import BootstrapOptions, Column, aggregate_columns

Floats = npt.NDArray[np.float64]

__all__ = [
    "GroupedScores",
    "WorstAtK",
    "expected_minima",
    "minimum_weights",
    "scores_by_conversation",
    "worst_at_k_curves",
]


@dataclass(frozen=True)
class WorstAtK:
    """One point of a worst-at-k curve: the clipped mean over ``n_conversations`` conversations
    (those with at least k graded answers) and its bootstrap CI over them."""

    k: int
    worst_at_k: float
    ci_lower: float
    ci_upper: float
    n_conversations: int


def minimum_weights(n: int) -> Floats:
    """(n, n): row k - 1 holds the weights C(n - i, k - 1) / C(n, k) of the ascending scores
    s_1..s_n in the expected minimum of k of them (each row sums to 1)."""
    weights = np.zeros((n, n))
    for k in range(1, n + 1):
        total = comb(n, k)
        for i in range(1, n - k + 2):
            weights[k - 1, i - 1] = comb(n - i, k - 1) / total
    return weights


def expected_minima(scores: npt.ArrayLike, weights: dict[int, Floats] | None = None) -> Floats:
    """For one conversation's n graded scores, the expected minimum of k of them drawn without
    replacement, for k = 1..n (``weights``: `minimum_weights` by n, filled as needed)."""
    ordered = np.sort(np.asarray(scores, dtype=np.float64))
    if ordered.ndim != 1 or ordered.size == 0:
        raise ValueError("worst-at-k needs a conversation's scores as a non-empty 1-d array")
    known = {} if weights is None else weights
    if ordered.size not in known:
        known[ordered.size] = minimum_weights(ordered.size)
    result: Floats = known[ordered.size] @ ordered
    return result


@dataclass(frozen=True)
class GroupedScores:
    """A curve's graded scores as two columns: each score's conversation (0, 1, ... in first-seen
    order) and the score."""

    conversation: npt.NDArray[np.intp]
    scores: Floats

    @classmethod
    def of(cls, ids: npt.ArrayLike, scores: npt.ArrayLike) -> GroupedScores:
        """From each score's conversation id (any comparable values)."""
        _, first, inverse = np.unique(np.asarray(ids), return_index=True, return_inverse=True)
        rank = np.empty(first.size, dtype=np.intp)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size)
        return cls(rank[inverse.ravel()], np.asarray(scores, dtype=np.float64))


def worst_at_k_curves(
    curves: Sequence[Sequence[npt.ArrayLike] | GroupedScores], options: BootstrapOptions | None = None
) -> list[list[WorstAtK]]:
    """Each curve's points, k = 1 up to the most graded answers of one of its conversations.

    A curve is given as its conversations' graded scores (one array per conversation, empty arrays
    ignored; or as `GroupedScores`). The curves are bootstrapped in one call (as ``options`` says; default
    `BootstrapOptions()`): every point's resamples are exact bootstrap resamples of its conversations.
    """
    columns: dict[tuple[int, int], Column] = {}
    weights: dict[int, Floats] = {}
    n_rows = 0
    for curve, conversations in enumerate(curves):
        minima, sizes = _minima_table(conversations, weights)
        n_rows = max(n_rows, sizes.size)
        for k in range(1, int(sizes.max(initial=0)) + 1):
            rows = np.flatnonzero(sizes >= k)
            columns[(curve, k)] = Column(rows, minima[rows, k - 1])
    stats = aggregate_columns(columns, n_rows, options=options)
    out: list[list[WorstAtK]] = [[] for _ in curves]
    for (curve, k), s in stats.items():
        out[curve].append(WorstAtK(k, s.mean, s.ci_lower, s.ci_upper, s.n_samples))
    return out


def _minima_table(
    conversations: Sequence[npt.ArrayLike] | GroupedScores, weights: dict[int, Floats]
) -> tuple[Floats, npt.NDArray[np.intp]]:
    """`expected_minima` of every non-empty conversation, as rows of one table (k = 1..n in row
    order, NaN beyond), and each row's n. Conversations of the same n are computed together, each
    by the same matrix-vector product as `expected_minima` (so the figures are the same)."""
    if isinstance(conversations, GroupedScores):
        sizes = np.bincount(conversations.conversation).astype(np.intp)
        order = np.lexsort((conversations.scores, conversations.conversation))
        ascending, starts = conversations.scores[order], np.cumsum(sizes) - sizes

        def ordered(rows: npt.NDArray[np.intp], n: int) -> Floats:
            block: Floats = ascending[starts[rows][:, None] + np.arange(n)]
            return block

    else:
        scores = [np.asarray(s, dtype=np.float64) for s in conversations]
        if any(s.ndim != 1 for s in scores):
            raise ValueError("worst-at-k needs a conversation's scores as a non-empty 1-d array")
        scores = [s for s in scores if s.size]
        sizes = np.fromiter(map(len, scores), np.intp, len(scores))

        def ordered(rows: npt.NDArray[np.intp], n: int) -> Floats:
            return np.sort(np.stack([scores[r] for r in rows]), axis=1)

    table = np.full((sizes.size, int(sizes.max(initial=0))), np.nan)
    for n in np.unique(sizes).tolist():
        rows = np.flatnonzero(sizes == n)
        if n not in weights:
            weights[n] = minimum_weights(n)
        table[rows, :n] = np.matmul(weights[n], ordered(rows, n)[:, :, None])[:, :, 0]
    return table, sizes


def scores_by_conversation(ids: Sequence[Hashable], scores: Sequence[float]) -> list[Floats]:
    """Graded scores grouped by conversation id (first-seen order): a curve's input."""
    grouped: dict[Hashable, list[float]] = {}
    for i, score in zip(ids, scores, strict=True):
        grouped.setdefault(i, []).append(score)
    return [np.array(v, dtype=np.float64) for v in grouped.values()]
