"""Token prices (USD per million tokens) and the cost of a call.

The built-in table holds list prices we knew when this was written; they change, so every price can
be overridden by a JSON or TOML file (``--prices FILE``) mapping ``provider/model`` (or a bare model
name) to ``{"input": USD_per_1M, "output": USD_per_1M, "cached_input": USD_per_1M,
"cache_write_input": USD_per_1M, "cache_write_1h_input": USD_per_1M}`` (the last three optional:
cached input defaults to the input price, cache writes to the input price, writes to the 1-hour cache
to the cache-write price). A model with no known price has an unknown cost (reported as such, never as
zero), except local models, which are free.

A call's input tokens are billed in three parts (see `Usage`): those read from the provider's prompt
cache at ``cached_input``, those written to it (Anthropic's ``cache_creation_input_tokens``) at
``cache_write_input`` (Anthropic's 5-minute cache) or ``cache_write_1h_input`` (its 1-hour cache, which
``--batch`` requests ask for), and the rest at ``input``. Anthropic's cache prices are multiples of its
input price (`ANTHROPIC_CACHE_MULTIPLIERS`), so its models are listed by input and output price only.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from healthbench.errors import ConfigError
from healthbench.models.base import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None
    cache_write_input: float | None = None
    cache_write_1h_input: float | None = None

    def parts(self, usage: Usage) -> dict[str, float]:
        """The cost of each kind of token of ``usage`` (USD): uncached input, cached input (read from
        the prompt cache), cache writes (to the 5-minute and the 1-hour cache) and output."""
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        written = min(usage.cache_write_input_tokens, usage.input_tokens - cached)
        written_1h = min(usage.cache_write_1h_input_tokens, written)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write_input is None else self.cache_write_input
        write_1h_rate = write_rate if self.cache_write_1h_input is None else self.cache_write_1h_input
        return {
            "input": (usage.input_tokens - cached - written) * self.input / 1_000_000,
            "cached_input": cached * cached_rate / 1_000_000,
            "cache_write_input": ((written - written_1h) * write_rate + written_1h * write_1h_rate)
            / 1_000_000,
            "output": usage.output_tokens * self.output / 1_000_000,
        }

    def cost(self, usage: Usage) -> float:
        return sum(self.parts(usage).values())


# Anthropic's prompt-cache prices as multiples of the model's input price: reads, writes to the
# 5-minute cache, writes to the 1-hour cache (the same for every Claude model)
ANTHROPIC_CACHE_MULTIPLIERS = (0.1, 1.25, 2.0)


def anthropic_price(input: float, output: float) -> Price:
    """An Anthropic model's `Price` from its input and output prices (USD per million tokens)."""
    read, write, write_1h = (round(input * m, 6) for m in ANTHROPIC_CACHE_MULTIPLIERS)
    return Price(input, output, read, write, write_1h)


BUILTIN_PRICES: dict[str, Price] = {
    "openai/gpt-4.1": Price(2.00, 8.00, 0.50),
    "openai/gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "openai/gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "openai/gpt-4o": Price(2.50, 10.00, 1.25),
    "openai/gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "openai/o3": Price(2.00, 8.00, 0.50),
    "openai/o4-mini": Price(1.10, 4.40, 0.275),
    "anthropic/claude-sonnet-4-5": anthropic_price(3.00, 15.00),
    "anthropic/claude-opus-4-1": anthropic_price(15.00, 75.00),
    "anthropic/claude-haiku-4-5": anthropic_price(1.00, 5.00),
}


# the discount of a provider's batch API (--batch) on its online prices: OpenAI's Batch API and
# Anthropic's Message Batches both cost half (any OpenAI-compatible --base-url is priced as OpenAI)
BATCH_DISCOUNTS: dict[str, float] = {"openai": 0.5, "anthropic": 0.5}


class PriceTable:
    """Looks up ``provider/model`` then the bare model name; local models cost nothing."""

    def __init__(
        self, prices: Mapping[str, Price] | None = None, batch_discounts: Mapping[str, float] | None = None
    ) -> None:
        self.prices = dict(BUILTIN_PRICES if prices is None else prices)
        self.batch_discounts = dict(BATCH_DISCOUNTS if batch_discounts is None else batch_discounts)

    def price(self, provider: str, model: str) -> Price | None:
        if provider == "local":
            return Price(0.0, 0.0)
        return self.prices.get(f"{provider}/{model}") or self.prices.get(model)

    def cost(self, provider: str, model: str, usage: Usage, *, batch: bool = False) -> float | None:
        """The cost of one call; ``batch``: answered through the provider's batch API (discounted)."""
        parts = self.cost_parts(provider, model, usage, batch=batch)
        return None if parts is None else sum(parts.values())

    def cost_parts(
        self, provider: str, model: str, usage: Usage, *, batch: bool = False
    ) -> dict[str, float] | None:
        """`Price.parts` of one call (None: no price), at the batch rate for a batch answer."""
        price = self.price(provider, model)
        if price is None:
            return None
        factor = 1.0 - self.batch_discounts.get(provider, 0.0) if batch else 1.0
        return {kind: dollars * factor for kind, dollars in price.parts(usage).items()}

    @classmethod
    def load(cls, path: str | Path | None) -> PriceTable:
        """The built-in table updated with the entries of a JSON or TOML file."""
        table = cls()
        if path is None:
            return table
        try:
            text = Path(path).read_text(encoding="utf-8")
            raw = tomllib.loads(text) if str(path).endswith(".toml") else json.loads(text)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"price file {path}: {exc}") from None
        for name, entry in raw.items():
            try:
                table.prices[name] = Price(
                    float(entry["input"]),
                    float(entry["output"]),
                    _optional(entry, "cached_input"),
                    _optional(entry, "cache_write_input"),
                    _optional(entry, "cache_write_1h_input"),
                )
            except (TypeError, KeyError, ValueError, AttributeError):
                raise ConfigError(
                    f"price file {path}: entry {name!r} needs numeric 'input' and 'output' "
                    "(optional 'cached_input', 'cache_write_input', 'cache_write_1h_input'; USD per "
                    "million tokens)"
                ) from None
        return table


def _optional(entry: Mapping[str, object], key: str) -> float | None:
    value = entry.get(key)
    return None if value is None else float(value)  # type: ignore[arg-type]
