"""Conversation-level HealthBench scores, exactly as simple-evals defines them.

- conversation score = points of met criteria (negatives included) / sum of positive points;
- every example tag (``theme:``, ``physician_agreed_category:``) takes the conversation score;
- every rubric tag (``axis:``, ``level:``, ``cluster:``) gets the same ratio over its own criteria,
  present only when that tag has at least one positive-point criterion.

A criterion the judge could not grade is `Verdict.UNGRADED`: never counted as met or not met. A
conversation with any ungraded criterion has no score (it is left out of the aggregate).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from healthbench.data.schema import Conversation, RubricItem

OVERALL = "overall_score"


class Verdict(Enum):
    """The judge's decision on one criterion: met, not met, or ungraded (no usable answer)."""

    NOT_MET = 0
    MET = 1
    UNGRADED = -1

    @classmethod
    def of(cls, criteria_met: bool | None) -> Verdict:
        if criteria_met is None:
            return cls.UNGRADED
        return cls.MET if criteria_met else cls.NOT_MET

    @property
    def criteria_met(self) -> bool | None:
        return None if self is Verdict.UNGRADED else self is Verdict.MET


def rubric_score(items: Sequence[RubricItem], verdicts: Sequence[Verdict]) -> float | None:
    """Achieved points / possible (positive) points; None when there is no positive point.

    Raises ValueError when lengths differ or a verdict is ungraded: callers decide what an ungraded
    conversation means before asking for a score.
    """
    if len(items) != len(verdicts):
        raise ValueError(f"{len(items)} rubric items but {len(verdicts)} verdicts")
    if Verdict.UNGRADED in verdicts:
        raise ValueError("cannot score a rubric with ungraded criteria")
    possible = sum(item.points for item in items if item.points > 0)
    if possible == 0:
        return None
    achieved = sum(item.points for item, verdict in zip(items, verdicts, strict=True)
                   if verdict is Verdict.MET)
    return achieved / possible


def conversation_metrics(conversation: Conversation, verdicts: Sequence[Verdict]) -> dict[str, float] | None:
    """All per-conversation metric values, or None when any criterion is ungraded."""
    if Verdict.UNGRADED in verdicts:
        return None
    overall = rubric_score(conversation.rubrics, verdicts)
    if overall is None:  # the schema rejects such rubrics; kept for records built by hand
        raise ValueError(f"conversation {conversation.prompt_id} has no positive points")
    metrics: dict[str, float] = {OVERALL: overall}
    for tag in conversation.example_tags:
        metrics[tag] = overall
    by_tag: dict[str, tuple[list[RubricItem], list[Verdict]]] = {}
    for item, verdict in zip(conversation.rubrics, verdicts, strict=True):
        for tag in dict.fromkeys(item.tags):
            items, tag_verdicts = by_tag.setdefault(tag, ([], []))
            items.append(item)
            tag_verdicts.append(verdict)
    for tag, (items, tag_verdicts) in by_tag.items():
        score = rubric_score(items, tag_verdicts)
        if score is not None:
            metrics[tag] = score
    return metrics


def length_adjusted(score: float, response_length: int, *, penalty: float, center: float) -> float:
    """Score minus ``penalty`` per 500 characters the response is longer than ``center``."""
    return score - penalty * (response_length - center) / 500
