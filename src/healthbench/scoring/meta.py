"""Meta-eval metrics: how often a judge agrees with physicians, next to how often physicians agree.

Definitions follow simple-evals (``healthbench_meta_eval.py`` for the agreement metrics, the meta-eval
cell of ``healthbench_scripts/healthbench_analysis.ipynb`` for the physician baseline):

* **Pairwise, not majority vote.** The judge's label on a graded row is paired with every physician label
  on that row; a physician's label is paired with every *other* label on its row (a row with a single
  label contributes nothing to the baseline). Precision, recall, F1 per class and their balanced means
  are ratios of the pooled pairs; `healthbench.scoring.agreement` has the formulas and their ``n``.
* **Scopes.** Every number exists overall, per category (``"<category>: <key>"``) and per theme
  (``"theme:<word>: <key>"``): a theme is the first word of a category after ``cluster:``, the grouping
  the notebook uses for the paper's table. A theme's value, for the judge and for each physician alike,
  is the n-weighted mean of its categories' defined values, n the sum of those categories' n (as the
  notebook does; a theme whose categories are all undefined is undefined, with n 0).
  Overall values are pooled over all pairs (simple-evals' own overall keys).
* **Physician baseline** (``f1_balanced`` only, as in simple-evals). Each physician's value on a scope
  has simple-evals' n = tp + tn + 2·(fp + fn) pairs. A physician *qualifies* when the value is defined
  and n > ``min_physician_ratings`` (strictly, default 50: the notebook's ``MIN_SAMPLES``).
  ``physician_f1_balanced_mean`` is the n-weighted mean over qualifying physicians;
  ``physician_f1_balanced_mean_all`` is the n-weighted mean over every physician with a defined value,
  which is what the notebook plots as "Weighted average of physicians" (it filters for the percentile
  only). ``model_f1_balanced_percentile`` = 100 · (qualifying physicians below the judge + ½ · those
  exactly equal) / qualifying physicians: ties count half, as in the notebook.
* **Undefined** numbers (a ratio over zero pairs, or an F1 / balanced mean with an undefined part) are
  ``None`` and their key is still present; simple-evals leaves such keys out
  (`MetaEvalResult.simple_evals_metadata` reproduces that shape). Every ``n`` is ``"<key>:n_samples"``.
* **Ungraded rows** (judge label ``None``) are left out of every judge number and counted in
  ``ungraded_rows``. The physician baseline uses every row, so it does not depend on the judge measured.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
from numpy.typing import NDArray

from healthbench.data.schema import MetaEvalRecord
from healthbench.defaults import DEFAULT_MIN_PHYSICIAN_RATINGS
from healthbench.scoring.agreement import (
    METRIC_NAMES,
    Counts,
    Values,
    agreement_metrics,
    judge_pair_counts,
    physician_baseline,
    physician_pair_counts,
    pool_groups,
    sum_by_group,
)

MetricValue = float | int | None
ROW_KEYS = ("num_physician_labels", "percent_physician_pos", "model_predicted_positive")


@dataclass(frozen=True, slots=True)
class MetaRow:
    """What the metrics need from one meta-eval row: its category and its physicians' labels."""

    category: str
    labels: tuple[bool, ...]
    physician_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.labels:
            raise ValueError("a meta-eval row needs at least one physician label")
        if len(self.labels) != len(self.physician_ids):
            raise ValueError(
                f"a meta-eval row has {len(self.labels)} labels but {len(self.physician_ids)} physician ids"
            )
        if not all(type(label) is bool for label in self.labels):
            raise ValueError(f"physician labels must be True or False, got {self.labels!r}")

    @classmethod
    def from_record(cls, record: MetaEvalRecord) -> MetaRow:
        return cls(record.category, tuple(record.binary_labels), tuple(record.anonymized_physician_ids))


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One line of the terminal table for a scope: ``"overall"``, a category or ``"theme:<word>"``."""

    name: str
    judge_f1_balanced: float | None
    judge_n: int
    physician_f1_balanced_mean: float | None
    physician_f1_balanced_mean_all: float | None
    percentile: float | None
    physician_count: int
    graded_rows: int


@dataclass(frozen=True)
class MetaEvalResult:
    """``metrics`` is flat and JSON-ready; the summaries feed a table; the counts back the detail views."""

    metrics: dict[str, MetricValue]
    overall: GroupSummary
    categories: tuple[GroupSummary, ...]
    themes: tuple[GroupSummary, ...]
    category_names: tuple[str, ...]
    physician_ids: tuple[str, ...]
    judge_counts: Counts = field(repr=False, compare=False)  # (1 + categories, 4): overall first
    physician_counts: Counts = field(repr=False, compare=False)  # (physicians, 1 + categories, 4)

    def physician_metrics(self) -> dict[str, dict[str, MetricValue]]:
        """Each physician's ``pairwise_physician_*`` metrics against the other physicians: overall, and
        for every category where the physician has at least one pair."""
        prefixes = self._prefixes()
        out: dict[str, dict[str, MetricValue]] = {}
        for code, physician in enumerate(self.physician_ids):
            counts = self.physician_counts[code]
            keep = [s for s in range(len(prefixes)) if s == 0 or counts[s].any()]
            entries = _scope_entries(counts[keep], [prefixes[s] for s in keep], "physician")
            flat: dict[str, MetricValue] = {}
            for key, value, n in entries:
                flat[key], flat[f"{key}:n_samples"] = value, n
            out[physician] = flat
        return out

    def simple_evals_metadata(self) -> dict[str, Any]:
        """simple-evals' ``model_agreement_metrics`` and ``physician_agreement_metric_lists`` shapes:
        ``{key: {"n", "value"}}`` and ``{key: {physician_id: {"n", "value"}}}``, undefined keys left out."""
        prefixes = self._prefixes()
        model = {
            key: {"n": n, "value": value}
            for key, value, n in _scope_entries(self.judge_counts, prefixes, "model")
            if value is not None
        }
        physicians: dict[str, dict[str, dict[str, float | int]]] = {}
        for code, physician in enumerate(self.physician_ids):
            for key, value, n in _scope_entries(self.physician_counts[code], prefixes, "physician"):
                if value is not None:
                    physicians.setdefault(key, {})[physician] = {"n": n, "value": value}
        return {"model_agreement_metrics": model, "physician_agreement_metric_lists": physicians}

    def _prefixes(self) -> list[str]:
        return ["", *(f"{category}: " for category in self.category_names)]


def theme_of(category: str) -> str:
    """The notebook's theme of a category: ``cluster:emergency_referrals_...`` -> ``emergency``."""
    return category.removeprefix("cluster:").split("_", 1)[0]


def physician_percentile(physician_values: Sequence[float], judge_value: float) -> float | None:
    """100 · (values below the judge + ½ · values equal to it) / count; None for no values."""
    if not physician_values:
        return None
    values = np.asarray(physician_values, dtype=np.float64)
    below, tied = int((values < judge_value).sum()), int((values == judge_value).sum())
    return float((below + 0.5 * tied) / len(values) * 100)


def meta_metrics(
    rows: Sequence[MetaRow | MetaEvalRecord],
    judge_labels: Sequence[bool | None],
    *,
    min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS,
) -> MetaEvalResult:
    """Judge-physician agreement and the physician baseline; ``judge_labels[i]`` grades ``rows[i]``.

    Raises ValueError on no rows, a judge label count that differs from the row count, a judge label
    that is not True / False / None, or a negative threshold.
    """
    if not rows:
        raise ValueError("there are no meta-eval rows to score")
    if min_physician_ratings < 0:
        raise ValueError(f"min_physician_ratings must be >= 0, got {min_physician_ratings}")
    meta_rows = [row if isinstance(row, MetaRow) else MetaRow.from_record(row) for row in rows]
    graded, said_true = _judge_array(judge_labels, len(meta_rows))
    enc = _encode(meta_rows)
    scopes = _Scopes.of(enc.categories)
    judge_counts, physician_counts = _pair_counts(enc, graded, said_true)

    # f1_balanced for every scope: overall and categories from the counts, themes pooled from categories
    judge_v, judge_n = agreement_metrics(judge_counts)["f1_balanced"]
    phys_v, phys_n = agreement_metrics(physician_counts)["f1_balanced"]
    theme_judge_v, theme_judge_n = pool_groups(judge_v[1:], judge_n[1:], scopes.groups)
    theme_phys_v, theme_phys_n = pool_groups(phys_v[:, 1:], phys_n[:, 1:], scopes.groups)
    judge_v, judge_n = np.concatenate([judge_v, theme_judge_v]), np.concatenate([judge_n, theme_judge_n])
    baseline = physician_baseline(
        np.concatenate([phys_v, theme_phys_v], axis=1),
        np.concatenate([phys_n, theme_phys_n], axis=1),
        judge_v,
        min_physician_ratings,
    )
    graded_rows = scopes.expand(np.bincount(enc.row_category, weights=graded, minlength=scopes.n_cats))
    all_rows = scopes.expand(np.bincount(enc.row_category, minlength=scopes.n_cats))

    metrics: dict[str, MetricValue] = {
        "rows": len(meta_rows),
        "physician_labels": len(enc.labels),
        "physicians": len(enc.physicians),
        "min_physician_ratings": min_physician_ratings,
    }
    row_means = _row_means(enc, scopes, graded, said_true)
    for s, prefix in enumerate(scopes.prefixes):
        metrics[f"{prefix}graded_rows"] = int(graded_rows[s])
        metrics[f"{prefix}ungraded_rows"] = int(all_rows[s] - graded_rows[s])
        if s <= scopes.n_cats:
            for key, value, n in _scope_entries(judge_counts[s : s + 1], [prefix], "model"):
                metrics[key], metrics[f"{key}:n_samples"] = value, n
        else:  # a theme has only the pooled f1_balanced
            metrics[f"{prefix}pairwise_model_f1_balanced"] = _number(judge_v[s])
            metrics[f"{prefix}pairwise_model_f1_balanced:n_samples"] = int(judge_n[s])
        for key in ROW_KEYS:
            metrics[f"{prefix}{key}"] = _number(row_means[key][s])
            metrics[f"{prefix}{key}:n_samples"] = int(graded_rows[s])
        metrics[f"{prefix}physician_f1_balanced_mean"] = _number(baseline["mean"][s])
        metrics[f"{prefix}physician_f1_balanced_mean_all"] = _number(baseline["mean_all"][s])
        metrics[f"{prefix}physician_count"] = int(baseline["count"][s])
        metrics[f"{prefix}model_f1_balanced_percentile"] = _number(baseline["percentile"][s])

    summaries = tuple(
        GroupSummary(
            name=name,
            judge_f1_balanced=_number(judge_v[s]),
            judge_n=int(judge_n[s]),
            physician_f1_balanced_mean=_number(baseline["mean"][s]),
            physician_f1_balanced_mean_all=_number(baseline["mean_all"][s]),
            percentile=_number(baseline["percentile"][s]),
            physician_count=int(baseline["count"][s]),
            graded_rows=int(graded_rows[s]),
        )
        for s, name in enumerate(scopes.names)
    )
    return MetaEvalResult(
        metrics=metrics,
        overall=summaries[0],
        categories=summaries[1 : 1 + scopes.n_cats],
        themes=summaries[1 + scopes.n_cats :],
        category_names=enc.categories,
        physician_ids=enc.physicians,
        judge_counts=judge_counts,
        physician_counts=physician_counts,
    )


@dataclass(frozen=True, slots=True)
class _Scopes:
    """Scope order everywhere: overall, then the sorted categories, then the sorted themes."""

    names: list[str]
    prefixes: list[str]
    n_cats: int
    groups: list[list[int]]  # category columns of each theme
    member: NDArray[np.float64]  # (categories, themes) one-hot

    @classmethod
    def of(cls, categories: tuple[str, ...]) -> _Scopes:
        themes, category_theme = _codes([theme_of(category) for category in categories])
        member = np.zeros((len(categories), len(themes)))
        member[np.arange(len(categories)), category_theme] = 1.0
        groups = [np.flatnonzero(category_theme == t).tolist() for t in range(len(themes))]
        names = ["overall", *categories, *(f"theme:{theme}" for theme in themes)]
        return cls(names, ["", *(f"{name}: " for name in names[1:])], len(categories), groups, member)

    def expand(self, per_category: NDArray[Any]) -> Values:
        """A per-category sum -> per scope (overall total, categories, theme totals)."""
        values = per_category.astype(np.float64)
        return np.concatenate([[values.sum()], values, values @ self.member])


def _pair_counts(
    enc: _Encoded, graded: NDArray[np.bool_], said_true: NDArray[np.bool_]
) -> tuple[Counts, Counts]:
    """Judge counts (1 + categories, 4) and physician counts (physicians, 1 + categories, 4)."""
    n_cats, n_phys = len(enc.categories), len(enc.physicians)
    row_counts = judge_pair_counts(enc.positives, enc.totals, said_true)
    row_counts[~graded] = 0
    judge_counts = np.empty((1 + n_cats, 4), dtype=np.int64)
    judge_counts[1:] = sum_by_group(row_counts, enc.row_category, n_cats)
    judge_counts[0] = judge_counts[1:].sum(axis=0)
    per_label = physician_pair_counts(enc.labels, enc.positives[enc.label_row], enc.totals[enc.label_row])
    cell = enc.label_physician * n_cats + enc.row_category[enc.label_row]
    physician_counts = np.empty((n_phys, 1 + n_cats, 4), dtype=np.int64)
    physician_counts[:, 1:] = sum_by_group(per_label, cell, n_phys * n_cats).reshape(n_phys, n_cats, 4)
    physician_counts[:, 0] = physician_counts[:, 1:].sum(axis=1)
    return judge_counts, physician_counts


@dataclass(frozen=True, slots=True)
class _Encoded:
    categories: tuple[str, ...]  # sorted; row_category codes index it
    physicians: tuple[str, ...]  # sorted; label_physician codes index it
    row_category: NDArray[np.int64]  # (rows,)
    totals: Counts  # labels per row
    positives: Counts  # True labels per row
    labels: NDArray[np.bool_]  # (labels,) all rows' labels, flattened in row order
    label_row: NDArray[np.int64]  # (labels,) row of each label
    label_physician: NDArray[np.int64]  # (labels,)


def _codes(names: list[str]) -> tuple[tuple[str, ...], NDArray[np.int64]]:
    distinct = sorted(set(names))
    index = {name: code for code, name in enumerate(distinct)}
    return tuple(distinct), np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))


def _encode(rows: list[MetaRow]) -> _Encoded:
    totals = np.fromiter((len(row.labels) for row in rows), dtype=np.int64, count=len(rows))
    labels = np.fromiter(
        chain.from_iterable(row.labels for row in rows), dtype=np.bool_, count=int(totals.sum())
    )
    label_row = np.repeat(np.arange(len(rows), dtype=np.int64), totals)
    positives = np.bincount(label_row, weights=labels, minlength=len(rows)).astype(np.int64)
    physicians, label_physician = _codes(list(chain.from_iterable(row.physician_ids for row in rows)))
    categories, row_category = _codes([row.category for row in rows])
    return _Encoded(
        categories, physicians, row_category, totals, positives, labels, label_row, label_physician
    )


def _judge_array(
    judge_labels: Sequence[bool | None], n_rows: int
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    if len(judge_labels) != n_rows:
        raise ValueError(
            f"got {len(judge_labels)} judge labels for {n_rows} meta-eval rows; "
            "pass exactly one label (True, False or None for ungraded) per row"
        )
    graded = np.ones(n_rows, dtype=np.bool_)
    said_true = np.zeros(n_rows, dtype=np.bool_)
    for i, label in enumerate(judge_labels):
        if label is None:
            graded[i] = False
        elif isinstance(label, bool | np.bool_):
            said_true[i] = label
        else:
            raise ValueError(f"judge label {i} is {label!r}; expected True, False or None")
    return graded, said_true


def _row_means(
    enc: _Encoded, scopes: _Scopes, graded: NDArray[np.bool_], said_true: NDArray[np.bool_]
) -> dict[str, Values]:
    """simple-evals' per-row metrics, averaged over the graded rows of each scope."""
    per_row = {
        "num_physician_labels": enc.totals.astype(np.float64),
        "percent_physician_pos": enc.positives / enc.totals,
        "model_predicted_positive": said_true.astype(np.float64),
    }
    count = scopes.expand(np.bincount(enc.row_category, weights=graded, minlength=scopes.n_cats))
    out: dict[str, Values] = {}
    for key, values in per_row.items():
        weights = np.where(graded, values, 0.0)
        total = scopes.expand(np.bincount(enc.row_category, weights=weights, minlength=scopes.n_cats))
        out[key] = np.full(total.shape, np.nan)
        np.divide(total, count, out=out[key], where=count > 0)
    return out


def _scope_entries(
    counts: Counts, prefixes: list[str], rater: str
) -> Iterator[tuple[str, float | None, int]]:
    """(key, value, n) for the nine agreement metrics of each scope row of ``counts``."""
    metrics = {name: (values.tolist(), n.tolist()) for name, (values, n) in agreement_metrics(counts).items()}
    for s, prefix in enumerate(prefixes):
        for name in METRIC_NAMES:
            values, ns = metrics[name]
            yield f"{prefix}pairwise_{rater}_{name}", _number(values[s]), int(ns[s])


def _number(value: float | np.floating[Any]) -> float | None:
    return None if value != value else float(value)  # NaN -> None
