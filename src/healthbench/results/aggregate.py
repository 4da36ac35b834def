"""The aggregate-scores document of a run (NeMo Evaluator's shape), documented in docs/results.md::

    {"job": NAME, "metrics": [{"metric_ref": "healthbench/<key>", "aggregation": {"scores": [SCORE]}}]}

One metric per key of the run's scores (``overall_score``, every ``axis:``, ``theme:``, ``level:``,
``cluster:``, ``physician_agreed_category:`` key, ``overall_score_length_adjusted`` when configured); SCORE
holds NeMo's range-score figures of the key's per-sample values (`healthbench.scoring.range_stats`)
and the HealthBench figures: ``score`` (the clipped mean, as ``--metrics-out``), ``bootstrap_std``,
``ci_lower``, ``ci_upper``, ``n_samples`` and ``ungraded_criteria``. A panel of judges' run adds each
member's own ``judge:<label>:overall_score`` (docs/panels.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from healthbench.results.metrics_out import json_safe, write_json_atomic
from healthbench.results.views import RunView
from healthbench.scoring.range_stats import range_stats
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, metric_keys
from healthbench.store.runs import Store

if TYPE_CHECKING:
    from healthbench.results.panel_scores import PanelFigures
    from healthbench.scoring.panel import Calibration, PanelRule

METRIC_PREFIX = "healthbench/"
SCORE_KEY = "score"  # simple-evals' copy of overall_score: not a metric of its own here


def metric_ref(key: str) -> str:
    """The NeMo metric reference of a HealthBench metric key (``healthbench/overall_score``)."""
    return f"{METRIC_PREFIX}{key}"


def aggregate_scores(
    store: Store,
    name: str,
    options: ScoringOptions | None = None,
    *,
    rule: PanelRule | None = None,
    calibration: Calibration | None = None,
) -> dict[str, Any]:
    """The aggregate-scores document of eval run ``name``: ``{"job": name, "metrics": [...]}``
    (a panel's verdicts combined by ``rule``, `RunView.with_panel`).

    Scored with the run's stored settings unless ``options`` are given; every ``score`` equals the
    same key of ``--metrics-out``. Undefined figures are None (the document holds no NaN/Infinity).
    """
    from healthbench.results.run_results import scored_run

    view = RunView.open(store, name).require_kind("eval").with_panel(rule, calibration)
    scored = scored_run(view, options)
    return aggregate_document(name, scored.samples, scored.score, scored.panel, scored.members or ())


def aggregate_document(
    job: str,
    samples: Sequence[GradedSample],
    run_score: RunScore,
    panel: PanelFigures | None = None,
    members: Sequence[Mapping[str, GradedSample]] = (),
) -> dict[str, Any]:
    """The aggregate-scores document of ``samples`` scored as ``run_score`` (see `aggregate_scores`),
    with ``panel``'s members' ``judge:<label>:overall_score`` after the run's keys (``members``: each
    sample's members' own samples, `StoredSample.members`).

    An ungraded sample counts in ``nan_count`` (and its ungraded criteria in ``ungraded_criteria``)
    of every key it would carry once graded.
    """
    document = _document(job, samples, run_score)
    if panel is None:
        return document
    for label in panel.members:
        own = [sample_members[label] for sample_members in members]
        member = _document(job, own, panel.scores[label], keys=[OVERALL])
        for metric in member["metrics"]:
            key = f"judge:{label}:{OVERALL}"
            metric["metric_ref"] = metric_ref(key)
            metric["aggregation"]["scores"][0]["name"] = key
            document["metrics"].append(metric)
    return document


def _document(
    job: str, samples: Sequence[GradedSample], run_score: RunScore, keys: Sequence[str] | None = None
) -> dict[str, Any]:
    """`aggregate_document` of one score (its ``keys`` only when given)."""
    chosen = keys if keys is not None else [key for key in run_score.stats if key != SCORE_KEY]
    values: dict[str, list[float]] = {key: [] for key in chosen if key in run_score.stats}
    ungraded: dict[str, int] = dict.fromkeys(values, 0)
    for sample, metrics in zip(samples, run_score.per_sample, strict=True):
        if metrics is not None:
            for key, value in metrics.items():
                if keys is None or key in values:
                    values.setdefault(key, []).append(value)
            continue
        for key in metric_keys(sample, run_score.options):
            if keys is None or key in values:
                values.setdefault(key, []).append(float("nan"))
                ungraded[key] = ungraded.get(key, 0) + sample.ungraded
    return {
        "job": job,
        "metrics": [
            {
                "metric_ref": metric_ref(key),
                "aggregation": {"scores": [_score(key, column, run_score, ungraded.get(key, 0))]},
            }
            for key, column in values.items()
        ],
    }


def _score(key: str, column: list[float], run_score: RunScore, ungraded: int) -> dict[str, Any]:
    stats = run_score.stats.get(key)
    document: dict[str, Any] = json_safe(
        {
            "name": key,
            "score_type": "range",
            **range_stats(np.asarray(column, dtype=np.float64)).as_dict(),
            "score": stats.mean if stats else None,
            "bootstrap_std": stats.bootstrap_std if stats else None,
            "ci_lower": stats.ci_lower if stats else None,
            "ci_upper": stats.ci_upper if stats else None,
            "n_samples": stats.n_samples if stats else 0,
            "ungraded_criteria": ungraded,
        }
    )
    return document


def write_aggregate_scores(path: str | os.PathLike[str], document: dict[str, Any]) -> Path:
    """Write an aggregate-scores document as JSON, atomically."""
    return write_json_atomic(path, document, indent=2, ensure_ascii=False)
