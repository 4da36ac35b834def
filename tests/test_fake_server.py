"""The fake model server: deterministic answers, judge verdicts, faults, stats, speed, and its CLI."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from healthbench.cli import fake_server_cmd  # noqa: F401  (registers the command)
from healthbench.cli.app import app
from healthbench.models.base import parse_model_spec
from healthbench.models.factory import create_model
from healthbench.models.limits import ConnectionLimits, ConnectionPool
from healthbench.testing.fake_server import (
    GARBAGE_TEXT,
    FakeServerConfig,
    FaultMix,
    create_app,
    fake_answer,
    fake_judge_text,
    fake_verdict,
    fetch_stats,
    is_judge_request,
    running_fake_server,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "models.md"
QUESTION = [{"role": "user", "content": "I twisted my ankle, should I get an x-ray?"}]
JUDGE = [{"role": "user", "content": 'Grade it. Answer {"explanation": "...", "criteria_met": true|false}'}]
ONLY_GARBAGE = FaultMix(rate_limit=0, server_error=0, unavailable=0, garbage=1)
ONLY_429 = FaultMix(rate_limit=1, server_error=0, unavailable=0, garbage=0)
ONLY_503 = FaultMix(rate_limit=0, server_error=0, unavailable=1, garbage=0)


def client_for(config: FakeServerConfig | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(config)), base_url="http://fake")


def chat(messages, **extra):
    return {"model": "fake-model", "messages": messages, **extra}


# ---------------------------------------------------------------- pure answer functions


def test_fake_answer_is_a_stable_function_of_the_messages():
    answer = fake_answer(QUESTION)
    assert answer == fake_answer([dict(m) for m in QUESTION])
    canonical = json.dumps(QUESTION, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert answer.startswith(f"Fake answer {hashlib.sha256(canonical.encode()).hexdigest()[:8]}: ")
    assert re.fullmatch(r"Fake answer [0-9a-f]{8}: [a-z -]+\.", answer)
    assert 8 <= len(answer.split()) - 3 <= 24
    assert fake_answer([{"role": "system", "content": "x"}, *QUESTION]) != answer
    assert fake_answer([{"role": "assistant", "content": QUESTION[0]["content"]}]) != answer


def test_fake_verdict_follows_the_met_rate():
    prompts = [f"rubric item {i} criteria_met" for i in range(4000)]
    assert not any(fake_verdict(p, 0.0) for p in prompts)
    assert all(fake_verdict(p, 1.0) for p in prompts)
    for rate in (0.2, 0.5, 0.9):
        share = sum(fake_verdict(p, rate) for p in prompts) / len(prompts)
        assert abs(share - rate) < 0.03
    # monotone in the rate: a prompt met at 0.3 is met at 0.6
    assert all(fake_verdict(p, 0.6) for p in prompts if fake_verdict(p, 0.3))
    p = prompts[0]
    assert fake_verdict(p) is (int(hashlib.sha256(p.encode()).hexdigest()[:13], 16) / 16**13 < 0.5)


def test_fake_judge_text_is_json_sometimes_fenced():
    prompts = [f"item {i}: criteria_met?" for i in range(400)]
    texts = [fake_judge_text(p) for p in prompts]
    fenced = [t for t in texts if t.startswith("```json\n")]
    assert 0.15 < len(fenced) / len(texts) < 0.35
    for p, t in zip(prompts, texts, strict=True):
        verdict = json.loads(t.removeprefix("```json\n").removesuffix("\n```"))
        assert verdict["criteria_met"] is fake_verdict(p)
        assert verdict["explanation"].startswith("Fake judge ")
    assert fake_judge_text(prompts[0]) == texts[0]


def test_judge_requests_are_recognised_by_the_last_user_message():
    assert is_judge_request(JUDGE)
    assert not is_judge_request(QUESTION)
    assert is_judge_request([*JUDGE, {"role": "assistant", "content": "ok"}])
    assert not is_judge_request([*JUDGE, {"role": "user", "content": "and now?"}])


# ---------------------------------------------------------------- endpoints (in-process ASGI)


async def test_chat_completion_shape_usage_and_stats():
    async with client_for() as client:
        response = await client.post("/v1/chat/completions", json=chat(QUESTION))
        assert response.status_code == 200
        data = response.json()
        text = fake_answer(QUESTION)
        assert data["choices"] == [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ]
        assert data["usage"] == {
            "prompt_tokens": 9,
            "completion_tokens": len(text.split()),
            "total_tokens": 9 + len(text.split()),
        }
        assert data["model"] == "fake-model"
        judge = (await client.post("/v1/chat/completions", json=chat(JUDGE))).json()
        assert judge["choices"][0]["message"]["content"] == fake_judge_text(JUDGE[0]["content"])
        stats = (await client.get("/stats")).json()
        assert (stats["requests"], stats["candidate"], stats["judge"], stats["chat_completions"]) == (
            2,
            1,
            1,
            2,
        )
        assert stats["faults_total"] == 0
        assert stats["max_in_flight"] == 1
        reset = (await client.post("/stats/reset")).json()
        assert (reset["requests"], reset["candidate"], reset["judge"], reset["max_in_flight"]) == (0, 0, 0, 0)


async def test_met_rate_reaches_the_judge():
    prompt = [{"role": "user", "content": "criteria_met"}]
    for rate, expected in ((0.0, False), (1.0, True)):
        async with client_for(FakeServerConfig(met_rate=rate)) as client:
            body = (await client.post("/v1/chat/completions", json=chat(prompt))).json()
            text = body["choices"][0]["message"]["content"]
            assert (
                json.loads(text.removeprefix("```json\n").removesuffix("\n```"))["criteria_met"] is expected
            )


async def test_anthropic_messages_shape():
    async with client_for() as client:
        response = await client.post(
            "/v1/messages", json={"model": "c", "system": "Be kind.", "messages": QUESTION}
        )
        data = response.json()
        expected = fake_answer([{"role": "system", "content": "Be kind."}, *QUESTION])
        assert data["content"] == [{"type": "text", "text": expected}]
        assert data["usage"] == {"input_tokens": 2 + 9, "output_tokens": len(expected.split())}
        assert (data["type"], data["role"], data["model"], data["stop_reason"]) == (
            "message",
            "assistant",
            "c",
            "end_turn",
        )
        assert (await client.get("/stats")).json()["messages"] == 1


async def test_models_listing_and_bad_requests():
    async with client_for(FakeServerConfig(models=["a", "b"])) as client:
        listing = (await client.get("/v1/models")).json()
        assert [m["id"] for m in listing["data"]] == ["a", "b"]
        bad = await client.post("/v1/chat/completions", content=b"not json")
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "invalid_request_error"
        missing = await client.post("/v1/messages", json={"model": "c"})
        assert missing.status_code == 400 and missing.json()["type"] == "error"
        stats = (await client.get("/stats")).json()
        assert (stats["models"], stats["bad_requests"], stats["requests"]) == (1, 2, 2)


async def test_required_api_key_on_both_endpoints():
    async with client_for(FakeServerConfig(require_api_key="k-123")) as client:
        denied = await client.post("/v1/chat/completions", json=chat(QUESTION))
        assert denied.status_code == 401
        assert denied.json()["error"]["message"] == "Incorrect API key provided."
        wrong = await client.post(
            "/v1/chat/completions", json=chat(QUESTION), headers={"authorization": "Bearer x"}
        )
        assert wrong.status_code == 401
        ok = await client.post(
            "/v1/chat/completions", json=chat(QUESTION), headers={"authorization": "Bearer k-123"}
        )
        assert ok.status_code == 200
        denied_messages = await client.post("/v1/messages", json=chat(QUESTION))
        assert denied_messages.status_code == 401
        assert denied_messages.json()["error"]["type"] == "authentication_error"
        ok_messages = await client.post("/v1/messages", json=chat(QUESTION), headers={"x-api-key": "k-123"})
        assert ok_messages.status_code == 200
        assert (await client.get("/stats")).json()["unauthorized"] == 3


async def test_garbage_is_only_served_to_judge_calls():
    async with client_for(FakeServerConfig(fault_rate=1.0, faults=ONLY_GARBAGE)) as client:
        candidate = (await client.post("/v1/chat/completions", json=chat(QUESTION))).json()
        assert candidate["choices"][0]["message"]["content"] == fake_answer(QUESTION)
        judge = await client.post("/v1/chat/completions", json=chat(JUDGE))
        assert judge.status_code == 200
        assert judge.json()["choices"][0]["message"]["content"] == GARBAGE_TEXT
        stats = (await client.get("/stats")).json()
        assert stats["faults"]["garbage"] == stats["faults_total"] == 1


@pytest.mark.parametrize(("seconds", "header"), [(0, "0"), (1, "1"), (1.5, "1.5")])
async def test_rate_limit_fault_sends_retry_after(seconds, header):
    async with client_for(FakeServerConfig(fault_rate=1.0, faults=ONLY_429, retry_after=seconds)) as client:
        response = await client.post("/v1/chat/completions", json=chat(QUESTION))
        assert response.status_code == 429
        assert response.headers["retry-after"] == header
        assert response.json()["error"]["type"] == "rate_limit_error"


async def test_unavailable_is_503_for_openai_and_529_for_anthropic():
    async with client_for(FakeServerConfig(fault_rate=1.0, faults=ONLY_503)) as client:
        assert (await client.post("/v1/chat/completions", json=chat(QUESTION))).status_code == 503
        assert (await client.post("/v1/messages", json=chat(QUESTION))).status_code == 529


async def test_server_error_and_quota():
    only_500 = FaultMix(rate_limit=0, server_error=1, unavailable=0, garbage=0)
    async with client_for(FakeServerConfig(fault_rate=1.0, faults=only_500)) as client:
        assert (await client.post("/v1/chat/completions", json=chat(QUESTION))).status_code == 500
    async with client_for(FakeServerConfig(quota_exhausted=True)) as client:
        response = await client.post("/v1/chat/completions", json=chat(QUESTION))
        assert response.status_code == 429
        assert response.json()["error"]["code"] == "insufficient_quota"


async def test_faults_are_seeded():
    async def statuses(seed: int) -> list[int]:
        async with client_for(FakeServerConfig(fault_rate=0.5, seed=seed)) as client:
            return [
                (await client.post("/v1/chat/completions", json=chat(JUDGE))).status_code for _ in range(30)
            ]

    first = await statuses(11)
    assert first == await statuses(11)
    assert first != await statuses(12)
    assert 200 in first and any(code in (429, 500, 503) for code in first)


async def test_latency_and_jitter():
    async with client_for(FakeServerConfig(latency=0.1, latency_jitter=0.1, seed=4)) as client:
        start = time.monotonic()
        await client.post("/v1/chat/completions", json=chat(QUESTION))
        assert 0.1 <= time.monotonic() - start < 0.3


def test_config_rejects_unknown_and_out_of_range_values():
    with pytest.raises(ValueError):
        FakeServerConfig(fault_rate=1.5)
    with pytest.raises(ValueError):
        FakeServerConfig(latncy=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        FaultMix(garbage=-1)


# ---------------------------------------------------------------- a real server on loopback


def test_running_server_serves_and_stops():
    with running_fake_server() as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        response = httpx.post(f"{url}/chat/completions", json=chat(QUESTION), trust_env=False)
        assert response.json()["choices"][0]["message"]["content"] == fake_answer(QUESTION)
        assert fetch_stats(url)["requests"] == 1
        assert fetch_stats(url.removesuffix("/v1"))["candidate"] == 1
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", trust_env=False)


async def test_eight_hundred_concurrent_requests_with_latency():
    # 2 s of latency: long enough that all 800 are in flight together even on a loaded machine
    with running_fake_server(FakeServerConfig(latency=2.0)) as url:
        pool = ConnectionPool(ConnectionLimits(max_connections=800))
        model = create_model(parse_model_spec("fake-model", base_url=url), pool=pool, environ={})
        questions = [[{"role": "user", "content": f"q{i}"}] for i in range(800)]
        start = time.monotonic()
        answers = await asyncio.gather(*(model.generate(q) for q in questions))
        elapsed = time.monotonic() - start
        assert [a.text for a in answers] == [fake_answer(q) for q in questions]
        stats = fetch_stats(url)
        assert stats["requests"] == 800
        assert stats["max_in_flight"] >= 700  # nearly all in flight at once
        assert elapsed < 80.0  # concurrent: one latency plus overhead, not 800 x 2 s one by one
        await model.aclose()


# ---------------------------------------------------------------- the CLI command and its docs


def fake_server_command():
    group = typer.main.get_command(app)
    return group.commands["fake-server"]  # type: ignore[attr-defined]


def test_cli_options_are_all_documented():
    docs = DOCS.read_text(encoding="utf-8")
    options = [opt for param in fake_server_command().params for opt in param.opts if opt.startswith("--")]
    assert "--fault-rate" in options and "--met-rate" in options
    missing = [opt for opt in options if f"`{opt}" not in docs]
    assert missing == []


def test_config_fields_are_all_documented():
    docs = DOCS.read_text(encoding="utf-8")
    fields = [*FakeServerConfig.model_fields, *(f"faults.{f}" for f in FaultMix.model_fields)]
    assert [f for f in fields if f"`{f}`" not in docs] == []


def test_cli_rejects_bad_values_in_one_line():
    result = CliRunner().invoke(app, ["fake-server", "--fault-rate", "2"])
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == "error: fake-server option fault_rate: Input should be less than or equal to 1"
    )
