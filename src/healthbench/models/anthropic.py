"""Anthropic Messages API over HTTP (aiohttp) directly (no SDK, so no extra to install).

Only turns one request into one `Completion`; retries and limits live in `healthbench.models.limits`.
"""

from __future__ import annotations

import json
from typing import Any

from healthbench.errors import ConfigError
from healthbench.models.base import Completion, Messages, ModelSettings, ModelSpec, Usage
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.prompt_cache import cache_control, shared_prefix
from healthbench.models.transport import HttpProvider

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def messages_url(base_url: str) -> str:
    """``{base}/v1/messages``; a base already ending in ``/v1`` (like the fake server's) is accepted."""
    base = base_url.rstrip("/").removesuffix("/v1")
    return f"{base}/v1/messages"


def _usage(data: dict[str, Any]) -> Usage:
    usage = data.get("usage") or {}
    cached = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    by_ttl = usage.get("cache_creation") or {}  # the writes by cache lifetime (5 minutes, 1 hour)
    return Usage(  # input_tokens counts every input token; a cache write is billed as one, not as input
        input_tokens=int(usage.get("input_tokens") or 0) + cached + created,
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=cached,
        cache_write_input_tokens=created,
        cache_write_1h_input_tokens=min(created, int(by_ttl.get("ephemeral_1h_input_tokens") or 0)),
    )


def parse_messages_response(body: str, fallback_model: str) -> Completion:
    """A Messages API JSON body → `Completion` (text blocks joined; thinking blocks skipped)."""
    try:
        data = json.loads(body)
        blocks = data["content"]
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ProviderError(
            FailureKind.TRANSIENT, f"unreadable response (no JSON content): {body[:120]!r}"
        ) from None
    return Completion(
        text=text,
        usage=_usage(data),
        model=str(data.get("model") or fallback_model),
        finish_reason=data.get("stop_reason"),
    )


def _cached_block(text: str, ttl: str | None) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": cache_control(ttl)}]


class AnthropicChatModel(HttpProvider):
    """`ProviderModel` for ``POST {base}/v1/messages``."""

    def check(self, spec: ModelSpec, settings: ModelSettings) -> None:
        if settings.reasoning_effort is not None:
            raise ConfigError(
                f"{spec.name}: reasoning_effort is not an Anthropic setting; pass "
                "extra_body={'thinking': {'type': 'enabled', 'budget_tokens': N}} instead"
            )

    def endpoint(self, base_url: str) -> str:
        return messages_url(base_url)

    def build_body(
        self, messages: Messages, json_schema: dict[str, Any] | None = None, *, cache_ttl: str | None = None
    ) -> dict[str, Any]:
        """System text goes top-level; `json_schema` is not sent (the prompt asks for JSON). The shared
        message of a cache-first judge request is a text block with a ``cache_control`` breakpoint
        (`healthbench.models.prompt_cache`), for the 5-minute cache unless ``cache_ttl`` asks for
        another (``"1h"``: the batch API's requests, `AnthropicBatchApi`)."""
        s = self.settings
        system_parts = [s.system_message] if s.system_message is not None else []
        system_parts += [m["content"] for m in messages if m.get("role") == "system"]
        shared = shared_prefix(messages)
        turns: list[dict[str, Any]] = [
            {
                "role": m["role"],
                "content": _cached_block(m["content"], cache_ttl) if i == shared else m["content"],
            }
            for i, m in enumerate(messages)
            if m.get("role") != "system"
        ]
        body: dict[str, Any] = {
            "model": self.spec.model,
            "max_tokens": s.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": turns,
        }
        if system_parts:
            body["system"] = "\n\n".join(system_parts)
        if s.temperature is not None:
            body["temperature"] = s.temperature
        body.update(s.extra_body)
        return body

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def parse(self, body: str) -> Completion:
        return parse_messages_response(body, self.spec.model)
