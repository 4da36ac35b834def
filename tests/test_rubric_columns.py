"""The vectorized scores (`healthbench.scoring.rubric_columns`, through `score_run`'s `rubric_scores`)
against the readable spec (`healthbench.scoring.rubric.conversation_metrics`), which stays the
definition: on random rubrics (negative, zero and fractional points, repeated and colliding tags,
ungraded criteria, repeats of a conversation) every answer's scores are the spec's, to 1e-12, in the
spec's key order, and so are the run's columns (simple-evals' rows: metrics then ``score``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.data.shapes import ClassicLine, RubricEntry, Turn
from healthbench.scoring.rubric import OVERALL, Scored, Verdict, conversation_metrics
from healthbench.scoring.run_score import (
    LENGTH_ADJUSTED,
    GradedSample,
    ScoringOptions,
    rubric_scores,
    sample_metrics,
    score_run,
)
from healthbench.scoring.stats import columns_of

# a few names, some of which collide across kinds (an example tag also a rubric tag, a tag named as
# the overall key or as simple-evals' ``score``): a dict keeps a key's first place and its last value
TAGS = ["axis:accuracy", "axis:completeness", "level:example", "cluster:c1", "theme:t", OVERALL, "score"]
EXAMPLE_TAGS = ["theme:t", "theme:u", "physician_agreed_category:p", "axis:accuracy", OVERALL]
POINTS = st.one_of(st.integers(-10, 10), st.sampled_from([0.5, -2.5, 7.25, 1e-3]))
VERDICTS = st.sampled_from([Verdict.MET, Verdict.NOT_MET, Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED])


@st.composite
def conversations(draw: st.DrawFn, prompt_id: str) -> Scored:
    rubric = draw(
        st.lists(st.tuples(POINTS, st.lists(st.sampled_from(TAGS), max_size=3)), min_size=1, max_size=6)
    )
    if not any(points > 0 for points, _ in rubric):
        rubric.append(
            (draw(st.sampled_from([1, 3, 0.25])), draw(st.lists(st.sampled_from(TAGS), max_size=2)))
        )
    example_tags = draw(st.lists(st.sampled_from(EXAMPLE_TAGS), max_size=3))
    if draw(st.booleans()):  # the reader's shapes (tags as tuples) or pydantic records (lists)
        items = [RubricEntry(f"c{i}", p, tuple(t)) for i, (p, t) in enumerate(rubric)]
        return ClassicLine([Turn("user", "q")], prompt_id, items, example_tags)
    records = [RubricItem(criterion=f"c{i}", points=p, tags=t) for i, (p, t) in enumerate(rubric)]
    return Conversation(
        prompt=[Message(role="user", content="q")],
        prompt_id=prompt_id,
        rubrics=records,
        example_tags=example_tags,
    )


@st.composite
def runs(draw: st.DrawFn) -> list[GradedSample]:
    distinct = [draw(conversations(f"p{i}")) for i in range(draw(st.integers(0, 6)))]
    answered = draw(st.lists(st.sampled_from(distinct), max_size=10)) if distinct else []
    ungraded_share = draw(st.sampled_from([0.0, 0.2]))
    samples = []
    for conversation in answered:
        verdicts = [
            draw(VERDICTS) if ungraded_share else draw(VERDICTS.filter(lambda v: v is not Verdict.UNGRADED))
            for _ in conversation.rubrics
        ]
        samples.append(GradedSample(conversation, "x" * draw(st.integers(0, 3000)), tuple(verdicts)))
    return samples


def assert_same(ours: dict[str, float] | None, spec: dict[str, float] | None) -> None:
    assert (ours is None) == (spec is None)
    if ours is not None and spec is not None:
        assert list(ours) == list(spec)  # the same keys, in the same order
        assert all(abs(ours[k] - spec[k]) <= 1e-12 for k in spec), (ours, spec)


@settings(max_examples=300, deadline=None)
@given(runs(), st.booleans())
def test_every_answer_and_column_is_the_spec(samples: list[GradedSample], adjusted: bool) -> None:
    options = ScoringOptions(n_resamples=0, length_penalty=0.1, length_center=1000) if adjusted else None
    run = score_run(samples, options)
    spec = [sample_metrics(s, options or ScoringOptions()) for s in samples]
    assert len(run.per_sample) == len(spec)
    for ours, expected in zip(run.per_sample, spec, strict=True):
        assert_same(ours, expected)
    rows = columns_of([dict(m, score=m[OVERALL]) for m in spec if m is not None])
    assert list(run.stats) == [key for key, column in rows.items() if column.values.size]
    for key, column in rows.items():
        assert run.stats[key].n_samples == column.values.size
        assert abs(run.stats[key].mean - float(np.clip(column.values.mean(), 0, 1))) <= 1e-12
    if adjusted and any(m is not None for m in spec):
        assert LENGTH_ADJUSTED in run.stats


@settings(max_examples=200, deadline=None)
@given(runs())
def test_the_columns_are_the_specs_rows(samples: list[GradedSample]) -> None:
    graded = [s for s in samples if Verdict.UNGRADED not in s.verdicts]
    met = np.array([v is Verdict.MET for s in graded for v in s.verdicts], np.float64)
    columns = rubric_scores([s.conversation for s in graded], met).columns()
    spec = columns_of([conversation_metrics(s.conversation, s.verdicts) or {} for s in graded])
    assert list(columns) == list(spec)
    for key, column in spec.items():
        assert columns[key].rows.tolist() == column.rows.tolist()
        assert np.allclose(columns[key].values, column.values, rtol=0, atol=1e-12)


def test_a_graded_answer_without_positive_points_is_refused_as_the_spec_refuses_it() -> None:
    conversation = ClassicLine([Turn("user", "q")], "no-positive", [RubricEntry("c", -5, ("axis:a",))])
    with pytest.raises(ValueError, match="conversation no-positive has no positive points"):
        conversation_metrics(conversation, [Verdict.MET])
    with pytest.raises(ValueError, match="conversation no-positive has no positive points"):
        score_run([GradedSample(conversation, "x", (Verdict.MET,))])
    assert score_run([GradedSample(conversation, "x", (Verdict.UNGRADED,))]).ungraded_samples == 1
