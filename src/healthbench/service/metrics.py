"""Prometheus metrics of `healthbench serve` (``GET /metrics``): what the engine already counts, as
Prometheus reads it.

Nothing here counts calls on its own: `MetricsObserver` is the engine's `CallObserver` (told of each call
as the engine's `Ledger` counted it, and of each retry as `ManagedModel` counted it), and the jobs and
provider batches by state are read from the store at scrape time, so they are right across service
processes and restarts.

The jobs run in the service's worker process (service/jobs.py), the HTTP routes in its main process:
`healthbench serve` therefore sets ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode:
each process writes its figures to files in that folder) before it starts the worker process
(`metrics_dir`), and `/metrics` reads every process's figures from that folder, and this process's own
if it keeps them in memory (prometheus_client was imported before the variable was set). Without the
variable (in-process tests) the figures are this process's own.

Labels are low-cardinality only: role, provider, model, outcome, token type, job kind and status, HTTP
method, route template and status. Never a job name, prompt id, text or key.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from healthbench.executors.progress import CallReport
from healthbench.models.base import ModelSpec
from healthbench.service.schemas import JobStatusName
from healthbench.store.batches import batch_counts
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# whether this process keeps its figures in memory: prometheus_client chose it when it was imported
# (files in $PROMETHEUS_MULTIPROC_DIR if it was set then)
IN_MEMORY = values.ValueClass is values.MutexValue
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# the token types of `healthbench_model_tokens_total`: type label -> field of the usage record
# (`Usage`). A field added to `Usage` is exposed by adding its line here.
TOKEN_TYPES: dict[str, str] = {
    "input": "input_tokens",  # every input token, the cached ones included
    "cached_input": "cached_input_tokens",
    "cache_write_input": "cache_write_input_tokens",  # (0 until the usage record carries it)
    "output": "output_tokens",  # reasoning tokens included
}

# model calls take from a fraction of a second to minutes; jobs from seconds to days
CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
JOB_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200)
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# the metrics this process updates; exposed directly, or (multiprocess mode) through their files
REGISTRY = CollectorRegistry()
_MODEL = ("role", "provider", "model")
CALLS = Counter(
    "healthbench_model_calls",
    "Model calls of the service's jobs by outcome: ok (answered), cached (answered from the call cache "
    "or by another request's batch answer: no model asked), failed (no answer after the retries), "
    "retried and rate_limited (an attempt that failed and was retried).",
    [*_MODEL, "outcome"],
    registry=REGISTRY,
)
TOKENS = Counter(
    "healthbench_model_tokens",
    "Tokens of the model calls as the provider billed them (cached answers excluded), by type: input "
    "(all, cached included), cached_input, cache_write_input, output.",
    [*_MODEL, "type"],
    registry=REGISTRY,
)
COST = Counter(
    "healthbench_model_cost_usd",
    "Cost of the priced model calls in US dollars (the price table's; unpriced models add nothing).",
    _MODEL,
    registry=REGISTRY,
)
CALL_SECONDS = Histogram(
    "healthbench_model_call_duration_seconds",
    "Wall time of a model call answered or failed online (its retries and their waits included).",
    _MODEL,
    buckets=CALL_BUCKETS,
    registry=REGISTRY,
)
JOB_SECONDS = Histogram(
    "healthbench_job_duration_seconds",
    "Wall time of one session of a job on a worker, by job kind and how it ended.",
    ["kind", "status"],
    buckets=JOB_BUCKETS,
    registry=REGISTRY,
)
HTTP_REQUESTS = Counter(
    "healthbench_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "healthbench_http_request_duration_seconds",
    "Time to answer an HTTP request (until its last byte is sent), by method and route template.",
    ["method", "route"],
    buckets=HTTP_BUCKETS,
    registry=REGISTRY,
)
JOB_STATES: tuple[str, ...] = get_args(JobStatusName)


OUTCOMES = ("ok", "cached", "failed", "retried", "rate_limited")


class MetricsObserver:
    """The engine's `CallObserver` for Prometheus: each call as the engine counted it. The series of a
    (role, model) are made at its first call, every outcome and token type at once (at 0)."""

    def __init__(self) -> None:
        self._series: dict[tuple[str, str, str], _Series] = {}

    def _of(self, role: str, spec: ModelSpec) -> _Series:
        key = (role, spec.provider, spec.model)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(key)
        return series

    def call_ended(self, report: CallReport) -> None:
        series = self._of(report.role, report.spec)
        series.calls[report.outcome].inc()
        if report.seconds is not None:
            series.seconds.observe(report.seconds)
        if report.outcome == "ok" and report.usage is not None:  # a cached answer was not billed again
            for field, tokens in series.tokens:
                count = getattr(report.usage, field, 0)
                if count:
                    tokens.inc(count)
            if report.cost:
                series.cost.inc(report.cost)

    def call_retried(self, role: str, spec: ModelSpec, reason: str) -> None:
        self._of(role, spec).calls["rate_limited" if reason == "rate_limit" else "retried"].inc()


class _Series:
    """The counters of one (role, provider, model)."""

    def __init__(self, labels: tuple[str, str, str]) -> None:
        self.calls = {outcome: CALLS.labels(*labels, outcome) for outcome in OUTCOMES}
        self.tokens = [(field, TOKENS.labels(*labels, kind)) for kind, field in TOKEN_TYPES.items()]
        self.cost = COST.labels(*labels)
        self.seconds = CALL_SECONDS.labels(*labels)


def job_ended(kind: str, status: str, seconds: float) -> None:
    JOB_SECONDS.labels(kind, status).observe(seconds)


class StoreCollector(Collector):
    """The jobs and provider batches by state, read from the store at each scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        counts = JobStore(self.store).counts_by_status()
        jobs = GaugeMetricFamily(
            "healthbench_jobs", "Jobs in the store by status (every workspace).", labels=["state"]
        )
        for state in sorted({*JOB_STATES, *counts}):
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        batches = GaugeMetricFamily(
            "healthbench_provider_batches",
            "Provider batches (--batch) of every run in the store, by provider and state.",
            labels=["provider", "state"],
        )
        for (provider, state), count in sorted(batch_counts(self.store).items()):
            batches.add_metric([provider, state], count)
        yield batches


def exposition(store: Store) -> bytes:
    """The text `/metrics` answers: every process's counters and histograms, and the store's gauges."""
    folder = os.environ.get(MULTIPROC_ENV)
    sources: list[Collector] = [REGISTRY] if IN_MEMORY else []
    if folder:
        sources.append(MultiProcessCollector(None, folder))  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    registry.register(_Merged(sources))
    registry.register(StoreCollector(store))
    return generate_latest(registry)


class _Merged(Collector):
    """The families of several sources as one (a metric this process keeps in memory and the worker
    process in files has one HELP line, with both processes' series)."""

    def __init__(self, sources: list[Collector]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for source in self.sources:
            for family in source.collect():
                known = families.setdefault(family.name, family)
                if known is not family:
                    known.samples.extend(family.samples)
        yield from families.values()


@contextmanager
def metrics_dir() -> Iterator[None]:
    """``PROMETHEUS_MULTIPROC_DIR`` for the processes started inside (the service's worker process):
    a new folder removed at the end, or the operator's own if set (left as it is)."""
    if os.environ.get(MULTIPROC_ENV):
        yield
        return
    folder = tempfile.mkdtemp(prefix="healthbench-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


class HttpMetrics:
    """ASGI middleware: each request counted by method, route template (never the raw path, which
    names jobs) and status, and timed until its last byte is sent. ``routes``: the app's, to name the
    route of a request refused before routing (no token: 401)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app, self.routes = app, routes
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            key = (scope["method"], _template(scope, self.routes), status)
            series = self._series.get(key)
            if series is None:
                method, route, _ = key
                series = HTTP_REQUESTS.labels(method, route, str(status)), HTTP_SECONDS.labels(method, route)
                self._series[key] = series
            series[0].inc()
            series[1].observe(time.perf_counter() - start)


def _template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The route's path template (``.../benchmark-jobs/{name}/status``); "other" for a path no route
    matches (a 404): raw paths would make a series per job name."""
    route = scope.get("route")
    if route is None:  # refused before routing
        route = next((r for r in routes if r.matches(scope)[0] is not Match.NONE), None)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "other"
