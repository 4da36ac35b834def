"""The grading state machine both executors run (`executors.grading.Grading`): attempts, re-asks,
usage, cost, cached, and the grade row it ends with."""

from __future__ import annotations

from healthbench.executors.grading import CallResult, EngineOptions, Grading, WorkItem
from healthbench.grading.template import builtin_template
from healthbench.models.base import ModelSettings, Usage, parse_model_spec

W = WorkItem("c1", 1, ({"role": "user", "content": "hi"},), ("A", "B"))
MET = '{"explanation": "yes", "criteria_met": true}'


def answer(text: str, tokens: int = 10, cost: float | None = 0.5, cached: bool = False) -> CallResult:
    return CallResult(text, Usage(input_tokens=tokens, output_tokens=1), cost, cached)


def grading(first: int = 0, retries: int = 2) -> Grading:
    return Grading.start(W, "answer", 1, first, EngineOptions(judge_retries=retries))


def test_a_verdict_after_a_reask_adds_up_both_attempts() -> None:
    g = grading()
    assert g.answered(answer("no json here")) is None  # asked again
    row = g.answered(answer(MET, tokens=20, cost=0.25, cached=True))
    assert row is not None
    assert (row.item_id, row.repeat, row.criterion, row.status, row.explanation) == ("c1", 1, 1, "met", "yes")
    assert (row.raw, row.error, row.attempts, row.cost, row.cached) == (None, None, 2, 0.75, False)
    assert row.usage == Usage(input_tokens=30, output_tokens=2).as_dict()


def test_the_last_unusable_answer_leaves_the_criterion_ungraded_with_what_it_said() -> None:
    g = grading(first=1, retries=1)  # a resumed criterion: attempts 1 and 2 left
    assert g.answered(answer("nope")) is None
    row = g.answered(answer("still nope", cost=None))
    assert row is not None
    assert (row.status, row.raw, row.attempts, row.cost) == ("ungraded", "still nope", 3, None)
    assert row.error is not None and row.error.startswith("unparseable judge answer: no JSON object")


def test_a_failed_call_is_ungraded_and_keeps_the_earlier_answer() -> None:
    g = grading()
    assert g.answered(answer("nope")) is None
    row = g.failed("judge: gave up after 3 attempts; last error: 500: boom")
    assert (row.status, row.raw, row.attempts, row.cost) == ("ungraded", "nope", 2, 0.5)
    assert row.error == "judge: gave up after 3 attempts; last error: 500: boom"


def test_each_attempt_has_its_own_cache_key() -> None:
    spec, settings = parse_model_spec("judge", "http://127.0.0.1:1/v1"), ModelSettings()
    g = grading()
    messages, schema, first = g.request(spec, settings, builtin_template(), EngineOptions())
    g.answered(answer("nope"))
    again, _, second = g.request(spec, settings, builtin_template(), EngineOptions())
    assert again == messages and schema is None and first != second
