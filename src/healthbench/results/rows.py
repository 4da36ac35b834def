"""The row-scores document of a run (NeMo Evaluator's shape), documented in docs/results.md: one
JSON object per (conversation, repeat), in (repeat, conversation) order, streamed from the store.

Each row holds ``row_index``, ``item`` (the dataset row), ``sample`` (the answer), ``metrics``
(``{"healthbench/<key>": [{"name": key, "value": v}]}``: the scoring core's per-sample values, None
for every key of an ungraded row) and ``criteria`` (each criterion with its verdict). A panel of
judges' row (docs/panels.md) scores each member too, ``healthbench/judge:<label>:overall_score`` (the
member's own score of the answer), and gives each criterion its members' verdicts,
``judge_verdicts: {label: met|not_met|ungraded}``, beside the panel's ``verdict``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from healthbench.results.aggregate import metric_ref
from healthbench.results.metrics_out import atomic_text_file, json_safe
from healthbench.results.views import VERDICT_NAMES, RunView, StoredSample
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, ScoringOptions, metric_keys, sample_metrics
from healthbench.store.runs import Store

if TYPE_CHECKING:
    from healthbench.scoring.panel import Calibration, PanelRule


def iter_row_scores(
    store: Store,
    name: str,
    options: ScoringOptions | None = None,
    *,
    rule: PanelRule | None = None,
    calibration: Calibration | None = None,
) -> Iterator[dict[str, Any]]:
    """The row-scores of eval run ``name``, one dict per (conversation, repeat), streamed: rows are
    built as they are read (a page of conversations at a time), never all held at once.

    ``options`` (default: the run's stored scoring settings) matter only for the length-adjusted score;
    ``rule`` and ``calibration`` combine a panel's verdicts (`RunView.with_panel`).
    """
    view = RunView.open(store, name).require_kind("eval").with_panel(rule, calibration)
    chosen = options or view.scoring_options()
    for index, stored in enumerate(view.iter_samples()):
        metrics = sample_metrics(stored.graded, chosen)
        yield row_document(index, stored, metrics, chosen, model=view.model_spec)


def row_document(
    index: int,
    stored: StoredSample,
    values: dict[str, float] | None,
    options: ScoringOptions,
    *,
    model: str | None,
) -> dict[str, Any]:
    """One row of the row-scores document (see the module doc); ``values`` are the sample's
    `sample_metrics` (None when ungraded)."""
    graded, sample = stored.graded, stored.sample
    conversation = graded.conversation
    keys = list(values) if values is not None else metric_keys(graded, options)
    explanations = graded.explanations or (None,) * len(graded.verdicts)
    panel = stored.members if len(stored.members) > 1 else {}
    document: dict[str, Any] = json_safe(
        {
            "row_index": index,
            "item": {
                "prompt_id": conversation.prompt_id,
                "prompt": [{"role": m.role, "content": m.content} for m in conversation.prompt],
                "example_tags": list(conversation.example_tags),
            },
            "sample": {
                "repeat": graded.repeat,
                "output_text": graded.completion,
                "model": model,
                "usage": sample.usage if sample else None,
                "cost": sample.cost if sample else None,
                "cached": sample.cached if sample else False,
                "error": sample.error if sample else "not sampled",
            },
            "metrics": {
                **{
                    metric_ref(key): [{"name": key, "value": values[key] if values is not None else None}]
                    for key in keys
                },
                **_member_metrics(panel, options),
            },
            "criteria": [
                {
                    "index": number,
                    "criterion": item.criterion,
                    "points": item.points,
                    "tags": list(item.tags),
                    "verdict": VERDICT_NAMES[verdict],
                    "explanation": explanation,
                    **(
                        {"judge_verdicts": {k: VERDICT_NAMES[m.verdicts[number]] for k, m in panel.items()}}
                        if panel
                        else {}
                    ),
                }
                for number, (item, verdict, explanation) in enumerate(
                    zip(conversation.rubrics, graded.verdicts, explanations, strict=True)
                )
            ],
        }
    )
    return document


def _member_metrics(panel: Mapping[str, GradedSample], options: ScoringOptions) -> dict[str, Any]:
    """``healthbench/judge:<label>:overall_score`` of each member of a panel (None: left out as ungraded)."""
    out = {}
    for label, member in panel.items():
        values = sample_metrics(member, options)
        key = f"judge:{label}:{OVERALL}"
        out[metric_ref(key)] = [{"name": key, "value": values[OVERALL] if values is not None else None}]
    return out


def write_row_scores(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> tuple[Path, int]:
    """Write rows as JSONL while they stream in; the file appears (atomically) once all are written.
    Returns the path and the number of rows."""
    count = 0
    with atomic_text_file(path) as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, allow_nan=False))
            out.write("\n")
            count += 1
    return Path(path), count
