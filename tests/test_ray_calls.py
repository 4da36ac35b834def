"""`EagerSession`: how a call through Ray's HTTP stage is retried and fails, without Ray (a loopback
aiohttp server). Retries are the local engine's (`ManagedModel.call`): concurrent, Retry-After honoured."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

from aiohttp import web
from support.loopback import Handler, chat_endpoint

from healthbench.executors.ray_calls import CALL_FIELD, ERROR_FIELD, SessionFactory, answer
from healthbench.models.base import ModelSettings, parse_model_spec
from healthbench.models.limits import RetryPolicy

OK = {"choices": [{"message": {"content": "fine"}}]}


def _handler(tries: Counter[str]) -> Handler:
    """Answers by the first message's content: ok, garbage, key (401), busy (500), and flaky-N (429
    with Retry-After 0.2 s twice, then an answer)."""

    async def handle(request: web.Request) -> web.Response:
        what = (await request.json())["messages"][0]["content"]
        tries[what] += 1
        if what == "garbage":
            return web.Response(text="<html>oops</html>")
        if what == "key":
            return web.Response(status=401, text=json.dumps({"error": {"message": "Incorrect API key."}}))
        if what == "busy":
            return web.Response(status=500, text=json.dumps({"error": {"message": "Internal server error"}}))
        if what.startswith("flaky") and tries[what] <= 2:
            return web.Response(status=429, headers={"Retry-After": "0.2"}, text="slow down")
        return web.Response(text=json.dumps(OK))

    return handle


async def _replies(policy: RetryPolicy, contents: list[str]) -> tuple[list[Any], Counter[str], float]:
    """Post one body per content at once, as Ray's stage does; the replies, tries per content, seconds."""
    tries: Counter[str] = Counter()
    async with chat_endpoint(_handler(tries)) as url:
        factory = SessionFactory(parse_model_spec("judge", url), ModelSettings(), None, policy, 64)
        started = time.monotonic()
        async with factory() as session:
            bodies = [
                json.dumps({"model": "judge", "messages": [{"role": "user", "content": c}]}) for c in contents
            ]
            posts = [session.post(f"{url}/chat/completions", data=body, headers={}) for body in bodies]
            replies = []
            for post in posts:
                async with await post as reply:
                    replies.append((reply.status, await reply.json()))
    return replies, tries, time.monotonic() - started


def how(reply: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """How the call went, as the reply says (``CALL_FIELD``), taken out of the reply."""
    went: dict[str, Any] = json.loads(reply[1].pop(CALL_FIELD))
    return went


def test_failures_are_retried_in_the_session_then_become_error_rows() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)
    before = time.time()
    (ok, garbage, key, busy), tries, _ = asyncio.run(_replies(policy, ["ok", "garbage", "key", "busy"]))
    went = {"ok": how(ok), "garbage": how(garbage), "key": how(key), "busy": how(busy)}
    assert ok == (200, OK)
    assert tries == {"ok": 1, "garbage": 3, "key": 1, "busy": 3}  # fatal: once; the others: 1 + 2 retries
    assert garbage[0] == 200 and garbage[1][ERROR_FIELD]["fatal"] is False
    assert "gave up after 3 attempts; last error: unreadable response" in garbage[1][ERROR_FIELD]["message"]
    assert key[1][ERROR_FIELD]["fatal"] is True
    assert key[1][ERROR_FIELD]["type"] == "FatalModelError"
    assert "401 invalid or missing API key" in key[1][ERROR_FIELD]["message"]
    assert busy == (
        200,
        {ERROR_FIELD: {"message": busy[1][ERROR_FIELD]["message"], "fatal": False, "type": "ModelError"}},
    )
    assert busy[1][ERROR_FIELD]["message"].endswith(
        "gave up after 3 attempts; last error: 500: Internal server error"
    )
    # each reply says how its call went: the retried attempts' kinds (the last failure is no retry)
    assert {name: w["retries"] for name, w in went.items()} == {
        "ok": [],
        "garbage": ["transient", "transient"],
        "key": [],
        "busy": ["transient", "transient"],
    }
    for w in went.values():
        assert before <= w["started"] <= time.time() and 0 < w["seconds"] < 30


def test_a_batchs_retries_wait_together_and_honour_retry_after() -> None:
    """40 requests rate-limited twice each (Retry-After 0.2 s; the policy's own backoff would be 30 s):
    all answered after about two Retry-After waits, not forty in a row."""
    policy = RetryPolicy(max_retries=4, initial_delay=30.0, max_delay=60.0)
    contents = [f"flaky-{i}" for i in range(40)]
    replies, tries, seconds = asyncio.run(_replies(policy, contents))
    assert [how(reply)["retries"] for reply in replies] == [["rate_limit", "rate_limit"]] * 40
    assert replies == [(200, OK)] * 40
    assert set(tries.values()) == {3}
    assert 0.4 <= seconds < 3.0


def test_an_error_row_becomes_an_answer_with_its_error() -> None:
    row = json.dumps({ERROR_FIELD: {"message": "500: boom", "fatal": False, "type": "OutageError"}})
    went = json.dumps({"started": 1700000000.5, "seconds": 2.25, "retries": ["rate_limit", "transient"]})
    failed = answer(3, row, went)
    assert (failed.tag, failed.error, failed.fatal, failed.error_type) == (
        3,
        "500: boom",
        False,
        "OutageError",
    )
    assert (failed.started, failed.seconds, failed.retries) == (
        1700000000.5,
        2.25,
        ("rate_limit", "transient"),
    )
    ok = answer(4, '{"choices": []}')  # a row that says nothing of its call (a vLLM row)
    assert ok == (4, '{"choices": []}', None, False, None, None, None, ())
