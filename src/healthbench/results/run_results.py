"""A stored run scored: shortcuts over `healthbench.results.views.RunView` for eval runs, and the one
place where a run's scores, its panel's figures and its metrics document are put together (`scored_run`,
`run_metrics`: `results`, the end of `run` and `regrade`, the service's downloads). A single judge's
run loads no panel module (`healthbench results NAME` start-up, docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from healthbench.results.views import RunView
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions
from healthbench.store.runs import RunRecord, Store

if TYPE_CHECKING:
    from healthbench.results.panel_scores import PanelFigures


def graded_samples(store: Store, run: RunRecord) -> list[GradedSample]:
    """The run's samples in (repeat, conversation) order (see `RunView.iter_samples`)."""
    return RunView.of(store, run).graded_samples()


def score_stored_run(store: Store, run: RunRecord, options: ScoringOptions | None = None) -> RunScore:
    """The run's scores (the stored scoring settings unless ``options`` are given)."""
    return RunView.of(store, run).score(options)


@dataclass(frozen=True)
class ScoredRun:
    """An eval run scored: its samples (the panel's verdicts; empty when not asked for and the run has
    a single judge), its `RunScore`, and for a panel each sample's members and the `PanelFigures`."""

    samples: list[GradedSample]
    score: RunScore
    panel: PanelFigures | None = None
    members: list[Mapping[str, GradedSample]] | None = None


def scored_run(
    view: RunView, options: ScoringOptions | None = None, *, with_samples: bool = True
) -> ScoredRun:
    """Score ``view`` (its settings unless ``options``). A single judge's run without ``with_samples``
    is scored from the store's columns (no answer text held); a panel's reads every member's
    verdicts (its members' scores and agreement need them)."""
    options = options or view.scoring_options()
    if not view.is_panel:
        if not with_samples:
            return ScoredRun([], view.score(options))
        samples = view.graded_samples()
        return ScoredRun(samples, view.score_samples(samples, options))
    from healthbench.results.panel_scores import panel_figures

    stored = list(view.iter_samples())
    samples = [sample.graded for sample in stored]
    return ScoredRun(
        samples,
        view.score_samples(samples, options),
        panel_figures(view, stored, options),
        [sample.members for sample in stored],
    )


def run_metrics(view: RunView, scored: ScoredRun, extra: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The run's metrics document (`metrics_document`): its scores, a panel's keys, ``extra`` families
    (``--correct-with``'s), its cost and tokens, then its provenance."""
    from healthbench.results.metrics_out import metrics_document, panel_metrics, usage_metrics

    families: list[Mapping[str, Any]] = [panel_metrics(scored.panel)] if scored.panel is not None else []
    usage = view.usage_totals()
    families.extend([*extra, usage_metrics(usage.candidate, usage.judge)])
    return metrics_document(scored.score.metrics(), *families, provenance=view.provenance())
