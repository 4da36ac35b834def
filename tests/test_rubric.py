"""Conversation-level scores against numbers worked out by hand (simple-evals' formulas)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.scoring.rubric import OVERALL, Verdict, conversation_metrics, length_adjusted, rubric_score

MET, NOT, UNGRADED = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED
ConversationFactory = Callable[..., Conversation]


def item(points: float, *tags: str) -> RubricItem:
    return RubricItem(criterion=f"criterion worth {points}", points=points, tags=list(tags))


def test_verdict_maps_criteria_met() -> None:
    assert [Verdict.of(True), Verdict.of(False), Verdict.of(None)] == [MET, NOT, UNGRADED]
    assert [MET.criteria_met, NOT.criteria_met, UNGRADED.criteria_met] == [True, False, None]


def test_rubric_score_counts_met_points_over_positive_points() -> None:
    items = [item(5), item(3), item(-2)]
    # achieved = 5 (met) + (-2) (met) = 3; possible = 5 + 3 = 8 -> 3 / 8
    assert rubric_score(items, [MET, NOT, MET]) == 0.375


def test_negative_points_can_make_a_score_below_zero() -> None:
    items = [item(2), item(-10)]
    # achieved = -10; possible = 2 -> -5.0 (never clipped per conversation)
    assert rubric_score(items, [NOT, MET]) == -5.0


def test_no_positive_points_has_no_score() -> None:
    assert rubric_score([item(-4), item(-1)], [MET, MET]) is None


def test_rubric_score_refuses_ungraded_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match="ungraded"):
        rubric_score([item(5)], [UNGRADED])
    with pytest.raises(ValueError, match="1 rubric items but 2 verdicts"):
        rubric_score([item(5)], [MET, NOT])


def test_float_points() -> None:
    # achieved = 2.5; possible = 2.5 + 7.5 = 10 -> 0.25
    assert rubric_score([item(2.5), item(7.5), item(-1.5)], [MET, NOT, NOT]) == 0.25


def test_conversation_metrics_by_hand(make_conversation: ConversationFactory) -> None:
    conversation = make_conversation(
        [
            (6, ["level:example", "axis:accuracy"]),
            (4, ["level:example", "axis:completeness"]),
            (-5, ["level:example", "axis:accuracy"]),
            (5, ["level:cluster", "cluster:seek_context", "axis:context_awareness"]),
            (-3, ["level:example", "axis:communication_quality"]),
        ],
        example_tags=["theme:hedging", "physician_agreed_category:any-reducible-uncertainty"],
    )
    metrics = conversation_metrics(conversation, [MET, NOT, MET, MET, NOT])
    # overall: achieved = 6 - 5 + 5 = 6; possible = 6 + 4 + 5 = 15 -> 0.4
    # level:example: achieved = 6 - 5 = 1; possible = 6 + 4 = 10 -> 0.1
    # axis:accuracy: achieved = 6 - 5 = 1; possible = 6 -> 1/6
    # axis:completeness: 0 / 4 = 0.0; level:cluster, cluster:seek_context, axis:context_awareness: 5 / 5
    # axis:communication_quality: only a negative criterion -> no positive points -> absent
    assert metrics == {
        OVERALL: 0.4,
        "theme:hedging": 0.4,
        "physician_agreed_category:any-reducible-uncertainty": 0.4,
        "level:example": 0.1,
        "axis:accuracy": 1 / 6,
        "axis:completeness": 0.0,
        "level:cluster": 1.0,
        "cluster:seek_context": 1.0,
        "axis:context_awareness": 1.0,
    }
    assert metrics is not None and "axis:communication_quality" not in metrics
    # key order: overall, example tags, then rubric tags by first appearance (simple-evals' order)
    assert list(metrics)[:6] == [
        OVERALL,
        "theme:hedging",
        "physician_agreed_category:any-reducible-uncertainty",
        "level:example",
        "axis:accuracy",
        "axis:completeness",
    ]


def test_a_tag_repeated_within_one_criterion_counts_once(make_conversation: ConversationFactory) -> None:
    conversation = make_conversation([(4, ["axis:accuracy", "axis:accuracy"]), (4, ["axis:accuracy"])])
    # axis:accuracy: 4 (met) / (4 + 4) = 0.5; counting the repeat twice would give 8 / 12
    assert conversation_metrics(conversation, [MET, NOT]) == {OVERALL: 0.5, "axis:accuracy": 0.5}


def test_an_ungraded_criterion_leaves_the_conversation_unscored(
    make_conversation: ConversationFactory,
) -> None:
    conversation = make_conversation([(5, ["axis:accuracy"]), (5, ["axis:completeness"])])
    assert conversation_metrics(conversation, [MET, UNGRADED]) is None


def test_conversation_metrics_refuses_a_length_mismatch(make_conversation: ConversationFactory) -> None:
    conversation = make_conversation([(5, [])])
    with pytest.raises(ValueError, match="1 rubric items but 2 verdicts"):
        conversation_metrics(conversation, [MET, MET])


def test_a_rubric_built_by_hand_without_positive_points_is_refused() -> None:
    # model_construct skips validation, as records built by hand may
    conversation = Conversation.model_construct(
        prompt=[Message(role="user", content="q")],
        prompt_id="hand-built",
        rubrics=[item(-5)],
        example_tags=[],
        ideal_completions_data=None,
        canary=None,
    )
    with pytest.raises(ValueError, match="hand-built has no positive points"):
        conversation_metrics(conversation, [MET])


@pytest.mark.parametrize(
    ("score", "length", "penalty", "center", "expected"),
    [
        (0.5, 1500, 0.1, 1000, 0.4),  # 0.5 - 0.1 * (1500 - 1000) / 500 = 0.5 - 0.1
        (0.5, 500, 0.1, 1000, 0.6),  # shorter than the center earns back: 0.5 + 0.1
        (0.2, 3000, 0.05, 500, -0.05),  # 0.2 - 0.05 * 2500 / 500 = 0.2 - 0.25
    ],
)
def test_length_adjusted(score: float, length: int, penalty: float, center: float, expected: float) -> None:
    assert length_adjusted(score, length, penalty=penalty, center=center) == pytest.approx(
        expected, abs=1e-15
    )
