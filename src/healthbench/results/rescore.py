"""Re-scoring a simple-evals ``_allresults.json`` (``healthbench import``): the file joined with the
dataset the run used (for example tags), scored by our core, and compared with the file's numbers.

The file is read by the one ``_allresults.json`` reader (`healthbench.results.allresults_columns`,
whose errors name the file, the example and the field). Without ``with_samples`` it is viewed as
columns (no object per answer) and the datasets are read as the one JSONL reader decodes them
(`healthbench.data.rubric_index`, whose errors name the line), without building records. Same
numbers either way (tests/test_fast_ingest.py). The pydantic records are imported only when they
are needed, so a file is re-scored without loading them. The cyclic collector is left alone (service
worker threads call this): ``healthbench import`` pauses it for its whole short-lived process
(`healthbench.cli.gc_paused`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from healthbench.data.rubric_index import read_rubric_index
from healthbench.results.allresults_columns import read_columns
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, score_run, score_table

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Agreement:
    """How many of the file's means and n_samples we reproduce (bootstrap stds are random, so they
    are not compared), and whether the top-level ``score`` is equal."""

    equal: int
    compared: int
    same_score: bool


@dataclass(frozen=True)
class Rescored:
    """An imported file re-scored: its samples and numbers, ours, and how far they agree."""

    samples: list[GradedSample]  # the file's graded samples: empty unless asked for (``with_samples``)
    score: float | None  # the file's own top-level score
    metrics: dict[str, Any]  # the file's own metrics
    run_score: RunScore
    agreement: Agreement
    untagged: int  # examples without a dataset entry, so without example tags
    joined: bool  # whether a dataset was given at all
    n_samples: int  # examples in the file


def rescore_allresults(
    path: PathLike,
    *,
    data: Sequence[PathLike] = (),
    dataset: str | None = None,
    cache: PathLike | None = None,
    allow_untagged: bool = False,
    options: ScoringOptions | None = None,
    with_samples: bool = True,
) -> Rescored:
    """Parse ``path``, join it on prompt_id with the datasets given (`join_datasets`), and score it
    (module doc for ``with_samples``)."""
    options = options or ScoringOptions()
    if not with_samples:
        return _rescore_columns(path, data, dataset, cache, allow_untagged, options)
    from healthbench.data.sources import join_datasets  # (the ordinary readers: module doc)
    from healthbench.results.simple_evals import load_allresults

    conversations = join_datasets(data, dataset, cache)
    stored = load_allresults(path, conversations, allow_missing=allow_untagged)
    run_score = score_run(stored.samples, options)
    untagged = sum(
        1 for s in stored.samples if conversations is None or s.conversation.prompt_id not in conversations
    )
    return Rescored(
        samples=stored.samples,
        score=stored.score,
        metrics=stored.metrics,
        run_score=run_score,
        agreement=agreement(stored.score, stored.metrics, run_score.metrics()),
        untagged=untagged,
        joined=conversations is not None,
        n_samples=len(stored.samples),
    )


def _rescore_columns(
    path: PathLike,
    data: Sequence[PathLike],
    dataset: str | None,
    cache: PathLike | None,
    allow_untagged: bool,
    options: ScoringOptions,
) -> Rescored:
    """The columnar path (module doc)."""
    joined = bool(data) or dataset is not None
    index = None
    if joined:
        paths = list(data)
        if dataset is not None:
            from healthbench.data.sources import resolve  # (downloads: not needed for local files)

            paths.append(resolve(dataset, cache=cache).path)
        index = read_rubric_index(paths)
    fast = read_columns(path, index, allow_missing=allow_untagged)
    lengths = fast.completion_lengths() if options.length_penalty is not None else None
    run_score = score_table(fast.table, options, lengths, fast.prompt_ids)
    return Rescored(
        samples=[],
        score=fast.score,
        metrics=fast.metrics,
        run_score=run_score,
        agreement=agreement(fast.score, fast.metrics, run_score.metrics()),
        untagged=sum(1 for p in fast.prompt_ids if index is None or p not in index),
        joined=joined,
        n_samples=len(fast.prompt_ids),
    )


def agreement(score: float | None, stored: Mapping[str, Any], ours: Mapping[str, Any]) -> Agreement:
    """Compare a file's ``score`` and ``metrics`` with ours (every key but ``:bootstrap_std``)."""
    keys = [k for k in stored if not k.endswith(":bootstrap_std")]
    equal = sum(1 for k in keys if _same(stored[k], ours.get(k)))
    return Agreement(equal=equal, compared=len(keys), same_score=_same(score, ours.get("score")))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12)
    return bool(a == b)
