"""Per-conversation scores of a run, repeats averaged: what paired comparisons line up.

A conversation's overall score and its ``axis:`` scores are simple-evals' per-conversation metrics
(`healthbench.scoring.rubric`); with several graded repeats of a conversation each key is the mean
over the repeats that have it. Ungraded repeats are left out; a conversation with no graded repeat
has no scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from healthbench.scoring.rubric import OVERALL, Criterion, conversation_metrics
from healthbench.scoring.run_score import GradedSample

THEME_PREFIX = "theme:"
AXIS_PREFIX = "axis:"


@dataclass(frozen=True)
class ConversationScores:
    """``scores[prompt_id][key]`` for key `OVERALL` and every ``axis:`` key the conversation has;
    ``themes[prompt_id]`` its ``theme:`` tags; ``rubrics[prompt_id]`` its rubric (to check pairs);
    ``ungraded``: prompt_ids with no graded repeat."""

    scores: dict[str, dict[str, float]]
    themes: dict[str, tuple[str, ...]]
    rubrics: dict[str, Sequence[Criterion]]
    ungraded: frozenset[str]


def conversation_scores(samples: Sequence[GradedSample]) -> ConversationScores:
    sums: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, int]] = {}
    themes: dict[str, tuple[str, ...]] = {}
    rubrics: dict[str, Sequence[Criterion]] = {}
    for sample in samples:
        metrics = conversation_metrics(sample.conversation, sample.verdicts)
        prompt_id = sample.conversation.prompt_id
        if prompt_id not in rubrics:
            rubrics[prompt_id] = sample.conversation.rubrics
            themes[prompt_id] = tuple(
                t for t in sample.conversation.example_tags if t.startswith(THEME_PREFIX)
            )
        if metrics is None:
            continue
        total = sums.setdefault(prompt_id, {})
        count = counts.setdefault(prompt_id, {})
        for key, value in metrics.items():
            if key == OVERALL or key.startswith(AXIS_PREFIX):
                total[key] = total.get(key, 0.0) + value
                count[key] = count.get(key, 0) + 1
    scores = {
        prompt_id: {key: value / counts[prompt_id][key] for key, value in total.items()}
        for prompt_id, total in sums.items()
    }
    return ConversationScores(scores, themes, rubrics, frozenset(rubrics) - frozenset(scores))
