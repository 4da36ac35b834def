"""Pairwise agreement counts and the precision / recall / F1 formulas of the HealthBench meta-eval.

A *pair* is one rater label set against one reference label on the same row: the judge's label against
each physician label on the row, or one physician's label against each *other* label on the row. Every
meta-eval metric is a ratio of four pair counts, with the rater in the role of the prediction and the
reference label in the role of the truth:

    tp: rater True,  reference True        fp: rater True,  reference False
    fn: rater False, reference True        tn: rater False, reference False

so simple-evals' loops over pairs reduce to per-row integer counts that are summed per group with
``np.bincount``. The formulas, in simple-evals' names (``value`` over ``n`` pairs):

    precision_pos = tp / (tp + fp)      agreement among pairs where the rater said True
    precision_neg = tn / (tn + fn)      ... where the rater said False
    recall_pos    = tp / (tp + fn)      ... where the reference said True
    recall_neg    = tn / (tn + fp)      ... where the reference said False
    f1_<c>        = 2 * (p * r) / (p + r), 0.0 when p == r == 0, undefined when p or r is undefined;
                    n = n_p + n_r - agreements (tp + fp + fn for pos, tn + fn + fp for neg)
    <m>_balanced  = (<m>_pos + <m>_neg) / 2, undefined when either is; n = n_pos + n_neg

A ratio over zero pairs is undefined. Here undefined is NaN; the public layer (`meta`) turns it into None.

`pool_groups` and `physician_baseline` are the physician-baseline aggregation of the simple-evals
notebook (n-weighted means, the ``n > threshold`` filter, the percentile with ties counting half);
`healthbench.scoring.meta` documents what they mean.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

TP, FP, FN, TN = 0, 1, 2, 3
STEMS = ("precision", "recall", "f1")
CLASSES = ("pos", "neg", "balanced")
METRIC_NAMES = tuple(f"{stem}_{cls}" for stem in STEMS for cls in CLASSES)

Counts = NDArray[np.int64]
Values = NDArray[np.float64]


def judge_pair_counts(positives: Counts, totals: Counts, judge: NDArray[np.bool_]) -> Counts:
    """Pair counts per row, shape (rows, 4): the judge's label on each row against every label on it.

    ``positives`` and ``totals`` are the number of True labels and of labels on each row.
    """
    return _pair_cells(judge.astype(np.int64), positives, totals - positives)


def physician_pair_counts(labels: NDArray[np.bool_], positives: Counts, totals: Counts) -> Counts:
    """Pair counts per label, shape (labels, 4): each label against every *other* label on its row.

    ``positives`` and ``totals`` are given per label (the counts of the label's row), so a row with a
    single label yields four zeros. A physician who labelled a row twice is paired with their other
    label, exactly as simple-evals' "all labels but this index" does.
    """
    said_true = labels.astype(np.int64)
    other_true = positives - said_true
    return _pair_cells(said_true, other_true, totals - 1 - other_true)


def _pair_cells(said_true: Counts, other_true: Counts, other_false: Counts) -> Counts:
    """(items, 4) pair counts of one label (1 = True) against ``other_true`` True and
    ``other_false`` False labels."""
    said_false = 1 - said_true
    out = np.empty((len(said_true), 4), dtype=np.int64)
    out[:, TP] = said_true * other_true
    out[:, FP] = said_true * other_false
    out[:, FN] = said_false * other_true
    out[:, TN] = said_false * other_false
    return out


def sum_by_group(counts: Counts, groups: NDArray[np.int64], n_groups: int) -> Counts:
    """Sum (items, 4) counts into (n_groups, 4) by integer group code (exact below 2**53 pairs)."""
    out = np.empty((n_groups, 4), dtype=np.int64)
    for column in range(4):
        summed = np.bincount(groups, weights=counts[:, column], minlength=n_groups)
        out[:, column] = summed.astype(np.int64)
    return out


def _ratio(numerator: Counts, denominator: Counts) -> Values:
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _f1(precision: Values, recall: Values) -> Values:
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = 2 * (precision * recall) / (precision + recall)
    both_zero = (precision == 0) & (recall == 0)  # False where either is NaN, so NaN stays NaN
    return np.where(both_zero, 0.0, f1)


def agreement_metrics(counts: Counts) -> dict[str, tuple[Values, Counts]]:
    """All nine metrics for counts of shape (..., 4): name -> (values with NaN where undefined, n)."""
    tp, fp, fn, tn = counts[..., TP], counts[..., FP], counts[..., FN], counts[..., TN]
    out: dict[str, tuple[Values, Counts]] = {
        "precision_pos": (_ratio(tp, tp + fp), tp + fp),
        "precision_neg": (_ratio(tn, tn + fn), tn + fn),
        "recall_pos": (_ratio(tp, tp + fn), tp + fn),
        "recall_neg": (_ratio(tn, tn + fp), tn + fp),
    }
    out["f1_pos"] = (_f1(out["precision_pos"][0], out["recall_pos"][0]), tp + fp + fn)
    out["f1_neg"] = (_f1(out["precision_neg"][0], out["recall_neg"][0]), tn + fn + fp)
    for stem in STEMS:
        pos_value, pos_n = out[f"{stem}_pos"]
        neg_value, neg_n = out[f"{stem}_neg"]
        out[f"{stem}_balanced"] = ((pos_value + neg_value) / 2, pos_n + neg_n)
    return {name: out[name] for name in METRIC_NAMES}


def pool_groups(values: Values, n: Counts, groups: list[list[int]]) -> tuple[Values, Counts]:
    """n-weighted mean of the defined values over each group of last-axis columns, and the summed n.

    The sums run column by column in the given order, so equal inputs give bit-equal outputs (the
    percentile compares values for equality). A group with no defined value is NaN with n 0.
    """
    defined = ~np.isnan(values)
    weighted = np.where(defined, values * n, 0.0)
    weight = np.where(defined, n, 0)
    pooled = np.full((*values.shape[:-1], len(groups)), np.nan)
    total = np.zeros((*values.shape[:-1], len(groups)), dtype=np.int64)
    for g, columns in enumerate(groups):
        numerator = np.zeros(values.shape[:-1])
        for column in columns:
            numerator = numerator + weighted[..., column]
            total[..., g] += weight[..., column]
        np.divide(numerator, total[..., g], out=pooled[..., g], where=total[..., g] > 0)
    return pooled, total


def physician_baseline(values: Values, n: Counts, judge: Values, threshold: int) -> dict[str, Values]:
    """Physician aggregates per scope from (physicians, scopes) values and n and the judge's (scopes,):
    ``mean`` and ``count`` over qualifying physicians (defined and n > threshold), ``mean_all`` over
    every defined one, ``percentile`` of the judge among the qualifying (ties count half)."""
    defined = ~np.isnan(values)
    qualifying = defined & (n > threshold)
    count = qualifying.sum(axis=0)
    below = (qualifying & (values < judge)).sum(axis=0)
    tied = (qualifying & (values == judge)).sum(axis=0)
    percentile = np.full(judge.shape, np.nan)
    ok = (count > 0) & ~np.isnan(judge)
    percentile[ok] = (below[ok] + 0.5 * tied[ok]) / count[ok] * 100
    return {
        "mean": _weighted_mean(values, n, qualifying),
        "mean_all": _weighted_mean(values, n, defined),
        "count": count.astype(np.float64),
        "percentile": percentile,
    }


def _weighted_mean(values: Values, n: Counts, mask: NDArray[np.bool_]) -> Values:
    weight = np.where(mask, n, 0).sum(axis=0)
    out = np.full(weight.shape, np.nan)
    np.divide(np.where(mask, values * n, 0.0).sum(axis=0), weight, out=out, where=weight > 0)
    return out
