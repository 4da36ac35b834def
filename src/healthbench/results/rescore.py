"""Re-score a simple-evals ``_allresults.json`` (what `healthbench import` does), by the fastest
reader that can: the columnar one (`healthbench.results.allresults_columns`) when the graded samples
themselves are not needed and the inputs are valid, else `load_allresults`. Same numbers either way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from healthbench.data.rubric_index import read_rubric_index
from healthbench.data.sources import join_datasets, resolve
from healthbench.results.allresults_columns import read_columns
from healthbench.results.simple_evals import load_allresults
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, score_run, score_table


@dataclass(frozen=True)
class Rescored:
    run_score: RunScore
    score: float | None  # the numbers the file reports
    metrics: dict[str, Any]
    n_samples: int
    untagged: int  # answers whose prompt_id is not in the dataset (or every answer without one)
    samples: list[GradedSample] | None  # only when asked for


def rescore_allresults(
    path: str | os.PathLike[str],
    options: ScoringOptions,
    *,
    data: Sequence[str | os.PathLike[str]] = (),
    variant: str | None = None,
    cache: str | os.PathLike[str] | None = None,
    allow_untagged: bool = False,
    with_samples: bool = False,
) -> Rescored:
    """Score the file with example tags from the datasets given (files and/or a variant)."""
    has_dataset = bool(data) or variant is not None
    if not with_samples:
        paths = [*data, *([resolve(variant, cache=cache).path] if variant is not None else [])]
        index = read_rubric_index(paths) if has_dataset else None
        if index is not None or not has_dataset:
            fast = read_columns(path, index, allow_missing=allow_untagged)
            if fast is not None:
                untagged = sum(1 for p in fast.prompt_ids if index is None or p not in index)
                lengths = fast.completion_lengths() if options.length_penalty is not None else None
                return Rescored(
                    score_table(fast.table, options, lengths),
                    fast.score,
                    fast.metrics,
                    len(fast.prompt_ids),
                    untagged,
                    None,
                )
    conversations = join_datasets(data, variant, cache=cache)
    stored = load_allresults(path, conversations, allow_missing=allow_untagged)
    untagged = sum(
        1 for s in stored.samples if conversations is None or s.conversation.prompt_id not in conversations
    )
    return Rescored(
        score_run(stored.samples, options),
        stored.score,
        stored.metrics,
        len(stored.samples),
        untagged,
        stored.samples,
    )
