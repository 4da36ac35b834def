"""What a panel of judges reports beside the panel's own scores (docs/metrics.md, docs/panels.md):
each member's score from its own verdicts, how much the members agree (``judge_agreement``, Fleiss'
kappa, pairwise Cohen's kappa), and, for the calibrated rule, the categories whose pooled rates stood
in. Computed from the samples `RunView` reads (`StoredSample.members`); nothing is asked of a model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from healthbench.results.views import RunView, StoredSample
from healthbench.scoring.panel import (
    Calibration,
    agreement,
    criterion_category,
    fleiss_kappa,
    pairwise_cohen_kappa,
)
from healthbench.scoring.run_score import RunScore, ScoringOptions, score_run
from healthbench.scoring.verdict import Verdict

UNCATEGORISED = "(no category)"  # criteria without a ``cluster:`` tag: always the pooled rates


@dataclass(frozen=True)
class PanelFigures:
    """A panel's members and how they agree, over one run (every criterion of every answer)."""

    rule: str
    members: tuple[str, ...]  # labels, the chair first
    scores: Mapping[str, RunScore]  # each member's `score_run` of its own verdicts
    agreement: float | None  # judge_agreement
    fleiss_kappa: float | None  # judge_fleiss_kappa
    pairwise_kappa: Mapping[tuple[str, str], float | None]  # Cohen's kappa of each pair of members
    graded_by_all: int  # the criteria every member graded (what agreement and kappas are over)
    pooled: tuple[str, ...]  # calibrated rule: categories judged with pooled rates (else empty)

    def pooled_line(self) -> str | None:
        """What the output says when pooled rates stood in for a category (calibrated rule only)."""
        if not self.pooled:
            return None
        return (
            "calibrated panel: pooled rates stood in for "
            f"{', '.join(self.pooled)} (the meta-eval has too few rows of these categories)"
        )


def criterion_votes(stored: Sequence[StoredSample], labels: Sequence[str]) -> list[tuple[Verdict, ...]]:
    """Every criterion of every sample as its members' votes (panel order), sample by sample."""
    votes: list[tuple[Verdict, ...]] = []
    for sample in stored:
        votes.extend(zip(*(sample.members[label].verdicts for label in labels), strict=True))
    return votes


def panel_figures(
    view: RunView, stored: Sequence[StoredSample], options: ScoringOptions
) -> PanelFigures | None:
    """The `PanelFigures` of ``stored`` (the view's samples; None for a single judge): each member
    scored with ``options``."""
    if not view.is_panel:
        return None
    labels = view.members
    votes = criterion_votes(stored, labels)
    scores = {label: score_run([sample.members[label] for sample in stored], options) for label in labels}
    complete = sum(all(vote is not Verdict.UNGRADED for vote in criterion) for criterion in votes)
    calibration = view.calibration
    pooled = _pooled_categories(calibration, labels, stored) if calibration is not None else ()
    return PanelFigures(
        rule=view.panel_rule,
        members=tuple(labels),
        scores=scores,
        agreement=agreement(votes),
        fleiss_kappa=fleiss_kappa(votes),
        pairwise_kappa=pairwise_cohen_kappa(labels, votes),
        graded_by_all=complete,
        pooled=pooled,
    )


def _pooled_categories(
    calibration: Calibration, labels: Sequence[str], stored: Sequence[StoredSample]
) -> tuple[str, ...]:
    """The run's criterion categories for which some member's rates (or the base rate) were the
    pooled ones, sorted; `UNCATEGORISED` when some criterion has no category."""
    categories = {
        criterion_category(item.tags) for sample in stored for item in sample.graded.conversation.rubrics
    }
    pooled = set()
    for category in categories:
        if calibration.prior(category)[1] or any(
            calibration.member_rates(label, category)[1] for label in labels
        ):
            pooled.add(category if category is not None else UNCATEGORISED)
    return tuple(sorted(pooled))
