"""Conversation-level scores against numbers worked out by hand and against simple-evals' own loop,
transcribed (`healthbench.scoring.rubric` is the code that scores every run)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.scoring.rubric import (
    OVERALL,
    Verdict,
    conversation_metrics,
    key_members,
    length_adjusted,
    rubric_score,
    run_figure,
)
from healthbench.scoring.stats import clipped_mean

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


def hand_built_without_positive_points() -> Conversation:
    """A conversation built by hand: model_construct skips validation, as records built by hand may."""
    return Conversation.model_construct(
        prompt=[Message(role="user", content="q")],
        prompt_id="hand-built",
        rubrics=[item(-5)],
        example_tags=[],
        ideal_completions_data=None,
        canary=None,
    )


def test_a_rubric_built_by_hand_without_positive_points_is_refused() -> None:
    with pytest.raises(ValueError, match="hand-built has no positive points"):
        conversation_metrics(hand_built_without_positive_points(), [MET])


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


# --- simple-evals' own loop, transcribed literally: the formulas must give its numbers, bit for bit ---------


def simple_evals_metrics(conversation: Conversation, verdicts: list[Verdict]) -> dict[str, float]:
    """simple-evals' ``grade_sample`` metrics (healthbench_eval.py), tags deduplicated per criterion."""

    def calculate_score(items: list[RubricItem], grades: list[Verdict]) -> float | None:
        total_possible_points = sum(item.points for item in items if item.points > 0)
        if total_possible_points == 0:
            return None
        achieved_points = sum(item.points for item, grade in zip(items, grades, strict=True) if grade is MET)
        return achieved_points / total_possible_points

    overall_score = calculate_score(conversation.rubrics, verdicts)
    assert overall_score is not None
    metrics = {OVERALL: overall_score}
    metrics.update({tag: overall_score for tag in conversation.example_tags})
    rubric_tag_items_grades: dict[str, list[tuple[RubricItem, Verdict]]] = {}
    for rubric_item, grade in zip(conversation.rubrics, verdicts, strict=True):
        for tag in set(rubric_item.tags):
            rubric_tag_items_grades.setdefault(tag, []).append((rubric_item, grade))
    order = list(dict.fromkeys(t for i in conversation.rubrics for t in i.tags))  # first appearance
    rubric_tag_scores = {}
    for tag in order:
        items, grades = zip(*rubric_tag_items_grades[tag], strict=True)
        score = calculate_score(list(items), list(grades))
        if score is not None:
            rubric_tag_scores[tag] = score
    metrics.update(rubric_tag_scores)
    return metrics


def test_key_order_and_colliding_names(make_conversation: ConversationFactory) -> None:
    conversation = make_conversation(
        [(4, ["axis:b", "theme:a"]), (2, ["axis:a"]), (-3, ["cluster:neg"])],
        example_tags=["theme:a", "theme:c"],
    )
    metrics = conversation_metrics(conversation, [MET, NOT, MET])
    # overall = (4 - 3) / 6; the rubric tag theme:a overwrites the example tag in its place: 4 / 4
    assert list(metrics or {}) == [OVERALL, "theme:a", "theme:c", "axis:b", "axis:a"]
    assert metrics == {OVERALL: 1 / 6, "theme:a": 1.0, "theme:c": 1 / 6, "axis:b": 1.0, "axis:a": 0.0}


def test_key_members_by_hand(make_conversation: ConversationFactory) -> None:
    first = make_conversation([(4, ["axis:a"]), (2, ["axis:b"]), (-3, ["axis:a"])], example_tags=["theme:t"])
    second = make_conversation([(5, ["axis:b"])], example_tags=["theme:t"])
    members = key_members([first, second, first], [[MET, NOT, MET], [NOT], [UNGRADED, MET, MET]])
    assert list(members) == [OVERALL, "theme:t", "axis:a", "axis:b"]  # the ungraded third is left out
    overall, axis_a, axis_b = members[OVERALL], members["axis:a"], members["axis:b"]
    assert overall.rows.tolist() == [0, 1] and overall.criterion.tolist() == [0, 1, 2, 3]
    assert overall.row.tolist() == [0, 0, 0, 1] and overall.possible.tolist() == [6.0, 5.0]
    assert axis_a.rows.tolist() == [0] and axis_a.criterion.tolist() == [0, 2]
    assert axis_a.possible.tolist() == [4.0]
    assert axis_b.rows.tolist() == [0, 1] and axis_b.criterion.tolist() == [1, 3]
    assert axis_b.row.tolist() == [0, 1] and axis_b.possible.tolist() == [2.0, 5.0]


@st.composite
def graded_batches(draw: st.DrawFn) -> tuple[list[Conversation], list[list[Verdict]]]:
    """Any rubrics (int and float points of either sign, tags shared, repeated or absent, example tags
    that collide with rubric tags) with any verdicts, ungraded included."""
    tags = st.sampled_from(["axis:accuracy", "axis:completeness", "level:example", "cluster:c", OVERALL])
    points = st.one_of(st.integers(-10, 10), st.floats(-10, 10, allow_nan=False).map(lambda p: round(p, 3)))
    verdict = st.sampled_from([MET, NOT, MET, NOT, UNGRADED])
    conversations, verdicts = [], []
    for index in range(draw(st.integers(0, 8))):
        items = [
            RubricItem(criterion=f"c{n}", points=p, tags=draw(st.lists(tags, max_size=3)))
            for n, p in enumerate(draw(st.lists(points, min_size=1, max_size=6)))
        ]
        if not any(i.points > 0 for i in items):
            items.append(RubricItem(criterion="positive", points=draw(st.integers(1, 10)), tags=[]))
        example_tags = draw(st.lists(st.sampled_from(["theme:a", "theme:b", "axis:accuracy"]), max_size=2))
        conversations.append(
            Conversation(
                prompt=[Message(role="user", content="q")],
                prompt_id=f"p{index}",
                rubrics=items,
                example_tags=example_tags,
            )
        )
        verdicts.append([draw(verdict) for _ in items])
    return conversations, verdicts


@settings(max_examples=300, deadline=None)
@given(graded_batches())
def test_the_formulas_are_simple_evals_loop_on_any_rubric(
    batch: tuple[list[Conversation], list[list[Verdict]]],
) -> None:
    for conversation, verdicts in zip(*batch, strict=True):
        mine = conversation_metrics(conversation, verdicts)
        if UNGRADED in verdicts:
            assert mine is None
            continue
        theirs = simple_evals_metrics(conversation, verdicts)
        assert mine is not None and list(mine) == list(theirs)  # same keys, same order
        assert [mine[k].hex() for k in mine] == [float(theirs[k]).hex() for k in theirs]  # same bits


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=50))
def test_the_run_figure_of_the_specification_is_the_clipped_mean(scores: list[float]) -> None:
    assert run_figure(scores) == pytest.approx(clipped_mean(scores), abs=1e-12)
    assert 0.0 <= run_figure(scores) <= 1.0


def test_a_run_figure_needs_a_conversation() -> None:
    with pytest.raises(ValueError, match="no conversation has this key"):
        run_figure([])
