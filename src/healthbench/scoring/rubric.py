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
    achieved = sum(
        item.points for item, verdict in zip(items, verdicts, strict=True) if verdict is Verdict.MET
    )
    return achieved / possible


def conversation_metrics(conversation: Conversation, verdicts: Sequence[Verdict]) -> dict[str, float] | None:
    """All per-conversation metric values, or None when any criterion is ungraded.

    Same numbers, key order and summation order as `rubric_score` applied tag by tag (keys: overall,
    then example tags, then rubric tags in order of first appearance), in a single pass over the
    rubric because this runs once per conversation of every run.
    """
    if len(conversation.rubrics) != len(verdicts):
        raise ValueError(f"{len(conversation.rubrics)} rubric items but {len(verdicts)} verdicts")
    if Verdict.UNGRADED in verdicts:
        return None
    possible: float = 0
    achieved: float = 0
    tag_possible: dict[str, float] = {}  # insertion order = first appearance of the tag
    tag_achieved: dict[str, float] = {}
    for item, verdict in zip(conversation.rubrics, verdicts, strict=True):
        points = item.points
        tags: Sequence[str] = item.tags
        if len(tags) > 1 and len(set(tags)) != len(tags):
            tags = list(dict.fromkeys(tags))  # a tag counts once per criterion
        if points > 0:
            possible += points
            for tag in tags:
                tag_possible[tag] = tag_possible.get(tag, 0) + points
        else:
            for tag in tags:
                tag_possible.setdefault(tag, 0)
        if verdict is Verdict.MET:
            achieved += points
            for tag in tags:
                tag_achieved[tag] = tag_achieved.get(tag, 0) + points
    if possible == 0:  # the schema rejects such rubrics; kept for records built by hand
        raise ValueError(f"conversation {conversation.prompt_id} has no positive points")
    overall = achieved / possible
    metrics: dict[str, float] = {OVERALL: overall}
    for tag in conversation.example_tags:
        metrics[tag] = overall
    for tag, tag_total in tag_possible.items():
        if tag_total > 0:  # only tags with at least one positive-point criterion get a score
            metrics[tag] = tag_achieved.get(tag, 0) / tag_total
    return metrics


def length_adjusted(score: float, response_length: int, *, penalty: float, center: float) -> float:
    """Score minus ``penalty`` per 500 characters the response is longer than ``center``."""
    return score - penalty * (response_length - center) / 500
