"""Conversation-level scores against numbers worked out by hand (simple-evals' formulas), and the fast
path (`batch_metrics`) against the readable specification (`scoring/reference.py`)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.scoring.reference import conversation_scores, rubric_score, run_figure
from healthbench.scoring.rubric import (
    OVERALL,
    MetricTable,
    RubricLayout,
    Verdict,
    batch_metrics,
    conversation_metrics,
    joined_tables,
    length_adjusted,
)
from healthbench.scoring.stats import clipped_mean, columns_of

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


# --- batch_metrics: every conversation at once, the same numbers as conversation_metrics ------------------


def random_batch(
    seed: int,
    *,
    example_vocabulary: tuple[str, ...] = ("theme:a", "theme:b", "physician:x"),
    rubric_vocabulary: tuple[str, ...] = (
        "axis:accuracy",
        "axis:completeness",
        "level:example",
        "level:cluster",
        "cluster:c1",
        "cluster:c2",
    ),
    n: int = 60,
) -> tuple[list[Conversation], list[list[Verdict]]]:
    """Random conversations: int and float points (negative too), tags repeated within a criterion,
    tags with only negative points, criteria without tags, ungraded criteria, varied example tags."""
    rng = random.Random(seed)
    conversations, verdicts = [], []
    for index in range(n):
        items = []
        for number in range(rng.randint(1, 7)):
            points: float = rng.choice([-10, -3, -1, 1, 2, 5, 10, 2.5, 0.1, -0.7])
            tags = rng.sample(rubric_vocabulary, rng.randint(0, min(3, len(rubric_vocabulary))))
            if tags and rng.random() < 0.15:
                tags.append(tags[0])  # a tag repeated within one criterion
            items.append(RubricItem(criterion=f"c{number}", points=points, tags=tags))
        if not any(item.points > 0 for item in items):
            items.append(RubricItem(criterion="positive", points=4, tags=["axis:accuracy"]))
        example_tags = rng.sample(example_vocabulary, rng.randint(0, min(2, len(example_vocabulary))))
        conversations.append(
            Conversation(
                prompt=[Message(role="user", content="q")],
                prompt_id=f"p{index}",
                rubrics=items,
                example_tags=example_tags,
            )
        )
        verdicts.append(
            [rng.choice([MET, NOT, MET, NOT, UNGRADED if rng.random() < 0.05 else MET]) for _ in items]
        )
    return conversations, verdicts


def assert_same_as_one_by_one(conversations: list[Conversation], verdicts: list[list[Verdict]]) -> None:
    table = batch_metrics(conversations, verdicts)
    expected = [conversation_scores(c, v) for c, v in zip(conversations, verdicts, strict=True)]
    assert table.per_conversation == expected
    for mine, theirs in zip(table.per_conversation, expected, strict=True):
        if theirs is not None:
            assert mine is not None and list(mine) == list(theirs)  # same key order
            assert [mine[k].hex() for k in mine] == [theirs[k].hex() for k in theirs]  # same bits
    columns = columns_of([m for m in expected if m is not None])
    assert list(table.columns) == list(columns)
    for key, column in columns.items():
        assert np.array_equal(table.columns[key].rows, column.rows), key
        assert table.columns[key].values.tobytes() == column.values.tobytes(), key
    assert table.ungraded_criteria == sum(v is UNGRADED for vs in verdicts for v in vs)


@pytest.mark.parametrize("seed", range(6))
def test_batch_metrics_matches_conversation_metrics(seed: int) -> None:
    assert_same_as_one_by_one(*random_batch(seed))


@pytest.mark.parametrize(
    "example_vocabulary",
    [
        ("theme:a", "axis:accuracy"),  # an example tag that is also a rubric tag
        ("theme:a", OVERALL),  # an example tag named like the overall score
        ("theme:a", "theme:a"),  # the same example tag twice in a conversation
        (),  # no example tags at all
    ],
)
def test_batch_metrics_unusual_tags(example_vocabulary: tuple[str, ...]) -> None:
    conversations, verdicts = random_batch(11, example_vocabulary=example_vocabulary)
    if example_vocabulary == ("theme:a", "theme:a"):
        conversations[0] = conversations[0].model_copy(update={"example_tags": ["theme:a", "theme:a"]})
    assert_same_as_one_by_one(conversations, verdicts)


def test_batch_metrics_with_a_rubric_tag_named_like_the_overall_score() -> None:
    assert_same_as_one_by_one(*random_batch(12, rubric_vocabulary=("axis:accuracy", OVERALL)))


def test_batch_metrics_of_nothing_and_of_only_ungraded() -> None:
    assert batch_metrics([], []) == MetricTable([], {}, 0)
    conversations, verdicts = random_batch(13, n=3)
    verdicts = [[UNGRADED] * len(v) for v in verdicts]
    table = batch_metrics(conversations, verdicts)
    assert table.per_conversation == [None, None, None] and table.columns == {}
    assert table.ungraded_criteria == sum(len(v) for v in verdicts)


def test_batch_metrics_raises_what_conversation_metrics_raises(
    make_conversation: ConversationFactory,
) -> None:
    conversation = make_conversation([(5, [])])
    with pytest.raises(ValueError, match="1 rubric items but 2 verdicts"):
        batch_metrics([conversation], [[MET, MET]])
    with pytest.raises(ValueError, match="hand-built has no positive points"):
        batch_metrics([conversation, hand_built_without_positive_points()], [[MET], [MET]])
    with pytest.raises(ValueError, match="2 conversations but 1 verdict lists"):
        batch_metrics([conversation, conversation], [[MET]])


def test_a_batch_with_too_many_tag_cells_is_scored_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    from healthbench.scoring import rubric

    monkeypatch.setattr(rubric, "_MAX_CELLS", 40)  # 60 conversations x ~6 tags: scored in halves
    conversations, verdicts = random_batch(14)
    assert_same_as_one_by_one(conversations, verdicts)
    assert batch_metrics(conversations, verdicts).graded is not None


@pytest.mark.parametrize("cuts", [(0, 60), (7, 8, 31), (1, 59), (20, 20, 40)])
def test_tables_of_consecutive_pages_join_into_the_whole_batchs(cuts: tuple[int, ...]) -> None:
    conversations, verdicts = random_batch(3)
    bounds = [0, *cuts, len(conversations)]
    pages = [(conversations[a:b], verdicts[a:b]) for a, b in itertools.pairwise(bounds)]
    whole, joined = batch_metrics(conversations, verdicts), joined_tables([batch_metrics(*p) for p in pages])
    assert joined.per_conversation == whole.per_conversation and list(joined.columns) == list(whole.columns)
    for key, column in whole.columns.items():  # keys first seen on a later page come in their place
        assert np.array_equal(joined.columns[key].rows, column.rows), key
        assert joined.columns[key].values.tobytes() == column.values.tobytes(), key
    assert joined.ungraded_criteria == whole.ungraded_criteria > 0
    assert whole.graded is not None and joined.graded is not None
    assert np.array_equal(joined.graded, whole.graded)
    without_dicts = []
    for page_conversations, page_verdicts in pages:
        layout = RubricLayout.of(page_conversations)
        assert layout is not None
        table = layout.metrics(page_verdicts, dicts=False)
        assert table is not None
        without_dicts.append(table)
    assert joined_tables(without_dicts).per_conversation == []
    assert list(joined_tables(without_dicts).columns) == list(whole.columns)
    filled = [k for k, (page, _) in enumerate(pages) if page]  # (an empty page carries nothing)
    if len(filled) > 1:
        mixed = [batch_metrics(*pages[k]) if k == filled[0] else t for k, t in enumerate(without_dicts)]
        with pytest.raises(ValueError, match="with and without their per-conversation dicts"):
            joined_tables(mixed)


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
def test_batch_metrics_equals_the_specification_on_any_rubric(
    batch: tuple[list[Conversation], list[list[Verdict]]],
) -> None:
    assert_same_as_one_by_one(*batch)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=50))
def test_the_run_figure_of_the_specification_is_the_clipped_mean(scores: list[float]) -> None:
    assert run_figure(scores) == pytest.approx(clipped_mean(scores), abs=1e-12)
    assert 0.0 <= run_figure(scores) <= 1.0


def test_the_specification_refuses_what_the_fast_path_refuses(make_conversation: ConversationFactory) -> None:
    with pytest.raises(ValueError, match="hand-built has no positive points"):
        conversation_scores(hand_built_without_positive_points(), [MET])
    with pytest.raises(ValueError, match="no conversation has this key"):
        run_figure([])
