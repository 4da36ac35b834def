"""A stored run scored: shortcuts over `healthbench.results.views.RunView` for eval runs."""

from __future__ import annotations

from healthbench.results.views import RunView
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions
from healthbench.store.runs import RunRecord, Store


def graded_samples(store: Store, run: RunRecord) -> list[GradedSample]:
    """The run's samples in (repeat, conversation) order (see `RunView.iter_samples`)."""
    return RunView.of(store, run).graded_samples()


def score_stored_run(store: Store, run: RunRecord, options: ScoringOptions | None = None) -> RunScore:
    """The run's scores (the stored scoring settings unless ``options`` are given)."""
    return RunView.of(store, run).score(options)
