"""``--dry-run``: how many calls and tokens a run still needs and what they should cost, before any call.

Token counts are estimated from characters (about 4 per token); the candidate's answer length is its
``max_tokens`` when set, else an assumed 600 tokens (a stored or given answer counts with its own
length); a judge answer is assumed to be 80 tokens. Calls already in the run's store are not counted: an
existing run is estimated from its `Plan`, as it runs. Each role's cost is given online and at its
provider's batch price (``--batch``, `PriceTable.cost`). A panel of judges is estimated member by member
(a judge row each: every member grades every criterion).

The judge's prompt-cache share assumes its provider caches prompt prefixes as OpenAI and Anthropic do
(`healthbench.models.prompt_cache.cacheable_tokens`) and that a conversation's first criterion is
asked before the others (warm-first): that call pays the whole prompt (an Anthropic cache write for
the shared part), every other criterion of the conversation reads the shared part (the template up to
the rubric item, the conversation and the answer) from the cache; with ``--batch``, the write goes to
Anthropic's 1-hour cache (at its price). Other providers cache nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from healthbench.executors.grading import Todo
from healthbench.grading.template import GraderTemplate
from healthbench.models.base import ModelSpec, Usage
from healthbench.models.pricing import PriceTable
from healthbench.models.prompt_cache import cacheable_tokens

CHARS_PER_TOKEN = 4
ASSUMED_ANSWER_TOKENS = 600
ASSUMED_VERDICT_TOKENS = 80


@dataclass(frozen=True)
class RoleEstimate:
    role: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    batch_cost: float | None = None  # the same calls through the provider's batch API (--batch)
    cached_input_tokens: int = 0  # of input_tokens, read from the provider's prompt cache

    @classmethod
    def of(cls, role: str, spec: ModelSpec, calls: int, usage: Usage, prices: PriceTable) -> RoleEstimate:
        """``calls`` of ``spec`` using ``usage`` in all, priced online and as a batch (whose cache
        writes go to the 1-hour cache: `healthbench.models.prompt_cache.BATCH_CACHE_TTL`)."""
        batched = dataclasses.replace(usage, cache_write_1h_input_tokens=usage.cache_write_input_tokens)
        return cls(
            role,
            spec.name,
            calls,
            usage.input_tokens,
            usage.output_tokens,
            prices.cost(spec.provider, spec.model, usage),
            prices.cost(spec.provider, spec.model, batched, batch=True),
            usage.cached_input_tokens,
        )

    @property
    def cached_share(self) -> float | None:
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else None


def _tokens(text_chars: int) -> int:
    return -(-text_chars // CHARS_PER_TOKEN)


def estimate(
    todo: Iterable[Todo],
    *,
    candidate: ModelSpec | None,
    answer_tokens: int | None,
    judges: Mapping[str, ModelSpec],
    template: GraderTemplate,
    prices: PriceTable,
) -> list[RoleEstimate]:
    """The calls ``todo`` still needs (a `Plan`'s pending work, or `fresh_todo` of work not yet stored):
    a candidate call per item without a completion, a judge call per criterion left to grade by each
    member of the panel ``judges`` (label -> spec, the chair first; a row per member); a known
    completion counts with its real length."""
    answer = answer_tokens or ASSUMED_ANSWER_TOKENS
    c_calls = c_in = 0
    calls = dict.fromkeys(judges, 0)
    inputs, cached, written = dict.fromkeys(judges, 0), dict.fromkeys(judges, 0), dict.fromkeys(judges, 0)
    for w, completion, missing in todo:
        convo_chars = sum(len(m["content"]) + len(m["role"]) + 4 for m in w.messages)
        if candidate is not None and completion is None:
            c_calls += 1
            c_in += _tokens(convo_chars)
        answer_chars = len(completion) if completion is not None else answer * CHARS_PER_TOKEN
        prompt = _tokens(template.prefix_chars + convo_chars + answer_chars)
        first: set[str] = set()
        for index, _, label in missing:
            judge = judges[label]
            shared = cacheable_tokens(judge.provider, judge.model, prompt, breakpoint=template.cache_first)
            calls[label] += 1
            inputs[label] += _tokens(len(template.text) + convo_chars + answer_chars + len(w.criteria[index]))
            if label not in first:  # the member's first criterion of the conversation writes the prefix
                first.add(label)
                written[label] += shared if judge.provider == "anthropic" else 0
            else:
                cached[label] += shared
    out: list[RoleEstimate] = []
    if candidate is not None:
        out.append(RoleEstimate.of("candidate", candidate, c_calls, Usage(c_in, c_calls * answer), prices))
    for label, judge in judges.items():
        judged = Usage(
            inputs[label],
            calls[label] * ASSUMED_VERDICT_TOKENS,
            cached_input_tokens=cached[label],
            cache_write_input_tokens=written[label],
        )
        out.append(RoleEstimate.of("judge", judge, calls[label], judged, prices))
    return out


def total_cost(rows: Sequence[RoleEstimate], batched: Collection[str] = ()) -> float | None:
    """The estimated cost of every role together, the ``batched`` roles at their batch price; None
    when any role's model has no price."""
    total = 0.0
    for row in rows:
        cost = row.batch_cost if row.role in batched else row.cost
        if cost is None:
            return None
        total += cost
    return total
