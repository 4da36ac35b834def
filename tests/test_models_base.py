"""Model specs, settings, usage arithmetic, API-key resolution and the call-cache key."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from pydantic import ValidationError

from healthbench.errors import ConfigError
from healthbench.models.base import (
    Completion,
    ModelSettings,
    ModelSpec,
    Usage,
    parse_model_spec,
    request_key,
    resolve_api_key,
)

# ---------------------------------------------------------------- spec parsing


def test_openai_spec_uses_the_default_endpoint_and_key():
    spec = parse_model_spec("openai/gpt-4.1")
    assert (spec.provider, spec.model, spec.base_url, spec.api_key_env) == ("openai", "gpt-4.1", None, None)
    assert spec.url == "https://api.openai.com/v1"
    assert spec.key_env == "OPENAI_API_KEY"
    assert spec.key_required is True
    assert spec.name == "openai/gpt-4.1"
    assert spec.describe() == "openai/gpt-4.1 at https://api.openai.com/v1"


def test_anthropic_spec():
    spec = parse_model_spec("anthropic/claude-sonnet-4-5")
    assert (spec.provider, spec.model) == ("anthropic", "claude-sonnet-4-5")
    assert spec.url == "https://api.anthropic.com"
    assert spec.key_env == "ANTHROPIC_API_KEY"
    assert spec.key_required is True


def test_local_specs_need_no_key():
    assert parse_model_spec("local/smollm2").model == "smollm2"
    path_spec = parse_model_spec("local//models/tiny.gguf")
    assert (path_spec.provider, path_spec.model) == ("local", "/models/tiny.gguf")
    assert path_spec.key_env is None
    assert path_spec.key_required is False


def test_bare_name_with_base_url_is_an_openai_compatible_server():
    spec = parse_model_spec("llama3.1:8b", base_url="http://localhost:11434/v1/")
    assert (spec.provider, spec.model, spec.base_url) == (
        "openai",
        "llama3.1:8b",
        "http://localhost:11434/v1",
    )
    assert spec.url == "http://localhost:11434/v1"
    assert spec.key_env == "OPENAI_API_KEY"
    assert spec.key_required is False


def test_model_names_with_slashes_behind_a_base_url():
    spec = parse_model_spec("meta-llama/Llama-3.1-8B-Instruct", base_url="http://gpu:8000/v1")
    assert (spec.provider, spec.model) == ("openai", "meta-llama/Llama-3.1-8B-Instruct")
    prefixed = parse_model_spec("openai/meta-llama/Llama-3.1-8B-Instruct", base_url="http://gpu:8000/v1")
    assert (prefixed.provider, prefixed.model) == ("openai", "meta-llama/Llama-3.1-8B-Instruct")


def test_explicit_key_env_is_kept_and_required():
    spec = parse_model_spec("qwen", base_url="https://proxy.example/v1", api_key_env="PROXY_KEY")
    assert spec.key_env == "PROXY_KEY"
    assert spec.key_required is True


@pytest.mark.parametrize(
    ("text", "base_url", "start"),
    [
        ("gpt-4.1", None, "model spec 'gpt-4.1' has no provider: "),
        ("", None, "model spec '' has no provider: "),
        ("mistral/large", None, "unknown model provider 'mistral' in 'mistral/large': "),
        ("openai/", None, "model spec 'openai/' names no model: "),
        ("anthropic/  ", None, "model spec 'anthropic/  ' names no model: "),
        (
            "local/smollm2",
            "http://localhost:8000/v1",
            "'local/smollm2' runs in-process and takes no --base-url: ",
        ),
    ],
)
def test_bad_specs_are_one_line_config_errors_listing_the_forms(text, base_url, start):
    with pytest.raises(ConfigError) as info:
        parse_model_spec(text, base_url=base_url)
    message = str(info.value)
    assert message.startswith(start)
    assert message.endswith(
        "use 'openai/MODEL', 'anthropic/MODEL', 'local/smollm2', 'local/PATH.gguf', "
        "'vllm/HF_ID_OR_PATH' (with --executor ray), "
        "or a bare MODEL together with --base-url for an OpenAI-compatible server"
    )
    assert "\n" not in message


def test_base_url_must_be_http():
    with pytest.raises(ConfigError, match=r"^base URL 'localhost:8000' must start with http:// or https://$"):
        parse_model_spec("m", base_url="localhost:8000")


def test_connection_key_is_provider_and_endpoint():
    assert parse_model_spec("openai/gpt-4.1").connection_key == ("openai", "https://api.openai.com/v1")
    assert parse_model_spec("openai/gpt-4.1").connection_key == parse_model_spec("openai/o3").connection_key
    local_server = parse_model_spec("a", base_url="http://127.0.0.1:9/v1")
    assert local_server.connection_key == ("openai", "http://127.0.0.1:9/v1")
    assert (
        local_server.connection_key == parse_model_spec("b", base_url="http://127.0.0.1:9/v1/").connection_key
    )
    assert parse_model_spec("local/smollm2").connection_key == ("local", "in-process")


def test_spec_rejects_unknown_fields_and_providers():
    with pytest.raises(ValidationError):
        ModelSpec(provider="openai", model="x", api_key="sk-123")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ModelSpec(provider="gemini", model="x")  # type: ignore[arg-type]


# ---------------------------------------------------------------- keys


def test_missing_required_key_names_the_variable():
    with pytest.raises(ConfigError) as info:
        resolve_api_key(parse_model_spec("openai/gpt-4.1"), environ={})
    assert str(info.value) == (
        "openai/gpt-4.1 at https://api.openai.com/v1 needs an API key: "
        "set the environment variable OPENAI_API_KEY"
    )
    with pytest.raises(ConfigError, match=r"set the environment variable ANTHROPIC_API_KEY$"):
        resolve_api_key(parse_model_spec("anthropic/claude-sonnet-4-5"), environ={"ANTHROPIC_API_KEY": "  "})
    custom = parse_model_spec("m", base_url="http://h/v1", api_key_env="MY_KEY")
    with pytest.raises(ConfigError, match=r"set the environment variable MY_KEY$"):
        resolve_api_key(custom, environ={"OPENAI_API_KEY": "sk-other"})


def test_keys_are_read_from_the_environment_and_optional_for_custom_servers():
    assert resolve_api_key(parse_model_spec("openai/gpt-4.1"), environ={"OPENAI_API_KEY": "sk-a"}) == "sk-a"
    server = parse_model_spec("m", base_url="http://localhost:8000/v1")
    assert resolve_api_key(server, environ={}) is None
    assert resolve_api_key(server, environ={"OPENAI_API_KEY": "sk-b"}) == "sk-b"
    assert resolve_api_key(parse_model_spec("local/smollm2"), environ={"OPENAI_API_KEY": "sk-c"}) is None


# ---------------------------------------------------------------- usage, completion, settings


def test_usage_sums_and_totals():
    total = Usage(10, 5, cached_input_tokens=4, reasoning_tokens=2) + Usage(1, 2)
    assert total == Usage(11, 7, 4, 2)
    assert total.total_tokens == 18
    assert Usage().total_tokens == 0


def test_completion_is_frozen():
    completion = Completion(text="hi", usage=Usage(1, 1), model="m")
    assert completion.finish_reason is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        completion.text = "changed"  # type: ignore[misc]


def test_settings_defaults_and_unknown_fields():
    settings = ModelSettings()
    assert settings.model_dump() == {
        "temperature": None,
        "max_tokens": None,
        "system_message": None,
        "reasoning_effort": None,
        "extra_body": {},
        "timeout": 120.0,
    }
    with pytest.raises(ValidationError, match="temprature"):
        ModelSettings(temprature=0.5)  # type: ignore[call-arg]


# ---------------------------------------------------------------- request key

MESSAGES = [{"role": "user", "content": "I have a headache, what should I do?"}]


def test_request_key_is_a_stable_sha256():
    spec = parse_model_spec("openai/gpt-4.1")
    key = request_key(spec, ModelSettings(temperature=0.0), MESSAGES)
    assert key == request_key(
        parse_model_spec("openai/gpt-4.1"), ModelSettings(temperature=0.0), list(MESSAGES)
    )
    assert len(key) == 64 and int(key, 16) >= 0
    # the documented canonical form: sorted keys, no spaces, UTF-8, settings without timeout
    canonical = json.dumps(
        {
            "provider": "openai",
            "model": "gpt-4.1",
            "base_url": "https://api.openai.com/v1",
            "settings": {
                "temperature": 0.0,
                "max_tokens": None,
                "system_message": None,
                "reasoning_effort": None,
                "extra_body": {},
            },
            "messages": MESSAGES,
            "json_schema": None,
            "salt": "",
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert key == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    # pinned: a change here invalidates every user's call cache
    assert key == "d95a0c0f24db5a936fa9ea6a23557afe0254121093c24bf886e71bd08667317c"


def test_request_key_ignores_timeout_and_key_sources(monkeypatch):
    spec = parse_model_spec("openai/gpt-4.1")
    base = request_key(spec, ModelSettings(), MESSAGES)
    assert request_key(spec, ModelSettings(timeout=5), MESSAGES) == base
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-one")
    assert request_key(spec, ModelSettings(), MESSAGES) == base
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-two")
    assert request_key(spec, ModelSettings(), MESSAGES) == base
    other_env = parse_model_spec("openai/gpt-4.1", api_key_env="TEAM_KEY")
    assert request_key(other_env, ModelSettings(), MESSAGES) == base
    explicit_default = parse_model_spec("openai/gpt-4.1", base_url="https://api.openai.com/v1")
    assert request_key(explicit_default, ModelSettings(), MESSAGES) == base


def test_request_key_changes_with_everything_that_changes_the_answer():
    spec = parse_model_spec("openai/gpt-4.1")
    base = request_key(spec, ModelSettings(), MESSAGES)
    variants = [
        request_key(parse_model_spec("openai/gpt-4o"), ModelSettings(), MESSAGES),
        request_key(
            parse_model_spec("gpt-4.1", base_url="http://localhost:8000/v1"), ModelSettings(), MESSAGES
        ),
        request_key(parse_model_spec("anthropic/gpt-4.1"), ModelSettings(), MESSAGES),
        request_key(spec, ModelSettings(temperature=0.7), MESSAGES),
        request_key(spec, ModelSettings(max_tokens=100), MESSAGES),
        request_key(spec, ModelSettings(system_message="Be brief."), MESSAGES),
        request_key(spec, ModelSettings(reasoning_effort="high"), MESSAGES),
        request_key(spec, ModelSettings(extra_body={"seed": 1}), MESSAGES),
        request_key(spec, ModelSettings(), [{"role": "user", "content": "Other question"}]),
        request_key(spec, ModelSettings(), MESSAGES, json_schema={"type": "object"}),
        request_key(spec, ModelSettings(), MESSAGES, salt="repeat-1"),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_every_setting_is_documented():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    assert [f for f in ModelSettings.model_fields if f"`{f}`" not in docs] == []
