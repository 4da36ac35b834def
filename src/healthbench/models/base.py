"""What every model looks like to the rest of healthbench: spec, settings, completion, and the protocols.

`ChatModel` is what the engine calls (retries and limits included); `ProviderModel` is the thin adapter a
provider writes (one request in, one `Completion` out, failures raised as `ProviderError`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from healthbench.defaults import DEFAULT_TIMEOUT
from healthbench.errors import ConfigError

Provider = Literal["openai", "anthropic", "local", "vllm"]
PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "local", "vllm")  # vllm: only with --executor ray


DEFAULT_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "local": "in-process",
    "vllm": "in-cluster",
}
DEFAULT_KEY_ENVS: dict[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "local": None,
    "vllm": None,
}
ACCEPTED_FORMS = (
    "use 'openai/MODEL', 'anthropic/MODEL', 'local/smollm2', 'local/PATH.gguf', "
    "'vllm/HF_ID_OR_PATH' (with --executor ray), "
    "or a bare MODEL together with --base-url for an OpenAI-compatible server"
)

Messages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call (or a sum).

    `input_tokens` counts every input token: those read from the provider's prompt cache
    (`cached_input_tokens`, billed at the cached rate) and those written to it
    (`cache_write_input_tokens`, Anthropic's cache writes, billed at the write rate) included;
    `cache_write_1h_input_tokens` are those of the writes that went to Anthropic's 1-hour cache (billed
    at its own, higher rate); `output_tokens` includes the reasoning ones.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_input_tokens: int = 0
    cache_write_1h_input_tokens: int = 0  # part of cache_write_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict (what the store keeps); cheaper than `dataclasses.asdict`."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cache_write_input_tokens": self.cache_write_input_tokens,
            "cache_write_1h_input_tokens": self.cache_write_1h_input_tokens,
        }

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_input_tokens + other.cache_write_input_tokens,
            self.cache_write_1h_input_tokens + other.cache_write_1h_input_tokens,
        )


@dataclass(frozen=True, slots=True)
class Completion:
    """One model answer."""

    text: str
    usage: Usage
    model: str
    finish_reason: str | None = None


class ModelSettings(BaseModel):
    """Generation settings of one model role (candidate or judge). Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # (no provider takes < 0)
    max_tokens: int | None = Field(default=None, gt=0)
    system_message: str | None = None
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, allow_inf_nan=False)


class ModelSpec(BaseModel):
    """Which model, behind which endpoint. Build it with `parse_model_spec`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def name(self) -> str:
        """The spec as a user writes it, e.g. ``openai/gpt-4.1``."""
        return f"{self.provider}/{self.model}"

    @property
    def url(self) -> str:
        """The endpoint actually called: `base_url` or the provider's default."""
        return self.base_url or DEFAULT_URLS[self.provider]

    @property
    def connection_key(self) -> tuple[str, str]:
        """Calls with the same key share one concurrency and rate budget."""
        return (self.provider, self.url)

    @property
    def key_env(self) -> str | None:
        """The environment variable the API key is read from (None: no key is used)."""
        return self.api_key_env or DEFAULT_KEY_ENVS[self.provider]

    @property
    def key_required(self) -> bool:
        """A key must be set unless this is a custom endpoint with no explicitly named variable."""
        if self.key_env is None:
            return False
        return self.api_key_env is not None or self.base_url is None

    def describe(self) -> str:
        """``openai/gpt-4.1 at https://api.openai.com/v1``: the prefix of every error about this model."""
        return self.name if self.provider in ("local", "vllm") else f"{self.name} at {self.url}"


def _normalize_url(base_url: str) -> str:
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"base URL {base_url!r} must start with http:// or https://")
    return url


def parse_model_spec(text: str, base_url: str | None = None, api_key_env: str | None = None) -> ModelSpec:
    """Parse ``provider/model`` (or a bare model name with `base_url`) into a `ModelSpec`."""
    raw = text.strip()
    url = _normalize_url(base_url) if base_url else None
    prefix, sep, rest = raw.partition("/")
    provider: Provider
    if sep and prefix in PROVIDERS:
        provider, model = cast(Provider, prefix), rest.strip()
    elif raw and url is not None:
        provider, model = "openai", raw  # any OpenAI-compatible server: vLLM, llama.cpp, Ollama...
    elif sep and prefix:
        raise ConfigError(f"unknown model provider {prefix!r} in {text!r}: {ACCEPTED_FORMS}")
    else:
        raise ConfigError(f"model spec {text!r} has no provider: {ACCEPTED_FORMS}")
    if not model:
        raise ConfigError(f"model spec {text!r} names no model: {ACCEPTED_FORMS}")
    if provider in ("local", "vllm") and url is not None:
        where = "in-process" if provider == "local" else "in the Ray cluster"
        raise ConfigError(f"{text!r} runs {where} and takes no --base-url: {ACCEPTED_FORMS}")
    return ModelSpec(provider=provider, model=model, base_url=url, api_key_env=api_key_env or None)


# the variables the OpenAI and Anthropic SDKs read their endpoint from (a --base-url flag wins)
BASE_URL_ENVS: dict[str, str] = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def provider_prefix(text: str) -> str | None:
    """The provider a spec names (``openai/gpt-4.1`` → openai), or None for a bare model name."""
    prefix, sep, _ = text.strip().partition("/")
    return prefix if sep and prefix in PROVIDERS else None


def env_base_url(text: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint the SDKs' environment variable gives a spec (a bare name is OpenAI-compatible)."""
    env = os.environ if environ is None else environ
    variable = BASE_URL_ENVS.get(provider_prefix(text) or "openai")
    if variable is None:  # local models run in-process
        return None
    return env.get(variable, "").strip() or None


def resolve_api_key(spec: ModelSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key for `spec` from the environment; ConfigError when a required one is missing."""
    env = os.environ if environ is None else environ
    if spec.key_env is None:
        return None
    key = env.get(spec.key_env, "").strip()
    if key:
        return key
    if spec.key_required:
        raise ConfigError(f"{spec.describe()} needs an API key: set the environment variable {spec.key_env}")
    return None


def request_key(
    spec: ModelSpec,
    settings: ModelSettings,
    messages: Messages,
    json_schema: dict[str, Any] | None = None,
    salt: str = "",
) -> str:
    """sha256 hex of the normalized request: the call-cache key. Never includes an API key or timeout.

    The normalized request is the UTF-8 of one ``json.dumps`` (sorted keys, no spaces, non-ASCII as
    is) of the provider, model, base URL, settings (without timeout), messages, schema and salt."""
    payload = {
        "provider": spec.provider,
        "model": spec.model,
        "base_url": spec.url,
        "settings": settings.model_dump(mode="json", exclude={"timeout"}),
        "messages": messages,
        "json_schema": json_schema,
        "salt": salt,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@runtime_checkable
class ChatModel(Protocol):
    """A model the engine can call: retries, limits and usage accounting are already inside."""

    @property
    def spec(self) -> ModelSpec: ...

    @property
    def settings(self) -> ModelSettings: ...

    async def generate(self, messages: Messages, *, json_schema: dict[str, Any] | None = None) -> Completion:
        """Answer `messages`; `json_schema` asks for schema-constrained JSON where the provider can."""
        ...

    async def aclose(self) -> None: ...


class ProviderModel(Protocol):
    """The thin adapter a provider writes: one request, one response, failures as `ProviderError`."""

    spec: ModelSpec
    settings: ModelSettings

    async def complete(
        self, messages: Messages, *, json_schema: dict[str, Any] | None = None
    ) -> Completion: ...

    async def aclose(self) -> None: ...
