"""Prompt-cache billing for the fake server (``healthbench fake-server --prompt-cache``), as the providers
bill it, with the fake's tokens (whitespace-separated words of the messages, in order):

- OpenAI chat completions: the longest prefix of this request (>= 1,024 tokens, then in 128-token
  steps) that a request which has *completed* before this one arrived also began with, reported as
  ``usage.prompt_tokens_details.cached_tokens``.
- Anthropic messages: the prefix up to the last ``cache_control`` breakpoint (>= 1,024 tokens; 2,048
  for Haiku models): read (``cache_read_input_tokens``) when a completed request wrote it, else
  written (``cache_creation_input_tokens``, and by lifetime in ``cache_creation``: to the 1-hour cache
  when the breakpoint asks ``"ttl": "1h"``, else to the 5-minute one); ``input_tokens`` is the rest.

Prefixes are kept per model, by hash, without expiry (a run against the fake is short), whatever
lifetime wrote them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

OPENAI_MIN = 1024
OPENAI_STEP = 128
ANTHROPIC_MIN = 1024
ANTHROPIC_HAIKU_MIN = 2048


@dataclass(frozen=True)
class CacheBill:
    """What one request reads from and writes to the cache, and what it adds once it completes."""

    read: int = 0
    write: int = 0
    adds: tuple[bytes, ...] = ()
    ttl: str = "5m"  # the lifetime the write asked for (Anthropic: "5m" or "1h")


def _blocks(content: Any) -> Iterable[tuple[str, str | None]]:
    """(text, the lifetime its cache_control breakpoint asks for, None when it has none) of each block
    of a message's or system's content."""
    if isinstance(content, str):
        yield content, None
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                control = part.get("cache_control")
                ttl = str(control.get("ttl") or "5m") if isinstance(control, dict) else None
                yield str(part.get("text", "")), ttl


def _words(text: str) -> list[str]:
    return text.split()


class FakePromptCache:
    """The prefixes completed requests have left in the cache (one per fake server app)."""

    def __init__(self) -> None:
        self.prefixes: set[bytes] = set()

    def clear(self) -> None:
        self.prefixes.clear()

    def complete(self, bill: CacheBill) -> None:
        """The request ``bill`` was made for has completed: its prefixes can be read from now on."""
        self.prefixes.update(bill.adds)

    def openai(self, model: str, messages: list[dict[str, str]]) -> CacheBill:
        tokens = [w for m in messages for w in _words(m["content"])]
        digest = hashlib.sha256(model.encode()).digest()
        read = 0
        adds = []
        for j in range(1, len(tokens) // OPENAI_STEP + 1):
            chunk = "\x00".join(tokens[(j - 1) * OPENAI_STEP : j * OPENAI_STEP])
            digest = hashlib.sha256(digest + chunk.encode()).digest()
            if j * OPENAI_STEP < OPENAI_MIN:
                continue
            adds.append(digest)
            if digest in self.prefixes:
                read = j * OPENAI_STEP
        return CacheBill(read=read, adds=tuple(adds))

    def anthropic(self, body: dict[str, Any]) -> CacheBill:
        model = str(body.get("model", ""))
        blocks = list(_blocks(body.get("system")))
        for message in body.get("messages") or []:
            blocks.extend(_blocks(message.get("content") if isinstance(message, dict) else None))
        tokens: list[str] = []
        prefix, ttl = 0, "5m"
        for text, asked in blocks:
            tokens.extend(_words(text))
            if asked is not None:
                prefix, ttl = len(tokens), asked
        least = ANTHROPIC_HAIKU_MIN if "haiku" in model else ANTHROPIC_MIN
        if prefix < least:
            return CacheBill()
        key = hashlib.sha256(f"{model}\n".encode() + "\x00".join(tokens[:prefix]).encode()).digest()
        if key in self.prefixes:
            return CacheBill(read=prefix)
        return CacheBill(write=prefix, adds=(key,), ttl=ttl)
