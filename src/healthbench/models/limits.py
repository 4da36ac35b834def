"""The one wrapper around every provider: retries with backoff, per-connection limits, usage accounting.

Providers only turn a request into a response (`ProviderModel.complete`). `ManagedModel` adds, once for
all of them: a concurrency budget shared by every model on the same endpoint (`ConnectionPool`), optional
requests- and tokens-per-minute buckets, classified retries that always end, and call statistics.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from healthbench.defaults import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_OUTAGE, DEFAULT_MAX_RETRIES
from healthbench.errors import FatalModelError, ModelError, OutageError
from healthbench.models.base import (
    Completion,
    Messages,
    ModelSettings,
    ModelSpec,
    ProviderModel,
    Usage,
)
from healthbench.models.errors import CallFailure, FailureKind, ProviderError
from healthbench.models.tally import CallTally

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class RetryPolicy(BaseModel):
    """How failed calls are retried: exponential backoff with full jitter, Retry-After honoured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    # retries for an endpoint that cannot be reached and has never answered (a wrong --base-url
    # fails in seconds, not after the whole backoff schedule)
    unreachable_retries: int = Field(default=2, ge=0)
    initial_delay: float = Field(default=1.0, ge=0)
    max_delay: float = Field(default=60.0, ge=0)
    jitter: bool = True
    # an endpoint that has answered before and then fails every call for this long (seconds) is
    # down: the run stops (resumable) instead of retrying for as long as the run lasts
    max_outage: float = Field(default=DEFAULT_MAX_OUTAGE, gt=0)

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based). A server's Retry-After wins, capped."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        ceiling = min(self.max_delay, self.initial_delay * 2.0**retry)
        if not self.jitter:
            return ceiling
        return (rng or random.Random()).uniform(0.0, ceiling)


class ConnectionLimits(BaseModel):
    """The budget of one endpoint (provider + base URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, gt=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)


class TokenBucket:
    """A small async token bucket. `acquire` waits for capacity; `charge` spends after the fact (may go
    negative, which then delays the next `acquire`). Refills at `per_minute / 60` per second."""

    def __init__(
        self, per_minute: float, *, burst: float | None = None, clock: Clock = time.monotonic
    ) -> None:
        self.rate = per_minute / 60.0
        self.capacity = burst if burst is not None else max(1.0, self.rate)
        self.level = self.capacity
        self._clock = clock
        self._last = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._last) * self.rate)
        self._last = now

    async def acquire(self, amount: float = 1.0) -> None:
        amount = min(amount, self.capacity)
        async with self._lock:  # first come, first served
            while True:
                self._refill()
                if self.level >= amount:
                    self.level -= amount
                    return
                await asyncio.sleep((amount - self.level) / self.rate)

    def charge(self, amount: float) -> None:
        self._refill()
        self.level -= amount


class Gate:
    """The one concurrency limit: at most ``limit`` holders at once, counting who is inside. An endpoint's
    connections are one (`Connection.gate`); the engine's calls not yet committed are another."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inside = 0
        self.most_inside = 0
        self._semaphore = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        await self._semaphore.acquire()
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)

    def release(self) -> None:
        self.inside -= 1
        self._semaphore.release()

    async def __aenter__(self) -> Gate:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class Answers:
    """Which models have answered at least once: the one "never answered" test. What has not answered
    once is down or misconfigured (wrong --base-url, model name or key) rather than busy, so its calls
    are not retried for long and a run using it stops instead of failing every call the same way.
    Used per endpoint (`Connection`) and by the Ray executor, which has no connection pool."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}  # successful requests per model name

    def record(self, model: str) -> None:
        self._counts[model] = self._counts.get(model, 0) + 1

    def never_answered(self, model: str | None = None) -> bool:
        """For one model (or, with None, for every model counted here)."""
        return not (self._counts.get(model, 0) if model is not None else self._counts)


@dataclass
class Connection:
    """The live budget of one endpoint: its gate, optional buckets, and whether it answers."""

    limits: ConnectionLimits
    gate: Gate
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None
    answers: Answers = field(default_factory=Answers)
    # an outage in progress: when calls on this endpoint started failing, the last error, and when
    # the next attempt is due (monotonic seconds); all None while calls succeed
    failing_since: float | None = None
    last_error: str | None = None
    next_attempt: float | None = None

    def never_answered(self, model: str | None = None) -> bool:
        """`Answers.never_answered` for this endpoint (``model`` None) or one model on it."""
        return self.answers.never_answered(model)

    def succeeded(self, model: str) -> None:
        self.answers.record(model)
        self.failing_since = self.last_error = self.next_attempt = None

    def failed(self, message: str, now: float) -> float:
        """Record a failed attempt; how long (seconds) the endpoint has been failing."""
        if self.failing_since is None:
            self.failing_since = now
        self.last_error = message
        return now - self.failing_since

    async def before_request(self) -> None:
        """Wait for the rate buckets (never while holding a connection slot)."""
        if self.requests is not None:
            await self.requests.acquire(1.0)
        if self.tokens is not None:
            await self.tokens.acquire(0.0)  # wait until earlier calls' tokens are paid back

    def after_request(self, usage: Usage) -> None:
        if self.tokens is not None:
            self.tokens.charge(usage.total_tokens)


class ConnectionPool:
    """One budget per connection key, shared by every model hitting that endpoint. One per run."""

    def __init__(
        self,
        default: ConnectionLimits | None = None,
        overrides: dict[tuple[str, str], ConnectionLimits] | None = None,
    ) -> None:
        self.default = default or ConnectionLimits()
        self.overrides = dict(overrides or {})
        self._connections: dict[tuple[str, str], Connection] = {}

    def limits_for(self, key: tuple[str, str]) -> ConnectionLimits:
        return self.overrides.get(key, self.default)

    def outage_note(self, now: float) -> str | None:
        """One line on the longest outage in progress (for the progress display), or None."""
        failing = [(key, c) for key, c in self._connections.items() if c.failing_since is not None]
        if not failing:
            return None
        (provider, url), c = min(failing, key=lambda kc: kc[1].failing_since or 0.0)
        since = now - (c.failing_since or now)
        wait = max(0.0, (c.next_attempt or now) - now)
        return (
            f"{url or provider} failing for {since:.0f}s ({c.last_error}); "
            f"retrying, next attempt in {wait:.0f}s"
        )

    def connection(self, key: tuple[str, str]) -> Connection:
        if key not in self._connections:
            limits = self.limits_for(key)
            self._connections[key] = Connection(
                limits=limits,
                gate=Gate(limits.max_connections),
                requests=TokenBucket(limits.requests_per_minute) if limits.requests_per_minute else None,
                tokens=TokenBucket(limits.tokens_per_minute) if limits.tokens_per_minute else None,
            )
        return self._connections[key]


@dataclass
class CallStats(CallTally):
    """One managed model's calls (unpriced: prices are the engine's) and what it took to make them:
    `attempts` counts every HTTP request / inference actually made."""

    attempts: int = 0
    retries: int = 0
    rate_limited: int = 0
    transient_errors: int = 0


class ManagedModel:
    """A `ChatModel`: a provider adapter plus retries, shared connection limits and statistics."""

    def __init__(
        self,
        provider: ProviderModel,
        policy: RetryPolicy,
        pool: ConnectionPool,
        *,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.provider = provider
        self.policy = policy
        self.pool = pool
        self.stats = CallStats()
        self.on_retry: Callable[[str], None] | None = None  # told each retry's failure kind (metrics)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock = clock

    @property
    def spec(self) -> ModelSpec:
        return self.provider.spec

    @property
    def settings(self) -> ModelSettings:
        return self.provider.settings

    async def generate(self, messages: Messages, *, json_schema: dict[str, Any] | None = None) -> Completion:
        """Call the provider until it answers, a fatal error occurs, or the retry budget is spent."""
        return await self.call(lambda: self.provider.complete(messages, json_schema=json_schema))

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        """Make any request to this model's endpoint with the retry policy and limits of `generate`
        (a model call, or a provider batch API's upload, poll or download)."""
        connection = self.pool.connection(self.spec.connection_key)
        retry = 0
        while True:
            result = await self._attempt(connection, request)
            if not isinstance(result, CallFailure):
                connection.succeeded(self.spec.name)
                if isinstance(result, Completion):
                    self.stats.count(result.usage.as_dict(), None)
                return result
            self._count(result)
            error = self._give_up(connection, result, retry)
            if error is not None:
                self.stats.count(None, None, failed=True)
                raise error
            delay = self.policy.delay(retry, result.retry_after, self._rng)
            self.stats.retries += 1
            if self.on_retry is not None:
                self.on_retry(result.kind.value)
            retry += 1
            connection.next_attempt = self._clock() + delay
            await self._sleep(delay)  # no connection slot is held while waiting

    def _give_up(self, connection: Connection, result: CallFailure, retry: int) -> ModelError | None:
        """The error that ends the call after failed attempt number ``retry`` (0-based), or None to retry."""
        where = (self.spec.describe(), result.status)
        if result.kind is FailureKind.FATAL:
            return FatalModelError(f"{self.spec.describe()}: {result.message}", *where)
        never_answered = result.kind is FailureKind.UNREACHABLE and connection.never_answered()
        if never_answered and retry >= self.policy.unreachable_retries:
            return FatalModelError(
                f"{self.spec.describe()}: {result.message} (no answer from this endpoint yet; "
                "check --base-url and that the server is running)",
                *where,
            )
        failing_for = connection.failed(result.message, self._clock())
        if not connection.never_answered() and failing_for >= self.policy.max_outage:
            return OutageError(
                f"{self.spec.describe()} has not answered for {failing_for:.0f}s (--max-outage "
                f"{self.policy.max_outage:g}); last error: {result.message}",
                *where,
            )
        if retry >= self.policy.max_retries:
            return ModelError(
                f"{self.spec.describe()}: gave up after {retry + 1} attempts; last error: {result.message}",
                *where,
            )
        return None

    async def _attempt(self, connection: Connection, request: Callable[[], Awaitable[T]]) -> T | CallFailure:
        if connection.requests is not None or connection.tokens is not None:
            await connection.before_request()
        gate = connection.gate  # (not `async with`: two coroutines less per call)
        await gate.acquire()
        try:
            self.stats.attempts += 1
            try:
                result = await request()
            except ProviderError as exc:
                return exc.failure
        finally:
            gate.release()
        if isinstance(result, Completion):
            connection.after_request(result.usage)
        return result

    def _count(self, failure: CallFailure) -> None:
        if failure.kind is FailureKind.RATE_LIMIT:
            self.stats.rate_limited += 1
        elif failure.kind in (FailureKind.TRANSIENT, FailureKind.UNREACHABLE):
            self.stats.transient_errors += 1

    async def aclose(self) -> None:
        await self.provider.aclose()
