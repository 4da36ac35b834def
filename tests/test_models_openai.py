"""The OpenAI-compatible client against the fake server (loopback only), plus its request bodies."""

from __future__ import annotations

import json
import random
import socket

import pytest
from support.loopback import chat_endpoint

from healthbench.errors import ConfigError, FatalModelError, ModelError
from healthbench.models.base import ModelSettings, Usage, parse_model_spec
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.factory import create_model, create_provider
from healthbench.models.limits import ConnectionLimits, ConnectionPool, RetryPolicy
from healthbench.models.openai import OpenAIChatModel, parse_chat_response
from healthbench.testing.fake_server import (
    FakeServerConfig,
    FaultMix,
    count_words,
    fake_answer,
    fake_judge_text,
    fake_verdict,
    fetch_stats,
    reset_stats,
    running_fake_server,
)

QUESTION = [{"role": "user", "content": "My child has a fever of 39 C. What should I do?"}]
JUDGE_PROMPT = (
    'Conversation ... Rubric item: advises fluids. Reply as JSON {"explanation": ..., "criteria_met": ...}'
)
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)
ONLY = {
    "rate_limit": FaultMix(rate_limit=1, server_error=0, unavailable=0, garbage=0),
    "server_error": FaultMix(rate_limit=0, server_error=1, unavailable=0, garbage=0),
    "unavailable": FaultMix(rate_limit=0, server_error=0, unavailable=1, garbage=0),
    "slow": FaultMix(rate_limit=0, server_error=0, unavailable=0, garbage=0, slow=1),
}


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture(scope="module")
def server_url():
    with running_fake_server(FakeServerConfig()) as url:
        yield url


@pytest.fixture
def url(server_url):
    reset_stats(server_url)
    return server_url


def model_for(url: str, settings: ModelSettings | None = None, **kwargs):
    kwargs.setdefault("pool", ConnectionPool())
    kwargs.setdefault("policy", FAST)
    kwargs.setdefault("environ", {})
    return create_model(parse_model_spec("fake-model", base_url=url), settings, **kwargs)


# ---------------------------------------------------------------- answers


async def test_candidate_answer_and_usage(url):
    model = model_for(url)
    completion = await model.generate(QUESTION)
    expected = fake_answer(QUESTION)
    assert completion.text == expected
    assert completion.text.startswith("Fake answer ")
    assert completion.usage == Usage(input_tokens=12, output_tokens=count_words(expected))
    assert (completion.model, completion.finish_reason) == ("fake-model", "stop")
    assert model.stats.tokens == completion.usage.as_dict()
    assert fetch_stats(url)["candidate"] == 1
    await model.aclose()


async def test_system_message_is_sent_first(url):
    model = model_for(url, ModelSettings(system_message="You are a careful clinician."))
    completion = await model.generate(QUESTION)
    assert completion.text == fake_answer(
        [{"role": "system", "content": "You are a careful clinician."}, *QUESTION]
    )
    await model.aclose()


async def test_judge_reply_is_the_fake_verdict(url):
    model = model_for(url)
    schema = {"type": "object", "properties": {"criteria_met": {"type": "boolean"}}}
    completion = await model.generate([{"role": "user", "content": JUDGE_PROMPT}], json_schema=schema)
    assert completion.text == fake_judge_text(JUDGE_PROMPT)
    verdict = json.loads(completion.text.removeprefix("```json").removesuffix("```"))
    assert verdict["criteria_met"] is fake_verdict(JUDGE_PROMPT)
    stats = fetch_stats(url)
    assert (stats["judge"], stats["candidate"]) == (1, 0)
    await model.aclose()


# ---------------------------------------------------------------- retries, counted at the server


@pytest.mark.parametrize("fault", ["rate_limit", "server_error", "unavailable"])
async def test_faults_are_retried_until_success(fault):
    config = FakeServerConfig(fault_rate=0.5, faults=ONLY[fault], retry_after=0, seed=3)
    with running_fake_server(config) as url:
        model = model_for(url)
        questions = [[{"role": "user", "content": f"question {i}"}] for i in range(12)]
        answers = [await model.generate(q) for q in questions]
        assert [a.text for a in answers] == [fake_answer(q) for q in questions]
        stats = fetch_stats(url)
        assert stats["faults"][fault] == stats["faults_total"] > 0
        assert stats["requests"] == 12 + stats["faults_total"]
        assert model.stats.attempts == stats["requests"]
        assert model.stats.retries == stats["faults_total"]
        if fault == "rate_limit":
            assert model.stats.rate_limited == stats["faults_total"]
        else:
            assert model.stats.transient_errors == stats["faults_total"]
        await model.aclose()


async def test_retry_after_header_is_honoured():
    config = FakeServerConfig(fault_rate=0.5, faults=ONLY["rate_limit"], retry_after=3, seed=1)
    with running_fake_server(config) as url:
        sleep = RecordingSleep()
        model = model_for(url, sleep=sleep, policy=RetryPolicy(initial_delay=0.01, max_delay=60))
        for i in range(6):
            await model.generate([{"role": "user", "content": f"q{i}"}])
        faults = fetch_stats(url)["faults"]["rate_limit"]
        assert faults > 0
        assert sleep.delays == [3.0] * faults
        await model.aclose()


async def test_timeouts_are_transient_and_retried():
    config = FakeServerConfig(fault_rate=0.5, faults=ONLY["slow"], slow_seconds=0.6, seed=0)
    with running_fake_server(config) as url:
        model = model_for(url, ModelSettings(timeout=0.2))
        for i in range(4):
            completion = await model.generate([{"role": "user", "content": f"q{i}"}])
            assert completion.text == fake_answer([{"role": "user", "content": f"q{i}"}])
        slow = fetch_stats(url)["faults"]["slow"]
        assert slow > 0
        assert model.stats.transient_errors == slow
        await model.aclose()


async def test_wrong_key_fails_fast_in_one_line(monkeypatch):
    with running_fake_server(FakeServerConfig(require_api_key="sk-right-key-000")) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-12345")
        model = create_model(parse_model_spec("fake-model", base_url=url), pool=ConnectionPool(), policy=FAST)
        with pytest.raises(ModelError) as info:
            await model.generate(QUESTION)
        assert str(info.value) == (
            f"openai/fake-model at {url}: 401 invalid or missing API key (check OPENAI_API_KEY): "
            "Incorrect API key provided."
        )
        assert "sk-wrong" not in str(info.value)
        stats = fetch_stats(url)
        assert (stats["requests"], stats["unauthorized"]) == (1, 1)
        assert (model.stats.attempts, model.stats.retries) == (1, 0)
        await model.aclose()


async def test_no_key_means_no_authorization_header_and_the_right_key_works(monkeypatch):
    with running_fake_server(FakeServerConfig(require_api_key="sk-right-key-000")) as url:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        model = create_model(parse_model_spec("fake-model", base_url=url), pool=ConnectionPool(), policy=FAST)
        with pytest.raises(ModelError, match="401"):
            await model.generate(QUESTION)
        await model.aclose()
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right-key-000")
        model = create_model(parse_model_spec("fake-model", base_url=url), pool=ConnectionPool(), policy=FAST)
        assert (await model.generate(QUESTION)).text == fake_answer(QUESTION)
        await model.aclose()


async def test_exhausted_quota_is_fatal_not_a_rate_limit():
    with running_fake_server(FakeServerConfig(quota_exhausted=True)) as url:
        model = model_for(url)
        with pytest.raises(ModelError, match=r"429 quota exhausted \(insufficient_quota"):
            await model.generate(QUESTION)
        assert fetch_stats(url)["requests"] == 1
        await model.aclose()


async def test_unknown_path_is_a_fatal_404(url):
    model = model_for(url.removesuffix("/v1") + "/nope")
    with pytest.raises(ModelError, match=r"404 not found \(unknown model or wrong base URL\)"):
        await model.generate(QUESTION)
    assert model.stats.attempts == 1
    await model.aclose()


async def test_unreachable_endpoint_that_never_answered_fails_after_a_few_retries():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    policy = RetryPolicy(max_retries=8, unreachable_retries=2, initial_delay=0.01)
    model = model_for(f"http://127.0.0.1:{port}/v1", policy=policy)
    with pytest.raises(FatalModelError, match=r"cannot connect: .*check --base-url"):
        await model.generate(QUESTION)
    assert model.stats.attempts == 3  # the first try and 2 retries, not 9
    await model.aclose()


async def test_unreachable_after_answering_is_retried_like_a_transient_error():
    with running_fake_server() as url:
        model = model_for(url, policy=RetryPolicy(max_retries=3, unreachable_retries=0, initial_delay=0.01))
        await model.generate(QUESTION)  # the endpoint has answered once
    # the server is gone now: a blip on a known endpoint gets the whole retry budget
    with pytest.raises(ModelError, match=r"gave up after 4 attempts; last error: cannot connect"):
        await model.generate(QUESTION)
    assert model.stats.transient_errors == 4
    await model.aclose()


async def test_missing_openai_key_is_a_config_error_at_creation():
    with pytest.raises(ConfigError, match=r"set the environment variable OPENAI_API_KEY$"):
        create_model(parse_model_spec("openai/gpt-4.1"), pool=ConnectionPool(), environ={})


# ---------------------------------------------------------------- request bodies and parsing


def provider(spec_text: str, settings: ModelSettings, base_url: str | None = None) -> OpenAIChatModel:
    spec = parse_model_spec(spec_text, base_url=base_url)
    made = create_provider(spec, settings, environ={"OPENAI_API_KEY": "sk-test"})
    assert isinstance(made, OpenAIChatModel)
    return made


async def test_body_for_the_official_api():
    settings = ModelSettings(
        temperature=0.2, max_tokens=50, system_message="sys", reasoning_effort="low", extra_body={"seed": 4}
    )
    model = provider("openai/gpt-4.1", settings)
    schema = {"type": "object", "additionalProperties": False}
    assert model.build_body(QUESTION, schema) == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "sys"}, *QUESTION],
        "temperature": 0.2,
        "max_completion_tokens": 50,
        "reasoning_effort": "low",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": schema, "strict": True},
        },
        "seed": 4,
    }
    await model.aclose()


async def test_body_for_other_servers_uses_max_tokens_and_extra_body_wins():
    settings = ModelSettings(max_tokens=50, extra_body={"top_k": 20, "temperature": 1.0})
    model = provider("qwen", settings, base_url="http://127.0.0.1:1/v1")
    assert model.build_body(QUESTION) == {
        "model": "qwen",
        "messages": QUESTION,
        "max_tokens": 50,
        "top_k": 20,
        "temperature": 1.0,
    }
    await model.aclose()


def test_parse_response_usage_details():
    body = json.dumps(
        {
            "model": "gpt-4.1-2025",
            "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 40,
                "prompt_tokens_details": {"cached_tokens": 64},
                "completion_tokens_details": {"reasoning_tokens": 30},
            },
        }
    )
    completion = parse_chat_response(body, "gpt-4.1")
    assert completion.usage == Usage(100, 40, cached_input_tokens=64, reasoning_tokens=30)
    assert (completion.text, completion.model, completion.finish_reason) == ("ok", "gpt-4.1-2025", "length")


def test_parse_response_without_usage_or_content():
    body = json.dumps({"choices": [{"message": {"content": None, "refusal": "I can't help."}}]})
    completion = parse_chat_response(body, "m")
    assert (completion.text, completion.usage, completion.model) == ("I can't help.", Usage(), "m")


@pytest.mark.parametrize("body", ["<html>502</html>", "{}", '{"choices": []}', '{"choices": "x"}'])
def test_unreadable_responses_are_transient(body):
    with pytest.raises(ProviderError) as info:
        parse_chat_response(body, "m")
    assert info.value.kind is FailureKind.TRANSIENT
    assert str(info.value).startswith("unreadable response (no JSON choices): ")


async def test_many_concurrent_calls_share_few_http_pools():
    with running_fake_server(FakeServerConfig(latency=0.2)) as url:
        pool = ConnectionPool(ConnectionLimits(max_connections=100))
        model = model_for(url, pool=pool, rng=random.Random(0))
        questions = [[{"role": "user", "content": f"q{i}"}] for i in range(200)]
        answers = await __import__("asyncio").gather(*(model.generate(q) for q in questions))
        assert [a.text for a in answers] == [fake_answer(q) for q in questions]
        assert fetch_stats(url)["max_in_flight"] == 100
        await model.aclose()


async def test_the_body_goes_out_as_utf8_json_of_build_body():
    from aiohttp import web

    seen: list[tuple[str, bytes]] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append((request.headers["Content-Type"], await request.read()))
        return web.json_response({"choices": [{"message": {"content": "fine"}}]})

    async with chat_endpoint(chat) as url:
        settings = ModelSettings(temperature=0.5, extra_body={"stop": ["é"], "n": 1e16})
        model = provider("qwen", settings, base_url=url)
        messages = [{"role": "user", "content": 'Fièvre 🩺 "39" \\ \n\u2028'}]
        assert (await model.complete(messages)).text == "fine"
        await model.aclose()
    [(content_type, raw)] = seen
    assert content_type == "application/json"
    assert json.loads(raw.decode("utf-8")) == model.build_body(messages)
    assert "Fièvre 🩺".encode() in raw  # non-ASCII as UTF-8, not \\u escapes
