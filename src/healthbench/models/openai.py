"""OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama, the fake server).

Only turns one request into one `Completion`; retries and limits live in `healthbench.models.limits`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import msgspec

from healthbench.models.base import Completion, Messages, ModelSettings, ModelSpec, Usage
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.prompt_cache import prompt_cache_key, shared_prefix
from healthbench.models.transport import HttpProvider

OPENAI_HOST = "api.openai.com"


def _usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(prompt_details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def parse_chat_response(body: str, fallback_model: str) -> Completion:
    """A chat-completions JSON body → `Completion`; an unreadable one is TRANSIENT (servers hiccup).
    Decoded by msgspec (a fifth of `json.loads`'s CPU; it refuses the ``NaN`` that `json` accepts)."""
    try:
        data = msgspec.json.decode(body)
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (msgspec.DecodeError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ProviderError(
            FailureKind.TRANSIENT, f"unreadable response (no JSON choices): {body[:120]!r}"
        ) from None
    text = message.get("content")
    if text is None:
        text = message.get("refusal") or ""
    if not isinstance(text, str):  # content parts
        text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
    return Completion(
        text=text,
        usage=_usage(data),
        model=str(data.get("model") or fallback_model),
        finish_reason=choice.get("finish_reason"),
    )


def chat_body(
    spec: ModelSpec, settings: ModelSettings, messages: Messages, json_schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body sent for `messages`; `extra_body` is merged last and wins. A cache-first judge
    request sent to OpenAI gets a ``prompt_cache_key`` (`healthbench.models.prompt_cache`)."""
    s = settings
    sent: list[dict[str, Any]] = list(messages)
    official = urlsplit(spec.url).hostname == OPENAI_HOST
    if s.system_message is not None:
        sent = [{"role": "system", "content": s.system_message}, *sent]
    body: dict[str, Any] = {"model": spec.model, "messages": sent}
    if s.temperature is not None:
        body["temperature"] = s.temperature
    if s.max_tokens is not None:
        body["max_completion_tokens" if official else "max_tokens"] = s.max_tokens
    if s.reasoning_effort is not None:
        body["reasoning_effort"] = s.reasoning_effort
    if json_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "response",
                "schema": json_schema,
                "strict": json_schema.get("additionalProperties") is False,
            },
        }
    shared = shared_prefix(messages) if official else None
    if shared is not None:
        body["prompt_cache_key"] = prompt_cache_key(spec.model, messages[shared]["content"])
    body.update(s.extra_body)
    return body


class OpenAIChatModel(HttpProvider):
    """`ProviderModel` for any server speaking ``POST {base_url}/chat/completions``."""

    def endpoint(self, base_url: str) -> str:
        return f"{base_url}/chat/completions"

    def build_body(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> dict[str, Any]:
        return chat_body(self.spec, self.settings, messages, json_schema)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def parse(self, body: str) -> Completion:
        return parse_chat_response(body, self.spec.model)
