"""The one counter of model calls: how many, how many answered from the cache or failed, their tokens
and their cost. A managed model counts its calls with it (`ManagedModel.stats`), a run in progress
its calls (`RunCounters.tally`), and a stored run its calls per role (`RunView.usage_totals`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class CallTally:
    """Calls counted so far; ``cost`` sums the priced ones (an unpriced call's cost is unknown)."""

    calls: int = 0
    cached_calls: int = 0  # answered from the call cache: no model was asked
    failed_calls: int = 0  # no answer (retries spent or a fatal error)
    unpriced_calls: int = 0  # real answered calls to a model with no known price
    cost: float = 0.0
    tokens: dict[str, int] = field(default_factory=dict)  # summed by kind ("input_tokens", ...)
    # the cost by kind of token ("input", "cached_input", "cache_write_input", "output"), of the calls
    # counted with it (live counters; a stored run keeps each call's total cost only)
    cost_parts: dict[str, float] = field(default_factory=dict)

    def count(
        self,
        tokens: Mapping[str, int] | None,
        cost: float | None,
        *,
        cached: bool = False,
        failed: bool = False,
        parts: Mapping[str, float] | None = None,
    ) -> None:
        """One call: its token counts (None: none counted) and its cost (None: the model has no price)."""
        self.calls += 1
        self.cached_calls += cached
        self.failed_calls += failed
        if cost is None:
            self.unpriced_calls += not (cached or failed)
        else:
            self.cost += cost
        for kind, count in (tokens or {}).items():
            self.tokens[kind] = self.tokens.get(kind, 0) + int(count)
        for kind, dollars in (parts or {}).items():
            self.cost_parts[kind] = self.cost_parts.get(kind, 0.0) + dollars

    @property
    def made(self) -> int:
        """Calls that reached a model (not answered from the cache)."""
        return self.calls - self.cached_calls

    @property
    def answered(self) -> int:
        return self.calls - self.failed_calls

    @property
    def input_tokens(self) -> int:
        return self.tokens.get("input_tokens", 0)

    @property
    def output_tokens(self) -> int:
        return self.tokens.get("output_tokens", 0)

    @property
    def cached_input_tokens(self) -> int:
        """Input tokens read from the provider's prompt cache (part of `input_tokens`)."""
        return self.tokens.get("cached_input_tokens", 0)

    @property
    def cache_write_input_tokens(self) -> int:
        """Input tokens written to the provider's prompt cache (part of `input_tokens`)."""
        return self.tokens.get("cache_write_input_tokens", 0)

    @property
    def cached_share(self) -> float | None:
        """The share of input tokens read from the prompt cache (None: no input counted)."""
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else None

    @property
    def known_cost(self) -> float | None:
        """`cost`, or None when some answered call's cost is unknown (a model with no price): unknown
        stays unknown, never shown as a partial sum or as zero."""
        return None if self.unpriced_calls else self.cost

    def token_counts(self) -> dict[str, int]:
        """The four kinds of tokens every report shows: input (cached included), cached input, cache
        writes and output."""
        return {
            "input": self.input_tokens,
            "cached_input": self.cached_input_tokens,
            "cache_write_input": self.cache_write_input_tokens,
            "output": self.output_tokens,
        }

    def add(self, other: CallTally) -> None:
        """Count ``other``'s calls too (e.g. a model's calls in two roles)."""
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.failed_calls += other.failed_calls
        self.unpriced_calls += other.unpriced_calls
        self.cost += other.cost
        for kind, count in other.tokens.items():
            self.tokens[kind] = self.tokens.get(kind, 0) + count
        for kind, dollars in other.cost_parts.items():
            self.cost_parts[kind] = self.cost_parts.get(kind, 0.0) + dollars
