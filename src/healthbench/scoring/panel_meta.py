"""The meta-eval of a panel: each member and the panel under each rule, measured against physicians with
the one set of meta-eval metrics (`healthbench.scoring.meta.meta_metrics`, called once per member and
once per rule on the panel's combined verdicts), side by side, with dollars per 1,000 criteria.

The calibrated rule needs each member's error rates. Given a `Calibration` (from another meta-eval run)
it uses that; without one its verdicts are **cross-fitted**, so that no row is judged with rates measured
on itself: the rows are split into ``folds`` folds by position (row i in fold i mod folds), and each
fold's rows are combined with the calibration of the other folds' rows (`calibration_from_meta`).

Dollars per 1,000 criteria = 1000 × cost / criteria asked, criteria = the meta-eval rows (each row is one
criterion asked of every member); a panel costs the sum of its members' (whatever the rule), and is
unknown when a member's cost is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from healthbench.defaults import DEFAULT_MIN_PHYSICIAN_RATINGS, PANEL_RULES
from healthbench.scoring.meta import MetaEvalResult, MetaRow, meta_metrics
from healthbench.scoring.panel import Calibration, PanelRule, calibration_from_meta, combine
from healthbench.scoring.verdict import Verdict

if TYPE_CHECKING:
    from healthbench.data.schema import MetaEvalRecord

DEFAULT_FOLDS = 5  # cross-fitting folds of the calibrated rule without a given calibration
PANEL_PREFIX = "panel:"


@dataclass(frozen=True)
class PanelMetaEntry:
    """One line of the side-by-side table: a member (``name`` = its label) or the panel under a rule
    (``name`` = ``panel:<rule>``)."""

    name: str
    kind: Literal["member", "panel"]
    result: MetaEvalResult
    dollars_per_1000: float | None


@dataclass(frozen=True)
class PanelMetaResult:
    """Members first (panel order), then the rules (in the order asked)."""

    entries: tuple[PanelMetaEntry, ...]
    calibration: Literal["given", "cross-fitted"] | None  # None: the calibrated rule was not asked

    def entry(self, name: str) -> PanelMetaEntry:
        """A member's entry by label, or a rule's by ``panel:<rule>`` (KeyError if absent)."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(name)


def dollars_per_1000(cost: float | None, criteria: int) -> float | None:
    """1000 × cost / criteria; None when the cost is unknown or no criterion was asked."""
    if cost is None or criteria <= 0:
        return None
    return 1000.0 * cost / criteria


def panel_meta_metrics(
    rows: Sequence[MetaRow | MetaEvalRecord],
    verdicts: Mapping[str, Sequence[Verdict]],
    *,
    rules: Sequence[PanelRule] = PANEL_RULES,
    calibration: Calibration | None = None,
    folds: int = DEFAULT_FOLDS,
    costs: Mapping[str, float | None] | None = None,
    min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS,
) -> PanelMetaResult:
    """Each member's and each rule's meta-eval metrics: ``verdicts[label][i]`` is that member's verdict
    on ``rows[i]`` (labels in panel order); ``costs[label]`` what the member's calls cost in dollars.
    Raises ValueError on no member, a verdict count that differs from the row count, an unknown rule, or
    fewer rows than cross-fitting folds (with no calibration given)."""
    if not verdicts:
        raise ValueError("a panel meta-eval needs at least one judge's verdicts")
    meta_rows = [row if isinstance(row, MetaRow) else MetaRow.from_record(row) for row in rows]
    labels = list(verdicts)
    for label in labels:
        if len(verdicts[label]) != len(meta_rows):
            raise ValueError(
                f"judge {label!r} has {len(verdicts[label])} verdicts for {len(meta_rows)} meta-eval rows"
            )
    costs = costs or {}
    member_costs = [costs.get(label) for label in labels]
    panel_cost = None if any(c is None for c in member_costs) else sum(c or 0.0 for c in member_costs)

    def measured(votes: Sequence[Verdict]) -> MetaEvalResult:
        judge_labels = [vote.criteria_met for vote in votes]
        return meta_metrics(meta_rows, judge_labels, min_physician_ratings=min_physician_ratings)

    criteria = len(meta_rows)
    entries = [
        PanelMetaEntry(label, "member", measured(verdicts[label]), dollars_per_1000(cost, criteria))
        for label, cost in zip(labels, member_costs, strict=True)
    ]
    for rule in rules:
        combined = panel_verdicts(meta_rows, verdicts, rule, calibration=calibration, folds=folds)
        name = f"{PANEL_PREFIX}{rule}"
        entries.append(
            PanelMetaEntry(name, "panel", measured(combined), dollars_per_1000(panel_cost, criteria))
        )
    how: Literal["given", "cross-fitted"] | None = None
    if "calibrated" in rules:
        how = "given" if calibration is not None else "cross-fitted"
    return PanelMetaResult(tuple(entries), how)


def panel_verdicts(
    rows: Sequence[MetaRow],
    verdicts: Mapping[str, Sequence[Verdict]],
    rule: PanelRule,
    *,
    calibration: Calibration | None = None,
    folds: int = DEFAULT_FOLDS,
) -> list[Verdict]:
    """The panel's verdict on each meta-eval row under ``rule`` (the calibrated rule: with
    ``calibration``, else cross-fitted over ``folds`` folds, as the module doc says)."""
    labels = list(verdicts)
    votes = list(zip(*(verdicts[label] for label in labels), strict=True))
    if rule != "calibrated" or calibration is not None:
        return [
            combine(v, rule, labels=labels, calibration=calibration, category=row.category)
            for v, row in zip(votes, rows, strict=True)
        ]
    if folds < 2 or len(rows) < folds:
        raise ValueError(
            f"cross-fitting the calibrated rule needs at least 2 folds and a row per fold "
            f"({len(rows)} rows, {folds} folds); give a calibration from another meta-eval run"
        )
    out: list[Verdict] = [Verdict.UNGRADED] * len(rows)
    for fold in range(folds):
        train = [i for i in range(len(rows)) if i % folds != fold]
        fold_calibration = calibration_from_meta(
            [rows[i] for i in train], {label: [verdicts[label][i] for i in train] for label in labels}
        )
        for i in range(fold, len(rows), folds):
            out[i] = combine(
                votes[i], "calibrated", labels=labels, calibration=fold_calibration, category=rows[i].category
            )
    return out
