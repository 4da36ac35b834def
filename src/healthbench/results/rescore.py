"""Re-scoring a simple-evals ``_allresults.json`` (``healthbench import``): the file joined with the
dataset the run used (for example tags), scored by our core, and compared with the file's numbers.

The file is read by the one ``_allresults.json`` reader (`healthbench.results.simple_evals.
load_allresults`, whose errors name the file, the example and the field), the datasets by the one
JSONL reader (`healthbench.data.sources.join_datasets`), and the samples scored by `score_run`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from healthbench.data.sources import join_datasets
from healthbench.results.simple_evals import load_allresults
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, score_run

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

    samples: list[GradedSample]  # the file's graded samples
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
    texts: bool = True,
) -> Rescored:
    """Parse ``path``, join it on prompt_id with the datasets given (`join_datasets`), and score it.
    Without ``texts`` the samples hold no completion, usage nor explanation (`load_allresults`): enough
    to score, unless the length adjustment is on (it reads each completion's length)."""
    options = options or ScoringOptions()
    if not texts and options.length_center is not None:
        raise ValueError("the length adjustment reads the completions: read them (texts=True)")
    conversations = join_datasets(data, dataset, cache)
    stored = load_allresults(path, conversations, allow_missing=allow_untagged, texts=texts)
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


def agreement(score: float | None, stored: Mapping[str, Any], ours: Mapping[str, Any]) -> Agreement:
    """Compare a file's ``score`` and ``metrics`` with ours (every key but ``:bootstrap_std``)."""
    keys = [k for k in stored if not k.endswith(":bootstrap_std")]
    equal = sum(1 for k in keys if _same(stored[k], ours.get(k)))
    return Agreement(equal=equal, compared=len(keys), same_score=_same(score, ours.get("score")))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12)
    return bool(a == b)
