"""The HealthBench formulas, written to be read: this is the code that scores every answer (simple-evals'
``calculate_score`` and its tag loop, one conversation at a time, no vectorization).

- conversation score = points of the met criteria (negative points included) / sum of positive points;
  it may be below 0 and is never clipped; a rubric without positive points has no score;
- every example tag (``theme:``, ``physician_agreed_category:``) takes the conversation score;
- every rubric tag (``axis:``, ``level:``, ``cluster:``) gets the same ratio over its own criteria (a tag
  repeated within one criterion counts once), present only where it has a positive-point criterion;
- keys come in simple-evals' order: overall, the example tags, the rubric tags by first appearance; a
  later key of the same name overwrites an earlier one's value in its place, as simple-evals' dict
  updates do;
- a criterion the judge could not grade is `Verdict.UNGRADED`, never counted as met or not met: a
  conversation with one has no scores at all (it is left out of the run's figures, and counted);
- a run's figure for a key = the mean over the conversations that have the key, clipped to [0, 1]
  (`healthbench.scoring.run_score`, whose means and bootstrap are vectorized over conversations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from healthbench.scoring.verdict import Verdict

__all__ = [
    "OVERALL",
    "KeyMembers",
    "Verdict",
    "conversation_metrics",
    "key_members",
    "length_adjusted",
    "rubric_score",
    "run_figure",
]

OVERALL = "overall_score"


class Criterion(Protocol):
    """A rubric criterion as scoring and the result shapes read it (`healthbench.data.shapes.
    RubricEntry` as decoded, or `healthbench.data.schema.RubricItem`)."""

    @property
    def criterion(self) -> str: ...
    @property
    def points(self) -> float: ...
    @property
    def tags(self) -> Sequence[str]: ...


class Turn(Protocol):
    """A chat message of a conversation's prompt."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...


class Scored(Protocol):
    """A conversation as scoring and the result shapes read it (`healthbench.data.shapes.ClassicLine`
    as decoded, or `healthbench.data.schema.Conversation`)."""

    @property
    def prompt_id(self) -> str: ...
    @property
    def prompt(self) -> Sequence[Turn]: ...
    @property
    def rubrics(self) -> Sequence[Criterion]: ...
    @property
    def example_tags(self) -> Sequence[str]: ...


def rubric_score(items: Sequence[Criterion], verdicts: Sequence[Verdict]) -> float | None:
    """Met points (negatives included) / positive points; None without a positive point."""
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


def conversation_metrics(conversation: Scored, verdicts: Sequence[Verdict]) -> dict[str, float] | None:
    """Every key's score for one graded answer (module doc), None when a criterion is ungraded."""
    rubric = conversation.rubrics
    if len(rubric) != len(verdicts):
        raise ValueError(f"{len(rubric)} rubric items but {len(verdicts)} verdicts")
    if Verdict.UNGRADED in verdicts:
        return None
    overall = rubric_score(rubric, verdicts)
    if overall is None:
        raise ValueError(f"conversation {conversation.prompt_id} has no positive points")
    scores = {OVERALL: overall} | dict.fromkeys(conversation.example_tags, overall)
    possible: dict[str, float] = {}  # per rubric tag, by first appearance: its positive points
    achieved: dict[str, float] = {}  # ... and its met points: `rubric_score`'s sums (+ 0 changes none)
    for item, verdict in zip(rubric, verdicts, strict=True):
        positive = item.points if item.points > 0 else 0
        met = item.points if verdict is Verdict.MET else 0
        for tag in dict.fromkeys(item.tags):  # (a tag repeated within a criterion counts once)
            possible[tag] = possible.get(tag, 0) + positive
            achieved[tag] = achieved.get(tag, 0) + met
    scores.update((tag, achieved[tag] / points) for tag, points in possible.items() if points > 0)
    return scores


def run_figure(scores: Sequence[float]) -> float:
    """A run's figure for one key: the plain mean over conversations, clipped to [0, 1]."""
    if not scores:
        raise ValueError("no conversation has this key")
    return min(1.0, max(0.0, sum(scores) / len(scores)))


def length_adjusted(score: float, response_length: int, *, penalty: float, center: float) -> float:
    """Score minus ``penalty`` per 500 characters the response is longer than ``center``."""
    return score - penalty * (response_length - center) / 500


@dataclass(frozen=True)
class KeyMembers:
    """One key's criteria in the graded conversations that have it, for scores that weigh them
    otherwise (`healthbench.scoring.correction`): ``rows`` (the key's graded conversations, as
    positions among all graded conversations); per member criterion (in criterion order) its ``row``
    (an index into ``rows``) and its index in the batch's criteria (conversations' rubrics one after
    another); per row the key's positive points."""

    rows: npt.NDArray[np.intp]
    row: npt.NDArray[np.intp]
    criterion: npt.NDArray[np.intp]
    possible: npt.NDArray[np.float64]


def key_members(
    conversations: Sequence[Scored], verdicts: Sequence[Sequence[Verdict]]
) -> dict[str, KeyMembers]:
    """`KeyMembers` of every key of the conversations' scores, keys in first-seen order: a scored rubric
    tag takes its own criteria; overall and the example tags every criterion of their conversation."""
    if len(conversations) != len(verdicts):
        raise ValueError(f"{len(conversations)} conversations but {len(verdicts)} verdict lists")
    found: dict[str, tuple[list[int], list[int], list[int], list[float]]] = {}
    start, graded = 0, 0
    for conversation, conversation_verdicts in zip(conversations, verdicts, strict=True):
        rubric = conversation.rubrics
        scores = conversation_metrics(conversation, conversation_verdicts)
        if scores is not None:
            for key in scores:
                own = [i for i, item in enumerate(rubric) if key in item.tags]
                if not any(rubric[i].points > 0 for i in own):
                    own = list(range(len(rubric)))
                rows, row, criterion, possible = found.setdefault(key, ([], [], [], []))
                rows.append(graded)
                row.extend([len(rows) - 1] * len(own))
                criterion.extend(start + i for i in own)
                possible.append(sum(rubric[i].points for i in own if rubric[i].points > 0))
            graded += 1
        start += len(rubric)
    return {
        key: KeyMembers(
            np.array(rows, dtype=np.intp),
            np.array(row, dtype=np.intp),
            np.array(criterion, dtype=np.intp),
            np.array(possible, dtype=np.float64),
        )
        for key, (rows, row, criterion, possible) in found.items()
    }
