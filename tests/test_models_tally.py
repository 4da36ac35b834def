"""The one counter of model calls (CallTally) and the one concurrency gate (Gate)."""

from __future__ import annotations

import asyncio

from healthbench.models.limits import Answers, Connection, ConnectionLimits, Gate
from healthbench.models.tally import CallTally


def test_a_tally_counts_calls_cache_hits_failures_tokens_and_cost() -> None:
    tally = CallTally()
    tally.count({"input_tokens": 10, "output_tokens": 5}, 0.25)
    tally.count({"input_tokens": 3, "output_tokens": 1, "reasoning_tokens": 1}, None)  # unpriced
    tally.count(None, 0.0, cached=True)
    tally.count(None, None, failed=True)  # a failed call's cost is not "unknown": it cost nothing known
    assert (tally.calls, tally.cached_calls, tally.failed_calls, tally.unpriced_calls) == (4, 1, 1, 1)
    assert (tally.made, tally.answered) == (3, 3)
    assert tally.cost == 0.25
    assert tally.tokens == {"input_tokens": 13, "output_tokens": 6, "reasoning_tokens": 1}
    assert (tally.input_tokens, tally.output_tokens) == (13, 6)


async def test_a_gate_lets_at_most_its_limit_in_and_counts_them() -> None:
    gate = Gate(2)
    inside: list[int] = []

    async def hold() -> None:
        async with gate:
            inside.append(gate.inside)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(hold() for _ in range(6)))
    assert max(inside) == gate.most_inside == 2 and gate.inside == 0


def test_never_answered_is_per_endpoint_and_per_model() -> None:
    connection = Connection(ConnectionLimits(), Gate(1))
    assert connection.never_answered() and connection.never_answered("judge")
    connection.succeeded("candidate")
    assert not connection.never_answered()  # the endpoint answers
    assert connection.never_answered("judge") and not connection.never_answered("candidate")


def test_answers_is_the_one_record_the_connection_and_ray_ask() -> None:
    answers = Answers()
    assert answers.never_answered() and answers.never_answered("m")
    answers.record("m")
    assert not answers.never_answered() and not answers.never_answered("m")
    assert answers.never_answered("other")
    connection = Connection(ConnectionLimits(), Gate(1))
    connection.succeeded("m")
    assert not connection.answers.never_answered("m")  # the connection keeps its record in an Answers
