"""What every model looks like to the rest of healthbench: spec, settings, completion, and the protocols.

`ChatModel` is what the engine calls (retries and limits included); `ProviderModel` is the thin adapter a
provider writes (one request in, one `Completion` out, failures raised as `ProviderError`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast, runtime_checkable

from msgspec import json as _msgspec_json
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
    `output_tokens` includes the reasoning ones.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_input_tokens: int = 0

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

    The normalized request is the UTF-8 of ``json.dumps(payload, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` with ``payload`` = provider, model, base_url, settings (without timeout),
    messages, json_schema and salt. It is written here part by part in that key order (the same bytes):
    the messages, most of a request, by msgspec (which escapes every string as `json` does, ~15x
    faster; pinned for every code point by the tests), the parts that may hold floats by `json` (msgspec
    writes exponents differently: ``1e16`` where `json` writes ``1e+16``); the parts that are the same
    for every call of a model (spec, schema, settings) are written once and remembered."""
    head, tail = _key_parts(spec, json_schema)
    return hashlib.sha256(
        b"".join((head, _canonical_messages(messages), tail, _msgspec_json.encode(salt), _key_end(settings)))
    ).hexdigest()


# The parts of `request_key` that are the same for every call of a model (spec, schema, settings),
# written once per (spec, schema) and per settings object instead of per call. Each entry keeps its
# objects alive, so no other object can take their ids while it is kept, and a copy of what could
# change in place (a schema's contents, the settings' extra_body: the frozen models' other fields
# cannot), compared on every use.
T = TypeVar("T")
_PARTS_MEMO = 64  # entries kept before a memo starts over (a process uses a handful of models)
_parts: dict[Any, tuple[Any, Any, Any]] = {}
_ends: dict[Any, tuple[Any, Any, Any]] = {}


def _key_parts(spec: ModelSpec, json_schema: dict[str, Any] | None) -> tuple[bytes, bytes]:
    """`request_key`'s bytes before the messages and from the messages to the salt."""
    return _remembered(
        _parts,
        (id(spec), id(json_schema)),
        (spec, json_schema),
        json_schema,
        lambda: (
            b'{"base_url":'
            + _msgspec_json.encode(spec.url)
            + b',"json_schema":'
            + _canonical(json_schema)
            + b',"messages":',
            b',"model":'
            + _msgspec_json.encode(spec.model)
            + b',"provider":'
            + _msgspec_json.encode(spec.provider)
            + b',"salt":',
        ),
    )


def _key_end(settings: ModelSettings) -> bytes:
    """`request_key`'s bytes from the settings on."""
    return _remembered(
        _ends,
        id(settings),
        settings,
        settings.extra_body,
        lambda: b',"settings":' + _canonical(settings.model_dump(mode="json", exclude={"timeout"})) + b"}",
    )


def _remembered(
    memo: dict[Any, tuple[Any, Any, Any]], key: Any, owners: Any, contents: Any, build: Callable[[], T]
) -> T:
    """What ``build`` makes of ``owners`` (found by ``key``, their ids), remembered in ``memo`` while
    ``contents`` (what could change in place) stays equal to the copy taken when it was built."""
    known = memo.get(key)
    if known is not None and known[1] == contents:
        return cast(T, known[2])
    value = build()
    if len(memo) >= _PARTS_MEMO:
        memo.clear()
    memo[key] = (owners, copy.deepcopy(contents), value)
    return value


def _canonical(value: Any) -> bytes:
    """`request_key`'s JSON of any value: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _canonical_messages(messages: Messages) -> bytes:
    """`_canonical` of chat messages: by msgspec when they are dicts of strings (the same bytes),
    else by `_canonical`."""
    if all(
        type(m) is dict and all(type(k) is str and type(v) is str for k, v in m.items()) for m in messages
    ):
        return _msgspec_json.encode(messages, order="sorted")
    return _canonical(messages)


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
