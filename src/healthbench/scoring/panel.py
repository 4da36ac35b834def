"""Judge panels: several judges' verdicts on one criterion combined into the run's verdict, and how much
the judges agree. docs/panels.md has every formula and a simulation.

A *member* is one judge of a panel, named by its label (its model spec text); votes come in panel order,
the *chair* (the first member) first. The rules (`combine`):

* **ungraded**: a member's `Verdict.UNGRADED` leaves the decision to the others when a strict majority of
  the members graded the criterion (graded > n / 2); otherwise the panel's verdict is UNGRADED.
* ``majority``: MET when more graded members say MET than NOT_MET, NOT_MET when fewer; a tie goes to the
  first graded member in panel order (the chair's vote when the chair graded it).
* ``unanimous``: MET iff every graded member says MET.  ``any``: MET iff some graded member says MET.
* ``calibrated``: each member's vote is independent evidence weighed by its error rates against
  physicians: log-odds = logit(base rate) + Σ over graded members of log(Se / (1 − Sp)) for a MET vote
  and log((1 − Se) / Sp) for a NOT_MET vote; MET iff the log-odds > 0, NOT_MET iff < 0, and a tie
  (|log-odds| <= `TIE_TOLERANCE`, zero up to rounding) goes to ``majority``.

How `calibration_from_meta` counts (the same counting as judge-error correction, whose `judge_cells`
it calls): a meta-eval row counts once, whatever its number of physician labels, with the physicians'
majority as its truth; a row whose physicians split evenly has no truth and is left out; a row the member
left ungraded is left out of that member's rates. Se = P(member MET | truth met) and Sp = P(member
NOT_MET | truth not met) are add-one smoothed, (tp + 1) / (tp + fn + 2) and (tn + 1) / (tn + fp + 2),
so they are never 0 or 1 and every log-likelihood ratio is finite; the base rate (P(truth met) over the
rows with a truth) is smoothed alike. A category has its own rates (and base rate) when it has at least
``min_rows`` rows of each truth (default: correction's 30); otherwise, and for criteria without a
``cluster:`` tag, the rates pooled over every row are used, and `Calibration.member_rates` says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from healthbench.defaults import PANEL_RULES
from healthbench.scoring.correction import DEFAULT_MIN_ROWS, judge_cells
from healthbench.scoring.meta import MetaRow
from healthbench.scoring.verdict import Verdict

if TYPE_CHECKING:
    from healthbench.data.schema import MetaEvalRecord

PanelRule = Literal["majority", "unanimous", "any", "calibrated"]  # the names of defaults.PANEL_RULES

TIE_TOLERANCE = 1e-9  # |log-odds| at or below this is a tie of the calibrated rule (rounding of a 0)
CATEGORY_PREFIX = "cluster:"


@dataclass(frozen=True)
class MemberRates:
    """One member's error rates against physicians (from a meta-eval run), each strictly in (0, 1)."""

    sensitivity: float  # P(member says met | physicians say met)
    specificity: float  # P(member says not met | physicians say not met)
    n_met: int  # rows with truth "met" behind `sensitivity`
    n_not_met: int  # rows with truth "not met" behind `specificity`

    def __post_init__(self) -> None:
        for name in ("sensitivity", "specificity"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be strictly between 0 and 1 (smooth it), got {value!r}")

    def log_likelihood_ratio(self, verdict: Verdict) -> float:
        """log P(vote | met) / P(vote | not met): log(Se / (1 − Sp)) for MET, log((1 − Se) / Sp) for
        NOT_MET (0 for UNGRADED: no evidence)."""
        if verdict is Verdict.MET:
            return math.log(self.sensitivity / (1.0 - self.specificity))
        if verdict is Verdict.NOT_MET:
            return math.log((1.0 - self.sensitivity) / self.specificity)
        return 0.0


@dataclass(frozen=True)
class Calibration:
    """What the calibrated rule weighs members by: label -> category (None: pooled) -> rates, and the
    physicians' base rate P(met) per category (None: pooled). Every label has pooled rates."""

    rates: Mapping[str, Mapping[str | None, MemberRates]]
    base_rate: Mapping[str | None, float]

    def __post_init__(self) -> None:
        if None not in self.base_rate:
            raise ValueError("a calibration needs a pooled base rate (key None)")
        for category, rate in self.base_rate.items():
            if not 0.0 < rate < 1.0:
                raise ValueError(f"base rate of {category or 'pooled'} must be in (0, 1), got {rate!r}")
        for label, per_category in self.rates.items():
            if None not in per_category:
                raise ValueError(f"judge {label!r} has no pooled rates (key None)")

    def member_rates(self, label: str, category: str | None) -> tuple[MemberRates, bool]:
        """(rates, pooled?): the category's rates when the meta-eval has them, else the pooled ones."""
        if label not in self.rates:
            known = ", ".join(sorted(self.rates)) or "none"
            raise ValueError(f"no calibration for judge {label!r} (calibrated judges: {known})")
        per_category = self.rates[label]
        if category is not None and category in per_category:
            return per_category[category], False
        return per_category[None], True

    def prior(self, category: str | None) -> tuple[float, bool]:
        """(base rate, pooled?) of a category, as `member_rates`."""
        if category is not None and category in self.base_rate:
            return self.base_rate[category], False
        return self.base_rate[None], True


def combine(
    votes: Sequence[Verdict],
    rule: PanelRule,
    *,
    labels: Sequence[str] = (),
    calibration: Calibration | None = None,
    category: str | None = None,
) -> Verdict:
    """The panel's verdict on one criterion from its members' ``votes`` (panel order, the chair first).

    ``labels`` (the members' labels, in the same order), ``calibration`` and ``category`` (the
    criterion's, `criterion_category`) are needed by the calibrated rule only. Raises ValueError on no
    votes, an unknown rule, or a calibrated rule without calibration or labels.
    """
    if not votes:
        raise ValueError("a panel verdict needs at least one member's vote")
    graded = [vote for vote in votes if vote is not Verdict.UNGRADED]
    if rule == "calibrated":  # checked before the ungraded rule: a wrong call fails on every criterion
        if calibration is None or len(labels) != len(votes):
            raise ValueError(
                f"the calibrated rule needs a calibration and one label per vote "
                f"(got {len(labels)} labels for {len(votes)} votes)"
            )
    elif rule not in PANEL_RULES:
        raise ValueError(f"unknown panel rule {rule!r}: choose one of {', '.join(PANEL_RULES)}")
    if 2 * len(graded) <= len(votes):
        return Verdict.UNGRADED
    met = sum(vote is Verdict.MET for vote in graded)
    if rule == "unanimous":
        return Verdict.of(met == len(graded))
    if rule == "any":
        return Verdict.of(met > 0)
    if rule == "calibrated":
        assert calibration is not None
        log_odds = calibrated_log_odds(votes, labels, calibration, category)
        if abs(log_odds) > TIE_TOLERANCE:
            return Verdict.of(log_odds > 0)
    not_met = len(graded) - met
    return Verdict.of(met > not_met) if met != not_met else graded[0]


def calibrated_log_odds(
    votes: Sequence[Verdict], labels: Sequence[str], calibration: Calibration, category: str | None
) -> float:
    """logit(base rate) + Σ of the graded members' log-likelihood ratios: the log-odds that physicians
    say met, given the votes, when members err independently."""
    base, _ = calibration.prior(category)
    total = math.log(base / (1.0 - base))
    for vote, label in zip(votes, labels, strict=True):
        if vote is not Verdict.UNGRADED:
            total += calibration.member_rates(label, category)[0].log_likelihood_ratio(vote)
    return total


def criterion_category(tags: Sequence[str]) -> str | None:
    """The meta-eval category of a run criterion: its first ``cluster:`` tag, None when it has none."""
    return next((tag for tag in tags if tag.startswith(CATEGORY_PREFIX)), None)


# ---------------------------------------------------------------- agreement


def _all_graded(votes: Sequence[Sequence[Verdict]]) -> list[Sequence[Verdict]]:
    """The criteria every member graded; raises ValueError when criteria have different panel sizes."""
    if len({len(criterion) for criterion in votes}) > 1:
        raise ValueError("every criterion needs one vote per member (the same number of votes)")
    return [c for c in votes if c and all(vote is not Verdict.UNGRADED for vote in c)]


def agreement(votes: Sequence[Sequence[Verdict]]) -> float | None:
    """``judge_agreement``: among the criteria graded by every member (``votes[i]`` = the members'
    verdicts on criterion i), the share on which all members gave the same verdict; None when none is."""
    complete = _all_graded(votes)
    if not complete:
        return None
    return sum(len(set(criterion)) == 1 for criterion in complete) / len(complete)


def fleiss_kappa(votes: Sequence[Sequence[Verdict]]) -> float | None:
    """Fleiss' kappa over the criteria graded by every member (two categories, met and not met):
    (P̄ − P̄e) / (1 − P̄e), P̄ the mean over criteria of (Σ_j n_ij² − n) / (n (n − 1)), P̄e = Σ_j p_j²,
    p_j the share of all votes in category j. None with fewer than two members, no such criterion, or
    P̄e = 1 (every vote the same: kappa is 0 / 0)."""
    complete = _all_graded(votes)
    if not complete or len(complete[0]) < 2:
        return None
    n = len(complete[0])
    met = np.array([sum(v is Verdict.MET for v in criterion) for criterion in complete], dtype=np.float64)
    counts = np.column_stack([met, n - met])  # n_ij: criteria x (met, not met)
    p_bar = float(((counts**2).sum(axis=1) - n).mean() / (n * (n - 1)))
    shares = counts.sum(axis=0) / (len(complete) * n)
    p_e = float((shares**2).sum())
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


def cohen_kappa(a: Sequence[Verdict], b: Sequence[Verdict]) -> float | None:
    """Cohen's kappa of two members over the criteria both graded: (p_o − p_e) / (1 − p_e), p_o the
    share of equal verdicts, p_e = P_a(met) P_b(met) + P_a(not met) P_b(not met) from each member's
    own shares. None when no criterion was graded by both or p_e = 1."""
    if len(a) != len(b):
        raise ValueError(f"Cohen's kappa needs verdicts on the same criteria ({len(a)} and {len(b)} given)")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if Verdict.UNGRADED not in (x, y)]
    if not pairs:
        return None
    observed = sum(x is y for x, y in pairs) / len(pairs)
    met_a = sum(x is Verdict.MET for x, _ in pairs) / len(pairs)
    met_b = sum(y is Verdict.MET for _, y in pairs) / len(pairs)
    expected = met_a * met_b + (1 - met_a) * (1 - met_b)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def pairwise_cohen_kappa(
    labels: Sequence[str], votes: Sequence[Sequence[Verdict]]
) -> dict[tuple[str, str], float | None]:
    """Cohen's kappa of every pair of members (panel order), ``votes[i]`` the members' verdicts on
    criterion i."""
    if any(len(criterion) != len(labels) for criterion in votes):
        raise ValueError(f"every criterion needs one vote per member ({len(labels)} members)")
    columns = list(zip(*votes, strict=True)) if votes else [() for _ in labels]
    return {
        (labels[i], labels[j]): cohen_kappa(columns[i], columns[j])
        for i, j in combinations(range(len(labels)), 2)
    }


# ---------------------------------------------------------------- calibration


def calibration_from_meta(
    rows: Sequence[MetaRow | MetaEvalRecord],
    verdicts: Mapping[str, Sequence[Verdict]],
    *,
    min_rows: int = DEFAULT_MIN_ROWS,
) -> Calibration:
    """Each member's rates and the base rate from a meta-eval run: ``rows`` with their physicians'
    labels and categories, ``verdicts[label][i]`` that member's verdict on ``rows[i]``. Counting and
    smoothing as in the module doc. Raises ValueError on no rows, a verdict count that differs from the
    row count, or no row with a truth (every row's physicians split evenly)."""
    if not rows:
        raise ValueError("there are no meta-eval rows to calibrate with")
    meta_rows = [row if isinstance(row, MetaRow) else MetaRow.from_record(row) for row in rows]
    categories = [row.category for row in meta_rows]
    labels = [row.labels for row in meta_rows]
    # the base rate: a judge that says "met" on every row puts each row with a truth in tp or fp
    truth = judge_cells(categories, labels, [True] * len(meta_rows))
    met_rows, not_met_rows = truth.counts[:, 0], truth.counts[:, 3]
    if int(met_rows.sum() + not_met_rows.sum()) == 0:
        raise ValueError("no meta-eval row has a physicians' majority to calibrate with")
    base_rate: dict[str | None, float] = {None: _smoothed(met_rows.sum(), not_met_rows.sum())}
    for k, category in enumerate(truth.categories):
        if met_rows[k] >= min_rows and not_met_rows[k] >= min_rows:
            base_rate[category] = _smoothed(met_rows[k], not_met_rows[k])
    rates: dict[str, dict[str | None, MemberRates]] = {}
    for label, member in verdicts.items():
        if len(member) != len(meta_rows):
            raise ValueError(
                f"judge {label!r} has {len(member)} verdicts for {len(meta_rows)} meta-eval rows"
            )
        cells = judge_cells(categories, labels, [vote.criteria_met for vote in member])
        rates[label] = {None: _member_rates(cells.pooled)}
        for k, category in enumerate(cells.categories):
            tp, fn, tn, fp = (int(c) for c in cells.counts[k])
            if tp + fn >= min_rows and tn + fp >= min_rows:
                rates[label][category] = _member_rates(cells.counts[k])
    return Calibration(rates, base_rate)


def merge_calibrations(parts: Sequence[Calibration]) -> Calibration:
    """One calibration from several meta-eval runs (e.g. one run per member): each member's rates from
    the run that measured it, the prior (base rates) from the first run (runs of one meta-eval dataset
    share it). Raises ValueError on no run or a member measured by two runs."""
    if not parts:
        raise ValueError("no calibration to merge")
    rates: dict[str, Mapping[str | None, MemberRates]] = {}
    for part in parts:
        for label, per_category in part.rates.items():
            if label in rates:
                raise ValueError(f"judge {label!r} is calibrated by two meta-eval runs: give one of them")
            rates[label] = per_category
    return Calibration(rates, parts[0].base_rate)


def _smoothed(hits: int | np.integer, misses: int | np.integer) -> float:
    """Add-one smoothing: (hits + 1) / (hits + misses + 2)."""
    return (int(hits) + 1) / (int(hits) + int(misses) + 2)


def _member_rates(counts: npt.NDArray[np.int64]) -> MemberRates:
    """Smoothed rates from one (tp, fn, tn, fp) row of `judge_cells`."""
    tp, fn, tn, fp = (int(c) for c in counts)
    return MemberRates(_smoothed(tp, fn), _smoothed(tn, fp), tp + fn, tn + fp)
