"""Provider prompt caching: which part of a request is the prefix shared with its siblings.

A cache-first judge prompt (`healthbench.grading.template`, ``<<cache_break>>``) is sent as exactly two
user messages: the part shared by every criterion of one conversation (instructions, conversation,
reply), then the criterion's. The provider adapters mark that split when they build the body, and
only for requests of that shape, so the request itself, and with it the call-cache key
(`request_key`), is the same with or without caching; a one-message prompt (simple-evals' template)
gets nothing added:

- OpenAI caches prefixes of >= 1,024 tokens by itself; ``prompt_cache_key`` (a hash of the shared
  message) routes a conversation's calls to the same cache. Sent to api.openai.com only (other
  OpenAI-compatible servers may refuse unknown fields).
- Anthropic caches up to a ``cache_control`` breakpoint: the shared message becomes one text block
  carrying ``{"type": "ephemeral"}`` (the 5-minute cache, written at 1.25x the input price) online,
  and ``{"type": "ephemeral", "ttl": "1h"}`` (the 1-hour cache, written at 2x) in batch requests
  (`BATCH_CACHE_TTL`): a batch may run long after the request that wrote its prefix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

EPHEMERAL = {"type": "ephemeral"}
# the cache lifetime Anthropic batch requests ask for: a batch runs for minutes to hours, and its
# requests (and a warm-first request's siblings) come after the write by more than 5 minutes
BATCH_CACHE_TTL = "1h"
# the providers whose endpoints cache prompt prefixes (OpenAI-compatible servers such as vLLM with
# prefix caching too, though only some bill it): where warm-first judging pays
CACHING_PROVIDERS = ("openai", "anthropic")


OPENAI_MIN_PREFIX = 1024  # OpenAI caches prefixes of at least this many tokens, then in steps of
OPENAI_PREFIX_STEP = 128
ANTHROPIC_MIN_PREFIX = 1024  # Sonnet and Opus 4.x; Haiku needs 2,048
ANTHROPIC_HAIKU_MIN_PREFIX = 2048


def cacheable_tokens(provider: str, model: str, prefix_tokens: int, *, breakpoint: bool) -> int:
    """How many tokens of a ``prefix_tokens``-long shared prefix the provider bills as cached once it
    is in its cache: OpenAI's 1,024 then 128-token steps (automatic), Anthropic's whole prefix up to
    its ``cache_control`` ``breakpoint`` (when there is one) from 1,024 tokens (2,048 for Haiku)."""
    if provider == "openai":
        if prefix_tokens < OPENAI_MIN_PREFIX:
            return 0
        return prefix_tokens - prefix_tokens % OPENAI_PREFIX_STEP
    if provider == "anthropic" and breakpoint:
        least = ANTHROPIC_HAIKU_MIN_PREFIX if "haiku" in model else ANTHROPIC_MIN_PREFIX
        return prefix_tokens if prefix_tokens >= least else 0
    return 0


def cache_control(ttl: str | None = None) -> dict[str, str]:
    """Anthropic's ``cache_control`` of a breakpoint: the 5-minute cache, or ``ttl`` (``"1h"``)."""
    return dict(EPHEMERAL) if ttl is None else {**EPHEMERAL, "ttl": ttl}


def shared_prefix(messages: Sequence[Mapping[str, str]]) -> int | None:
    """The index of the message that ends the shared prefix of a cache-first judge request (two
    user messages, after any system message), else None."""
    turns = [i for i, m in enumerate(messages) if m.get("role") != "system"]
    if len(turns) == 2 and all(messages[i].get("role") == "user" for i in turns):
        return turns[0]
    return None


def prompt_cache_key(model: str, shared: str) -> str:
    """OpenAI's ``prompt_cache_key`` of a request whose shared prefix is ``shared``."""
    return "hb-" + hashlib.sha256(f"{model}\n{shared}".encode()).hexdigest()[:32]
