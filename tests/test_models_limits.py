"""The one wrapper: retry decisions, backoff, shared connection limits, rate buckets and call stats."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from healthbench.errors import ModelError
from healthbench.models.base import Completion, ModelSettings, Usage, parse_model_spec
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.factory import create_model
from healthbench.models.limits import (
    ConnectionLimits,
    ConnectionPool,
    ManagedModel,
    RetryPolicy,
    TokenBucket,
)
from healthbench.testing.fake_server import FakeServerConfig, fetch_stats, running_fake_server

SPEC = parse_model_spec("openai/gpt-4.1")
MESSAGES = [{"role": "user", "content": "hello"}]


class ScriptedProvider:
    """A provider whose attempts fail or succeed as scripted; records how many run at once."""

    def __init__(self, script: list[ProviderError | None], delay: float = 0.0) -> None:
        self.spec = SPEC
        self.settings = ModelSettings()
        self.script = list(script)
        self.delay = delay
        self.calls = 0
        self.running = 0
        self.max_running = 0
        self.closed = False

    async def complete(self, messages, *, json_schema=None):
        self.calls += 1
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(self.delay)
            outcome = self.script.pop(0) if self.script else None
            if outcome is not None:
                raise outcome
            return Completion(text=f"answer {self.calls}", usage=Usage(3, 2), model="gpt-4.1")
        finally:
            self.running -= 1

    async def aclose(self):
        self.closed = True


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def transient(message: str = "503: busy", retry_after: float | None = None) -> ProviderError:
    return ProviderError(FailureKind.TRANSIENT, message, retry_after=retry_after, status=503)


def managed(provider, policy=None, pool=None, sleep=None) -> ManagedModel:
    return ManagedModel(
        provider,
        policy or RetryPolicy(initial_delay=1.0, jitter=False),
        pool or ConnectionPool(),
        sleep=sleep or RecordingSleep(),
        rng=random.Random(0),
    )


# ---------------------------------------------------------------- policy


def test_backoff_doubles_up_to_the_cap_without_jitter():
    policy = RetryPolicy(initial_delay=1.0, max_delay=10.0, jitter=False)
    assert [policy.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_full_jitter_stays_below_the_exponential_ceiling():
    policy = RetryPolicy(initial_delay=1.0, max_delay=60.0)
    rng = random.Random(7)
    for retry in range(10):
        ceiling = min(60.0, 2.0**retry)
        delays = [policy.delay(retry, rng=rng) for _ in range(50)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # really spread, not stuck at 0


def test_retry_after_wins_but_is_capped():
    policy = RetryPolicy(initial_delay=1.0, max_delay=30.0)
    assert policy.delay(0, retry_after=5.0) == 5.0
    assert policy.delay(6, retry_after=0.0) == 0.0
    assert policy.delay(0, retry_after=3600.0) == 30.0


# ---------------------------------------------------------------- managed model


async def test_transient_failures_are_retried_with_backoff():
    provider = ScriptedProvider([transient(), transient(), None])
    sleep = RecordingSleep()
    model = managed(provider, sleep=sleep)
    completion = await model.generate(MESSAGES)
    assert completion.text == "answer 3"
    assert sleep.delays == [1.0, 2.0]
    s = model.stats
    assert (s.calls, s.answered, s.failed_calls, s.attempts, s.retries, s.transient_errors) == (
        1,
        1,
        0,
        3,
        2,
        2,
    )
    assert s.tokens == Usage(3, 2).as_dict()


async def test_rate_limits_honour_retry_after():
    limited = ProviderError(FailureKind.RATE_LIMIT, "429: slow down", retry_after=7.0, status=429)
    no_header = ProviderError(FailureKind.RATE_LIMIT, "429: slow down", status=429)
    provider = ScriptedProvider([limited, no_header, None])
    sleep = RecordingSleep()
    model = managed(provider, sleep=sleep)
    await model.generate(MESSAGES)
    assert sleep.delays == [7.0, 2.0]
    assert model.stats.rate_limited == 2


async def test_fatal_errors_fail_at_once_with_one_line():
    fatal = ProviderError(
        FailureKind.FATAL, "401 invalid or missing API key (check OPENAI_API_KEY): no", status=401
    )
    provider = ScriptedProvider([fatal, None])
    sleep = RecordingSleep()
    model = managed(provider, sleep=sleep)
    with pytest.raises(ModelError) as info:
        await model.generate(MESSAGES)
    assert str(info.value) == (
        "openai/gpt-4.1 at https://api.openai.com/v1: "
        "401 invalid or missing API key (check OPENAI_API_KEY): no"
    )
    assert provider.calls == 1 and sleep.delays == []
    assert (model.stats.attempts, model.stats.retries, model.stats.failed_calls) == (1, 0, 1)


async def test_every_retry_loop_ends():
    provider = ScriptedProvider([transient("503: still busy")] * 100)
    sleep = RecordingSleep()
    model = managed(provider, policy=RetryPolicy(max_retries=3, initial_delay=0.5, jitter=False), sleep=sleep)
    with pytest.raises(ModelError) as info:
        await model.generate(MESSAGES)
    assert str(info.value) == (
        "openai/gpt-4.1 at https://api.openai.com/v1: gave up after 4 attempts; last error: 503: still busy"
    )
    assert provider.calls == 4
    assert sleep.delays == [0.5, 1.0, 2.0]


async def test_no_retries_policy():
    provider = ScriptedProvider([transient()])
    model = managed(provider, policy=RetryPolicy(max_retries=0))
    with pytest.raises(ModelError, match="gave up after 1 attempts"):
        await model.generate(MESSAGES)


async def test_connection_slot_is_not_held_while_backing_off():
    """One slot: a call sleeping after a failure must not block another call from running."""
    pool = ConnectionPool(ConnectionLimits(max_connections=1))
    release = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        await release.wait()

    failing = managed(ScriptedProvider([transient(), None]), pool=pool, sleep=blocking_sleep)
    other = managed(ScriptedProvider([None]), pool=pool)
    first = asyncio.create_task(failing.generate(MESSAGES))
    await asyncio.sleep(0.01)  # the first call has failed and is now backing off
    assert (await asyncio.wait_for(other.generate(MESSAGES), 1.0)).text == "answer 1"
    release.set()
    assert (await first).text == "answer 2"


async def test_models_on_one_endpoint_share_its_budget():
    pool = ConnectionPool(ConnectionLimits(max_connections=3))
    candidate = ScriptedProvider([], delay=0.02)
    judge = ScriptedProvider([], delay=0.02)
    models = [managed(candidate, pool=pool), managed(judge, pool=pool)]
    await asyncio.gather(*(models[i % 2].generate(MESSAGES) for i in range(20)))
    connection = pool.connection(SPEC.connection_key)
    assert connection.gate.most_inside == 3
    assert candidate.max_running + judge.max_running >= 3
    assert connection.gate.inside == 0


async def test_pool_overrides_per_connection():
    key = ("openai", "http://127.0.0.1:1/v1")
    pool = ConnectionPool(ConnectionLimits(max_connections=8), {key: ConnectionLimits(max_connections=2)})
    assert pool.limits_for(key).max_connections == 2
    assert pool.limits_for(SPEC.connection_key).max_connections == 8
    assert pool.connection(key) is pool.connection(key)


async def test_aclose_closes_the_provider():
    provider = ScriptedProvider([])
    await managed(provider).aclose()
    assert provider.closed


# ---------------------------------------------------------------- rate buckets


async def test_requests_per_minute_bucket_spaces_requests():
    bucket = TokenBucket(per_minute=1200)  # 20 per second, burst 20
    bucket.level = 0.0
    start = time.monotonic()
    for _ in range(4):
        await bucket.acquire()
    assert 0.17 <= time.monotonic() - start < 0.6


async def test_tokens_per_minute_debt_delays_the_next_request():
    clock = [0.0]
    bucket = TokenBucket(per_minute=6000, clock=lambda: clock[0])  # 100 tokens per second
    assert bucket.capacity == 100.0
    bucket.charge(150)
    assert bucket.level == -50.0
    clock[0] = 1.0
    bucket._refill()
    assert bucket.level == 50.0


async def test_rate_limits_are_applied_by_managed_models():
    pool = ConnectionPool(ConnectionLimits(requests_per_minute=600))  # 10/s, burst 10
    model = managed(ScriptedProvider([]), pool=pool)
    start = time.monotonic()
    await asyncio.gather(*(model.generate(MESSAGES) for _ in range(13)))
    assert time.monotonic() - start >= 0.25  # three requests over the burst wait ~0.1 s each


# ---------------------------------------------------------------- against the fake server


async def test_concurrency_cap_bounds_in_flight_requests_at_the_server():
    with running_fake_server(FakeServerConfig(latency=0.1)) as url:
        pool = ConnectionPool(ConnectionLimits(max_connections=4))
        candidate = create_model(parse_model_spec("cand", base_url=url), pool=pool, environ={})
        judge = create_model(parse_model_spec("judge", base_url=url), pool=pool, environ={})
        messages = [[{"role": "user", "content": f"q{i}"}] for i in range(24)]
        await asyncio.gather(*((candidate if i % 2 else judge).generate(m) for i, m in enumerate(messages)))
        stats = fetch_stats(url)
        assert stats["requests"] == 24
        assert stats["max_in_flight"] == 4
        await candidate.aclose()
        await judge.aclose()


def test_policy_and_limit_fields_are_documented():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    fields = [*RetryPolicy.model_fields, *ConnectionLimits.model_fields]
    assert [f for f in fields if f"`{f}`" not in docs] == []
