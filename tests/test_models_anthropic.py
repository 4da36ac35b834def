"""The Anthropic Messages client against the fake server's /v1/messages, plus its request bodies."""

from __future__ import annotations

import json

import pytest

from healthbench.errors import ConfigError, ModelError
from healthbench.models.anthropic import AnthropicChatModel, messages_url, parse_messages_response
from healthbench.models.base import ModelSettings, Usage, parse_model_spec
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.factory import create_model, create_provider
from healthbench.models.limits import ConnectionPool, RetryPolicy
from healthbench.testing.fake_server import (
    FakeServerConfig,
    FaultMix,
    count_words,
    fake_answer,
    fake_judge_text,
    fetch_stats,
    running_fake_server,
)

QUESTION = [{"role": "user", "content": "Is it safe to take ibuprofen with a stomach ulcer?"}]
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05)
KEY = {"ANTHROPIC_API_KEY": "sk-ant-test-key-0001"}


def spec_for(url: str):
    return parse_model_spec("anthropic/claude-sonnet-4-5", base_url=url)


async def test_answer_usage_and_system_prompt_through_messages_endpoint():
    with running_fake_server(FakeServerConfig(require_api_key=KEY["ANTHROPIC_API_KEY"])) as url:
        settings = ModelSettings(system_message="Be careful.")
        model = create_model(spec_for(url), settings, pool=ConnectionPool(), policy=FAST, environ=KEY)
        completion = await model.generate(QUESTION)
        sent = [{"role": "system", "content": "Be careful."}, *QUESTION]
        assert completion.text == fake_answer(sent)
        assert completion.usage == Usage(input_tokens=2 + 10, output_tokens=count_words(completion.text))
        assert (completion.model, completion.finish_reason) == ("claude-sonnet-4-5", "end_turn")
        stats = fetch_stats(url)
        assert (stats["messages"], stats["chat_completions"], stats["unauthorized"]) == (1, 0, 0)
        await model.aclose()


async def test_judge_call_and_overload_retries():
    config = FakeServerConfig(
        fault_rate=0.5, faults=FaultMix(rate_limit=0, server_error=0, unavailable=1, garbage=0), seed=2
    )
    with running_fake_server(config) as url:
        model = create_model(spec_for(url), pool=ConnectionPool(), policy=FAST, environ=KEY)
        prompts = [f"Rubric item {i}: mentions dosage. Return JSON with criteria_met." for i in range(8)]
        texts = [(await model.generate([{"role": "user", "content": p}])).text for p in prompts]
        assert texts == [fake_judge_text(p) for p in prompts]
        stats = fetch_stats(url)
        assert stats["faults"]["unavailable"] > 0  # answered 529 overloaded on /v1/messages
        assert model.stats.transient_errors == stats["faults"]["unavailable"]
        assert model.stats.attempts == stats["requests"] == 8 + stats["faults_total"]
        await model.aclose()


async def test_wrong_key_is_fatal_and_names_the_variable():
    with running_fake_server(FakeServerConfig(require_api_key="sk-ant-right-000000")) as url:
        model = create_model(spec_for(url), pool=ConnectionPool(), policy=FAST, environ=KEY)
        with pytest.raises(ModelError) as info:
            await model.generate(QUESTION)
        assert str(info.value) == (
            f"anthropic/claude-sonnet-4-5 at {url}: 401 invalid or missing API key "
            "(check ANTHROPIC_API_KEY): Incorrect API key provided."
        )
        assert fetch_stats(url)["requests"] == 1
        await model.aclose()


def test_missing_key_is_a_config_error_naming_the_variable():
    with pytest.raises(ConfigError) as info:
        create_model(parse_model_spec("anthropic/claude-sonnet-4-5"), pool=ConnectionPool(), environ={})
    assert str(info.value) == (
        "anthropic/claude-sonnet-4-5 at https://api.anthropic.com needs an API key: "
        "set the environment variable ANTHROPIC_API_KEY"
    )


def test_reasoning_effort_points_to_extra_body():
    with pytest.raises(ConfigError, match=r"reasoning_effort is not an Anthropic setting; pass extra_body="):
        create_provider(
            parse_model_spec("anthropic/claude-sonnet-4-5"),
            ModelSettings(reasoning_effort="high"),
            environ=KEY,
        )


def test_messages_url():
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert messages_url("http://127.0.0.1:9/v1") == "http://127.0.0.1:9/v1/messages"
    assert messages_url("https://proxy.example/anthropic/") == "https://proxy.example/anthropic/v1/messages"


async def test_body_puts_system_top_level_and_defaults_max_tokens():
    model = create_provider(
        parse_model_spec("anthropic/claude-sonnet-4-5"),
        ModelSettings(system_message="A", temperature=0.0, extra_body={"top_k": 5}),
        environ=KEY,
    )
    assert isinstance(model, AnthropicChatModel)
    messages = [{"role": "system", "content": "B"}, *QUESTION, {"role": "assistant", "content": "No."}]
    assert model.build_body(messages, json_schema={"type": "object"}) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [*QUESTION, {"role": "assistant", "content": "No."}],
        "system": "A\n\nB",
        "temperature": 0.0,
        "top_k": 5,
    }
    assert model.headers() == {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test-key-0001"}
    await model.aclose()


def test_parse_response_counts_cached_input():
    body = json.dumps(
        {
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Hello"},
                {"type": "text", "text": " there"},
            ],
            "stop_reason": "max_tokens",
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 5,
                "output_tokens": 7,
            },
        }
    )
    completion = parse_messages_response(body, "claude")
    assert completion.text == "Hello there"
    assert completion.usage == Usage(
        input_tokens=115, output_tokens=7, cached_input_tokens=100, cache_write_input_tokens=5
    )
    assert (completion.model, completion.finish_reason) == ("claude-sonnet-4-5-20250929", "max_tokens")


@pytest.mark.parametrize("body", ["overloaded", "{}", '{"content": 3}'])
def test_unreadable_responses_are_transient(body):
    with pytest.raises(ProviderError) as info:
        parse_messages_response(body, "claude")
    assert info.value.kind is FailureKind.TRANSIENT
