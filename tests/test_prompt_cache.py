"""Prompt-cache-aware judging (issue #33): the cache-first prompt, what the provider bodies add, the fake
server's cache billing, warm-first scheduling, and costs derived from what the server billed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.process import fake_server_process

from healthbench.config import build_config
from healthbench.errors import ConfigError
from healthbench.grading.template import (
    GraderTemplate,
    builtin_template,
    builtin_v1_template,
    load_template,
    run_template,
)
from healthbench.models.anthropic import AnthropicChatModel
from healthbench.models.base import ModelSettings, Usage, parse_model_spec
from healthbench.models.openai import chat_body
from healthbench.models.pricing import BUILTIN_PRICES, PriceTable
from healthbench.results.metrics_out import usage_metrics
from healthbench.results.views import RunView
from healthbench.runner.run import run_eval
from healthbench.store import Store
from healthbench.testing.fake_batches import FakeBatches
from healthbench.testing.fake_prompt_cache import FakePromptCache
from healthbench.testing.fake_server import FakeServerApp, FakeServerConfig, fetch_stats, reset_stats

DEMO = Path(__file__).resolve().parents[1] / "src" / "healthbench" / "data" / "demo" / "demo.jsonl"
FAST_RETRY = {"max_retries": 12, "initial_delay": 0.01, "max_delay": 0.05}
CONVO = [{"role": "user", "content": "I have a headache."}, {"role": "assistant", "content": "Rest."}]


# -- the prompt ----------------------------------------------------------------------------------
def test_the_builtin_prompt_is_cache_first_and_sent_as_shared_part_then_criterion() -> None:
    template = builtin_template()
    assert template.cache_first and not builtin_v1_template().cache_first
    shared, item = template.render_parts(CONVO, "[5] Advises rest.")
    assert "assistant: Rest." in shared and "[5] Advises rest." not in shared
    assert item.count("[5] Advises rest.") == 1 and "criteria_met" in item  # JSON reminder last
    assert template.render(CONVO, "[5] Advises rest.") == f"{shared}\n\n{item}"
    # the shared part does not depend on the criterion
    assert template.render_parts(CONVO, "[-2] Other.")[0] == shared
    # the JSON contract and the one-sentence explanation are asked for
    assert '"explanation"' in template.text and "one short sentence" in template.text


def test_a_one_message_template_renders_as_before() -> None:
    v1 = builtin_v1_template()
    assert v1.render_parts(CONVO, "[5] X.") == [v1.render(CONVO, "[5] X.")]
    assert load_template("builtin-v1") == v1


@pytest.mark.parametrize(
    "text",
    [
        "<<cache_break>> <<conversation>> <<rubric_item>>",
        "<<conversation>> <<rubric_item>> <<cache_break>>",
        "<<conversation>> <<cache_break>> x <<cache_break>> <<rubric_item>>",
    ],
)
def test_a_misplaced_cache_break_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="<<cache_break>> may appear once"):
        GraderTemplate(text, "t.txt")


def test_a_run_started_with_the_earlier_builtin_prompt_keeps_it() -> None:
    v1 = builtin_v1_template()
    assert run_template(None, None, v1.sha256) == v1  # resumed: no silent switch of prompt
    assert run_template(None, None, builtin_template().sha256) == builtin_template()
    assert run_template(None, None, None) == builtin_template()  # a new run


# -- what the provider bodies add ----------------------------------------------------------------
def test_openai_gets_a_prompt_cache_key_for_cache_first_judge_prompts_only() -> None:
    official = parse_model_spec("openai/gpt-4.1")
    messages = [{"role": "user", "content": "shared"}, {"role": "user", "content": "item 1"}]
    sibling = [messages[0], {"role": "user", "content": "item 2"}]
    body = chat_body(official, ModelSettings(), messages)
    assert body["prompt_cache_key"].startswith("hb-")
    assert chat_body(official, ModelSettings(), sibling)["prompt_cache_key"] == body["prompt_cache_key"]
    # one message (simple-evals' prompt, a candidate call), or another server: nothing added
    assert "prompt_cache_key" not in chat_body(official, ModelSettings(), [{"role": "user", "content": "x"}])
    other = parse_model_spec("m", "http://127.0.0.1:9/v1")
    assert "prompt_cache_key" not in chat_body(other, ModelSettings(), messages)


def test_anthropic_marks_the_shared_message_with_cache_control() -> None:
    model = AnthropicChatModel(parse_model_spec("anthropic/claude-sonnet-4-5"), ModelSettings(), api_key=None)
    body = model.build_body([{"role": "user", "content": "shared"}, {"role": "user", "content": "item"}])
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "shared", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "user", "content": "item"},
    ]
    plain = model.build_body([{"role": "user", "content": "one prompt"}])
    assert plain["messages"] == [{"role": "user", "content": "one prompt"}]


# -- prices ----------------------------------------------------------------------------------------
def test_cache_reads_and_writes_are_priced_apart() -> None:
    sonnet = BUILTIN_PRICES["anthropic/claude-sonnet-4-5"]
    usage = Usage(
        input_tokens=3000, output_tokens=100, cached_input_tokens=1000, cache_write_input_tokens=1500
    )
    assert sonnet.parts(usage) == pytest.approx(
        {
            "input": 500 * 3e-6,
            "cached_input": 1000 * 0.3e-6,
            "cache_write_input": 1500 * 3.75e-6,
            "output": 100 * 15e-6,
        }
    )
    table = PriceTable()
    online = table.cost("anthropic", "claude-sonnet-4-5", usage)
    assert online == pytest.approx(sum(sonnet.parts(usage).values()))
    assert table.cost("anthropic", "claude-sonnet-4-5", usage, batch=True) == pytest.approx(online / 2)


def test_a_price_file_can_set_the_cache_write_price(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"openai/m": {"input": 1, "output": 2, "cached_input": 0.1, "cache_write_input": 5}})
    )
    price = PriceTable.load(path).price("openai", "m")
    assert price is not None and price.cache_write_input == 5.0
    path.write_text(json.dumps({"openai/m": {"input": 1, "output": 2, "cache_write_input": "x"}}))
    with pytest.raises(ConfigError, match="cache_write_input"):
        PriceTable.load(path)


def test_unknown_cost_stays_unknown_in_the_metrics() -> None:
    from healthbench.models.tally import CallTally

    judge, candidate = CallTally(), CallTally()
    judge.count({"input_tokens": 2000, "cached_input_tokens": 1024, "output_tokens": 20}, 0.5)
    candidate.count({"input_tokens": 10, "output_tokens": 5}, None)  # a model with no price
    metrics = usage_metrics(candidate, judge)
    assert metrics["cost_usd"] is None and metrics["cost_usd:candidate"] is None
    assert metrics["cost_usd:judge"] == 0.5
    assert metrics["tokens:judge:input"] == 2000 and metrics["tokens:judge:cached_input"] == 1024
    assert metrics["tokens:judge:cache_write_input"] == 0 and metrics["tokens:candidate:output"] == 5


# -- the fake server's billing -----------------------------------------------------------------------
def _words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_the_fake_bills_openai_prefixes_of_completed_requests_in_128_token_steps() -> None:
    cache = FakePromptCache()
    shared = {"role": "user", "content": _words(1200)}
    first = cache.openai("m", [shared, {"role": "user", "content": "one criteria_met"}])
    assert first.read == 0
    # a sibling sent before the first completed finds nothing; after it, 1,152 of its 1,202 tokens
    assert cache.openai("m", [shared, {"role": "user", "content": "two"}]).read == 0
    cache.complete(first)
    assert cache.openai("m", [shared, {"role": "user", "content": "two"}]).read == 1152
    assert cache.openai("other-model", [shared, {"role": "user", "content": "two"}]).read == 0
    short = {"role": "user", "content": _words(1000)}  # under 1,024 tokens: never cached
    cache.complete(cache.openai("m", [short, {"role": "user", "content": "x"}]))
    assert cache.openai("m", [short, {"role": "user", "content": "y"}]).read == 0


def test_the_fake_bills_anthropic_writes_then_reads_up_to_the_breakpoint() -> None:
    cache = FakePromptCache()

    def body(item: str, n: int = 1100) -> dict[str, Any]:
        block = {"type": "text", "text": _words(n), "cache_control": {"type": "ephemeral"}}
        return {
            "model": "claude-sonnet-4-5",
            "messages": [{"role": "user", "content": [block]}, {"role": "user", "content": item}],
        }

    first = cache.anthropic(body("a"))
    assert (first.read, first.write) == (0, 1100)
    cache.complete(first)
    second = cache.anthropic(body("b"))
    assert (second.read, second.write) == (1100, 0)
    assert cache.anthropic(body("c", n=900)).write == 0  # below the minimum: neither read nor written


def test_stats_reset_forgets_answered_batch_requests_and_the_cache() -> None:
    app = FakeServerApp(FakeServerConfig(prompt_cache=True))
    state = app.state
    assert isinstance(state.batches, FakeBatches)
    state.batches.answered.add("req-1")
    state.prompt_cache.prefixes.add(b"x")
    state.reset()
    assert state.batches.answered == set() and state.prompt_cache.prefixes == set()


# -- end to end: warm-first, shares, and costs equal to what the server billed ------------------------
def _fixture(tmp_path: Path, criteria: int = 12) -> Path:
    """The demo conversations, each with ``criteria`` rubric items (variants of its own)."""
    out = tmp_path / "twelve.jsonl"
    lines = []
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        base = record["rubrics"]
        record["rubrics"] = [
            {**base[k % len(base)], "criterion": f"{base[k % len(base)]['criterion']} (variant {k})"}
            for k in range(criteria)
        ]
        lines.append(json.dumps(record))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def caching_server():
    with fake_server_process("--prompt-cache", "--reply-words", "450", "--latency", "0.01") as url:
        yield url


@pytest.fixture(scope="module")
def plain_server():
    with fake_server_process("--reply-words", "450") as url:
        yield url


def _run(url: str, data: Path, store: Store, name: str, judge: str, **extra: Any) -> RunView:
    config = build_config(
        {
            "model": {"spec": "fake-candidate", "base_url": url},
            "judge": {"spec": judge, "base_url": url},
            "data": str(data),
            "retry": FAST_RETRY,
            "max_connections": 64,
            **extra,
        }
    )
    run_eval(config, store=store, name=name)
    return RunView.open(store, name)


@pytest.mark.parametrize(
    ("judge", "least_share"), [("openai/gpt-4.1", 0.70), ("anthropic/claude-sonnet-4-5", 0.60)]
)
def test_warm_first_judging_is_billed_mostly_cached_and_costed_as_billed(
    caching_server: str, plain_server: str, tmp_path: Path, judge: str, least_share: float
) -> None:
    data = _fixture(tmp_path)
    store = Store(str(tmp_path / "runs.db"))
    reset_stats(caching_server)
    view = _run(caching_server, data, store, "cached", judge)
    billed = fetch_stats(caching_server)["billed"]["judge"]
    usage = view.usage_totals()
    # the stored usage is what the server billed, and the judge's cost is those tokens at list price
    assert usage.judge.token_counts() == {
        "input": billed["input_tokens"],
        "cached_input": billed["cached_input_tokens"],
        "cache_write_input": billed["cache_write_input_tokens"],
        "output": billed["output_tokens"],
    }
    assert billed["cached_input_tokens"] / billed["input_tokens"] >= least_share
    spec = parse_model_spec(judge)
    at_list_price = PriceTable().cost(spec.provider, spec.model, Usage(**billed))
    metrics = usage_metrics(usage.candidate, usage.judge)
    assert metrics["cost_usd:judge"] == pytest.approx(at_list_price, rel=1e-9)
    # the same verdicts without caching: the same metrics
    plain = _run(plain_server, data, store, "plain", judge)
    assert plain.score().metrics() == view.score().metrics()
    assert plain.usage_totals().judge.cached_input_tokens == 0


def test_without_warm_first_siblings_miss_the_cache(caching_server: str, tmp_path: Path) -> None:
    data = _fixture(tmp_path)
    shares = {}
    for warm in (True, False):
        reset_stats(caching_server)
        store = Store(str(tmp_path / f"warm-{warm}.db"))  # (one store would answer the second from its cache)
        _run(caching_server, data, store, "run", "openai/gpt-4.1", warm_first=warm)
        billed = fetch_stats(caching_server)["billed"]["judge"]
        shares[warm] = billed["cached_input_tokens"] / billed["input_tokens"]
    assert shares[True] >= 0.70 > shares[False] + 0.2


def test_a_finished_run_rerun_makes_no_call(caching_server: str, tmp_path: Path) -> None:
    data = _fixture(tmp_path, criteria=3)
    store = Store(str(tmp_path / "runs.db"))
    _run(caching_server, data, store, "once", "openai/gpt-4.1")
    reset_stats(caching_server)
    _run(caching_server, data, store, "once", "openai/gpt-4.1")
    assert fetch_stats(caching_server)["requests"] == 0


def test_the_official_layout_gets_no_cache_hits_from_the_fake(caching_server: str, tmp_path: Path) -> None:
    """The earlier built-in prompt has simple-evals' layout (conversation, rubric item, instructions):
    with replies of ~450 words, its shared prefix stays under 1,024 tokens for these conversations."""
    data = _fixture(tmp_path)
    template = tmp_path / "layout.txt"
    template.write_text(builtin_v1_template().text, encoding="utf-8")
    reset_stats(caching_server)
    ours = _run(caching_server, data, Store(str(tmp_path / "ours.db")), "ours", "openai/gpt-4.1")
    reset_stats(caching_server)
    theirs = _run(
        caching_server,
        data,
        Store(str(tmp_path / "theirs.db")),
        "theirs",
        "openai/gpt-4.1",
        grader_template=str(template),
    )
    assert theirs.usage_totals().judge.cached_input_tokens == 0
    price = BUILTIN_PRICES["openai/gpt-4.1"]

    def input_cost(view: RunView) -> float:
        judge = view.usage_totals().judge
        usage = Usage(judge.input_tokens, 0, judge.cached_input_tokens, 0, judge.cache_write_input_tokens)
        return price.cost(usage)

    # a longer prompt, yet less input cost than the shorter prompt with simple-evals' layout
    assert input_cost(ours) < 0.75 * input_cost(theirs)


def test_dry_run_estimates_the_judges_cached_share(tmp_path: Path) -> None:
    from healthbench.runner.run import dry_run

    data = _fixture(tmp_path)
    store = Store(str(tmp_path / "runs.db"))
    config = build_config(
        {"model": {"spec": "openai/gpt-4.1"}, "judge": {"spec": "openai/gpt-4.1"}, "data": str(data)}
    )
    _, rows = dry_run(store, config, None)
    judge = next(r for r in rows if r.role == "judge")
    assert judge.cached_share is not None and 0.6 < judge.cached_share < 1.0
    assert judge.cost is not None and judge.batch_cost == pytest.approx(judge.cost / 2)
    # Anthropic: the first criterion writes the shared part, in a batch to the 1-hour cache (2x the
    # input price instead of 1.25x): more than half the online estimate
    sonnet = build_config(
        {
            "model": {"spec": "openai/gpt-4.1"},
            "judge": {"spec": "anthropic/claude-sonnet-4-5"},
            "data": str(data),
        }
    )
    claude = next(r for r in dry_run(store, sonnet, None)[1] if r.role == "judge")
    assert claude.cost is not None and claude.batch_cost is not None and claude.batch_cost > claude.cost / 2
    # a provider that does not cache: nothing estimated as cached
    local = build_config(
        {"model": {"spec": "openai/gpt-4.1"}, "judge": {"spec": "local/smollm2"}, "data": str(data)}
    )
    assert next(r for r in dry_run(store, local, None)[1] if r.role == "judge").cached_input_tokens == 0


@pytest.mark.parametrize(
    ("parallel", "ttl", "written", "read"),
    [
        (1, None, 1100, 2200),  # one after another: the first writes, the others read
        (1, "1h", 1100, 2200),
        (0, "1h", 3300, 0),  # all at once: each writes, none reads what another wrote
    ],
)
def test_the_fake_bills_batched_answers_as_a_provider_processing_them_in_order_or_at_once(
    parallel: int, ttl: str | None, written: int, read: int
) -> None:
    async def go() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        app = FakeServerApp(FakeServerConfig(prompt_cache=True, batch_parallel=parallel))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
            shared = {"type": "text", "text": _words(1100), "cache_control": control}
            requests = [
                {
                    "custom_id": f"r{i}",
                    "params": {
                        "model": "claude-sonnet-4-5",
                        "max_tokens": 50,
                        "messages": [
                            {"role": "user", "content": [shared]},
                            {"role": "user", "content": f"item {i} criteria_met"},
                        ],
                    },
                }
                for i in range(3)
            ]
            created = (await client.post("/v1/messages/batches", json={"requests": requests})).json()
            results = await client.get(f"/v1/messages/batches/{created['id']}/results")
            usages = [json.loads(line)["result"]["message"]["usage"] for line in results.text.splitlines()]
            return dict((await client.get("/stats")).json()), usages

    stats, usages = asyncio.run(go())
    billed = stats["billed"]["judge"]
    one_hour = written if ttl == "1h" else 0
    assert billed["cache_write_input_tokens"] == written and billed["cached_input_tokens"] == read
    assert billed["cache_write_1h_input_tokens"] == one_hour
    # each answer says what it wrote, by lifetime, as Anthropic's usage does
    assert sum(u["cache_creation_input_tokens"] for u in usages) == written
    assert sum(u["cache_creation"]["ephemeral_1h_input_tokens"] for u in usages) == one_hour
    assert sum(u["cache_creation"]["ephemeral_5m_input_tokens"] for u in usages) == written - one_hour


# -- the 1-hour cache of Anthropic batches -------------------------------------------------------------
def test_anthropic_batch_requests_ask_for_the_one_hour_cache() -> None:
    from healthbench.models.batch_api import AnthropicBatchApi

    model = AnthropicChatModel(parse_model_spec("anthropic/claude-sonnet-4-5"), ModelSettings(), api_key=None)
    messages = [{"role": "user", "content": "shared"}, {"role": "user", "content": "item"}]
    batched = AnthropicBatchApi(model).body(messages, None)
    assert batched["messages"][0]["content"] == [
        {"type": "text", "text": "shared", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    online = model.build_body(messages)  # online: the 5-minute cache; otherwise the same body
    assert online["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    online["messages"][0]["content"][0]["cache_control"]["ttl"] = "1h"
    assert online == batched
    # a one-message prompt (simple-evals') gets no breakpoint in a batch either
    plain = AnthropicBatchApi(model).body([{"role": "user", "content": "one prompt"}], None)
    assert plain["messages"] == [{"role": "user", "content": "one prompt"}]


def test_writes_to_the_one_hour_cache_are_read_from_the_usage_and_priced_at_twice_the_input() -> None:
    from healthbench.models.anthropic import parse_messages_response

    body = {
        "content": [{"type": "text", "text": "ok"}],
        "usage": {
            "input_tokens": 500,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 1500,
            "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1000},
            "output_tokens": 100,
        },
    }
    usage = parse_messages_response(json.dumps(body), "claude-sonnet-4-5").usage
    assert usage == Usage(3000, 100, 1000, 0, 1500, 1000)
    sonnet = BUILTIN_PRICES["anthropic/claude-sonnet-4-5"]
    assert (sonnet.cached_input, sonnet.cache_write_input, sonnet.cache_write_1h_input) == (0.3, 3.75, 6.0)
    # $3/M input, $0.30/M read, $3.75/M written for 5 minutes, $6/M for an hour, $15/M output
    assert sonnet.parts(usage) == pytest.approx(
        {
            "input": 500 * 3e-6,
            "cached_input": 1000 * 0.3e-6,
            "cache_write_input": 500 * 3.75e-6 + 1000 * 6e-6,
            "output": 100 * 15e-6,
        },
        rel=1e-12,
    )
    expected = 500 * 3e-6 + 1000 * 0.3e-6 + 500 * 3.75e-6 + 1000 * 6e-6 + 100 * 15e-6
    table = PriceTable()
    assert table.cost("anthropic", "claude-sonnet-4-5", usage) == pytest.approx(expected, rel=1e-12)
    assert table.cost("anthropic", "claude-sonnet-4-5", usage, batch=True) == pytest.approx(
        expected / 2, rel=1e-12
    )


def test_a_price_file_can_set_the_one_hour_write_price(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"anthropic/m": {"input": 1, "output": 2, "cache_write_input": 1.5}}))
    price = PriceTable.load(path).price("anthropic", "m")
    assert price is not None and price.cache_write_1h_input is None  # writes: the cache-write price
    assert price.cost(Usage(1000, 0, 0, 0, 1000, 1000)) == pytest.approx(1000 * 1.5e-6)
    path.write_text(json.dumps({"anthropic/m": {"input": 1, "output": 2, "cache_write_1h_input": 2.5}}))
    price = PriceTable.load(path).price("anthropic", "m")
    assert price is not None and price.cost(Usage(1000, 0, 0, 0, 1000, 1000)) == pytest.approx(1000 * 2.5e-6)
    path.write_text(json.dumps({"anthropic/m": {"input": 1, "output": 2, "cache_write_1h_input": "x"}}))
    with pytest.raises(ConfigError, match="cache_write_1h_input"):
        PriceTable.load(path)


@pytest.fixture(scope="module")
def parallel_batch_server():
    """Bills caching, and answers all of a batch's requests at once (as a provider running them in
    parallel): none of them reads what another of the same batch wrote."""
    with fake_server_process("--prompt-cache", "--reply-words", "450", "--batch-parallel", "0") as url:
        yield url


BATCH = {"batch": "judge", "batch_poll_interval": 0.05, "batch_linger": 0.05}


def test_a_warm_first_anthropic_batch_writes_each_prefix_once_to_the_one_hour_cache(
    parallel_batch_server: str, tmp_path: Path
) -> None:
    """Warm-first with --batch: the first criterion of each conversation in a first round of batches,
    the other 11 once it has answered, reading its prefix. Cold (--no-warm-first), every request of a
    batch processed at once writes its prefix: six times the writes, no read."""
    from healthbench.results.inspect_log import build_inspect_log
    from healthbench.results.metrics_out import metrics_document

    data, judge = _fixture(tmp_path), "anthropic/claude-sonnet-4-5"
    billed, views = {}, {}
    for warm in (True, False):
        reset_stats(parallel_batch_server)
        store = Store(str(tmp_path / f"warm-{warm}.db"))
        views[warm] = _run(parallel_batch_server, data, store, "run", judge, warm_first=warm, **BATCH)
        billed[warm] = fetch_stats(parallel_batch_server)["billed"]["judge"]
    warm, cold = billed[True], billed[False]
    written = warm["cache_write_input_tokens"]
    assert written > 0 and warm["cache_write_1h_input_tokens"] == written  # every write for an hour
    assert warm["cached_input_tokens"] == 11 * written  # the 11 siblings read it
    assert cold["cached_input_tokens"] == 0 and cold["cache_write_1h_input_tokens"] == 12 * written
    assert warm["input_tokens"] == cold["input_tokens"] and warm["output_tokens"] == cold["output_tokens"]
    # the cost is the server's bill at half Anthropic's list prices: $3/M input, $0.30/M read, $6/M
    # written to the 1-hour cache, $15/M output
    for on, bill in billed.items():
        uncached = bill["input_tokens"] - bill["cached_input_tokens"] - bill["cache_write_input_tokens"]
        dollars = (
            uncached * 3.0 + bill["cached_input_tokens"] * 0.3 + bill["cache_write_1h_input_tokens"] * 6.0
        ) / 2e6 + bill["output_tokens"] * 15.0 / 2e6
        usage = views[on].usage_totals()
        assert usage_metrics(usage.candidate, usage.judge)["cost_usd:judge"] == pytest.approx(
            dollars, rel=1e-12
        )
    assert views[True].score().metrics() == views[False].score().metrics()  # the same verdicts
    # the Inspect log gives the judge's cache reads and writes apart from its full-rate input
    view = views[True]
    usage = view.usage_totals()
    log = build_inspect_log(view, view.score(), metrics_document(view.score().metrics()))
    role = log.stats.role_usage["judge"]
    assert role.input_tokens_cache_write == written and role.input_tokens_cache_read == 11 * written
    assert role.input_tokens == warm["input_tokens"] - 12 * written
    assert role.total_tokens == warm["input_tokens"] + warm["output_tokens"]
