"""The Ray executor: a run's model calls as Ray Data pipelines built with `ray.data.llm` processors.

The same work as the local engine (`healthbench.runner.engine`), executed another way. The driver plans
from the store (`plan`), builds every request with the engine's functions (`sample_request`,
`judge_messages`, `judge_key`), answers what it can from the call cache, and sends the rest through a
`ray.data.llm` HTTP processor (qps, retries and concurrency are Ray's). Results stream back to the
driver, which parses verdicts with `parse_verdict` and commits each call (call cache + sample or grade
row) through the same `Store` API, in small batches: killing the driver loses at most one batch plus the
calls in flight, and `--resume` continues from the store. Stage 1 samples, stage 2 grades each criterion
(its own request); unparseable verdicts are re-asked in further rounds, up to ``judge_retries``.

Calls that fail after Ray's retries fail the pipeline (``ray.data.llm`` has no per-row errors for HTTP):
the run stops with a one-line error, keeping everything committed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from healthbench.config import RunConfig
from healthbench.errors import ConfigError, ModelError, RunError
from healthbench.grading.template import GraderTemplate, load_template
from healthbench.grading.verdict import VerdictParseError, parse_verdict
from healthbench.models.base import Completion, ModelSettings, ModelSpec, Usage, resolve_api_key
from healthbench.models.errors import ProviderError
from healthbench.models.openai import chat_body, parse_chat_response
from healthbench.models.pricing import PriceTable
from healthbench.runner.engine import (
    CallResult,
    EngineOptions,
    Plan,
    WorkItem,
    call_cache_op,
    judge_key,
    judge_messages,
    judge_schema,
    sample_request,
)
from healthbench.runner.progress import NoProgress, ProgressSink, RunCounters
from healthbench.store.db import now
from healthbench.store.runs import Store
from healthbench.store.writer import Op

INSTALL_HINT = "--executor ray needs Ray Data: pip install 'healthbench[ray]'"
COMMIT_EVERY = 64  # results per store transaction: the most a killed driver can lose, with calls in flight
MAX_BATCH = 64  # requests per Ray batch, sent at once by one HTTP actor; more connections: more actors


def require_ray() -> None:
    """A one-line ConfigError naming the extra to install when Ray Data is missing."""
    try:
        found = (
            importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.data") is not None
        )
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(INSTALL_HINT)


# -- one endpoint as a ray.data.llm processor ------------------------------------------------------
@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint the pipeline calls: where, how fast, how many at once."""

    spec: ModelSpec
    settings: ModelSettings
    api_key: str | None
    concurrency: int
    qps: int | None  # requests per second per HTTP actor (ray.data.llm takes whole numbers)
    max_retries: int
    retry_wait: float
    batch_size: int

    def body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> dict[str, Any]:
        """The JSON body the local engine would send (`chat_body`, not a copy)."""
        return chat_body(self.spec, self.settings, messages, schema)

    def processor(self) -> Any:
        from ray.data.llm import HttpRequestProcessorConfig, build_processor

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        config = HttpRequestProcessorConfig(
            url=f"{self.spec.url}/chat/completions",
            headers=headers,
            qps=self.qps,
            max_retries=self.max_retries,
            base_retry_wait_time_in_s=self.retry_wait,
            concurrency=self.concurrency,
            batch_size=self.batch_size,
            session_factory=EagerSession,
        )
        return build_processor(config, preprocess=_to_payload, postprocess=_from_response)


class EagerSession:
    """An aiohttp session whose ``post`` starts the request at once.

    Ray 2.60's HTTP stage creates every request of a batch, then awaits them one by one; with aiohttp's
    lazy ``post`` that sends them one at a time (a 64-request batch at 1 s latency takes 64 s). Started as
    tasks, they are all in flight together, and the stage's qps pacing and retries still apply."""

    def __init__(self) -> None:
        import aiohttp

        self._session = aiohttp.ClientSession()

    async def __aenter__(self) -> EagerSession:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    def post(self, url: str, **kwargs: Any) -> asyncio.Task[Any]:
        async def send() -> Any:
            return await self._session.post(url, **kwargs)

        return asyncio.ensure_future(send())


def _to_payload(row: dict[str, Any]) -> dict[str, Any]:
    return {"tag": row["tag"], "payload": json.loads(row["body"])}


def _from_response(row: dict[str, Any]) -> dict[str, Any]:
    return {"tag": int(row["tag"]), "response": json.dumps(row["http_response"])}


def endpoint_for(
    spec: ModelSpec, settings: ModelSettings, config: RunConfig, environ: Mapping[str, str] | None
) -> Endpoint:
    if spec.provider != "openai":
        raise ConfigError(
            f"--executor ray calls OpenAI-compatible endpoints; {spec.name} is a {spec.provider} model "
            "(serve it behind an OpenAI-compatible server and pass --base-url)"
        )
    rpm = config.requests_per_minute
    batch = min(MAX_BATCH, config.max_connections)
    return Endpoint(
        spec=spec,
        settings=settings,
        api_key=resolve_api_key(spec, environ),
        concurrency=max(1, config.max_connections // batch),
        qps=max(1, int(rpm / 60)) if rpm else None,
        max_retries=config.retry.max_retries,
        retry_wait=config.retry.initial_delay,
        batch_size=batch,
    )


def call_through_ray(endpoint: Endpoint, bodies: Sequence[dict[str, Any]]) -> Iterator[tuple[int, str]]:
    """(index into ``bodies``, raw response JSON) as results stream back from the cluster."""
    if not bodies:
        return
    import ray.data

    rows = [{"tag": i, "body": json.dumps(b)} for i, b in enumerate(bodies)]
    dataset = endpoint.processor()(ray.data.from_items(rows))
    try:
        for row in dataset.iter_rows():
            yield int(row["tag"]), str(row["response"])
    except Exception as exc:  # a call failed after Ray's retries: stop, keeping what is committed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(
            f"the Ray pipeline calling {endpoint.spec.name} failed: {first[:300]} "
            "(everything finished so far is saved; continue with --resume)"
        ) from None


# -- the driver ------------------------------------------------------------------------------------
@dataclass
class _Grading:
    """One criterion being graded: its request and what its attempts have added up to."""

    w: WorkItem
    completion: str
    index: int
    attempt: int
    last: int
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    cached: bool = True
    raw: str | None = None
    error: str | None = None


class RayExecutor:
    """Executes a `Plan` on Ray and commits results through the `Store` API, like `Engine.run`."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        candidate: Endpoint | None,
        judge: Endpoint,
        template: GraderTemplate,
        options: EngineOptions,
        prices: PriceTable,
        progress: ProgressSink | None = None,
    ) -> None:
        self.store, self.run_id = store, run_id
        self.candidate, self.judge, self.template, self.options = candidate, judge, template, options
        self.prices = prices
        self.progress = progress or NoProgress()
        self.counters = RunCounters()
        self._cache_keys: set[str] = set()
        self._pending: list[Op] = []

    def run(self, work_plan: Plan) -> RunCounters:
        c = self.counters
        c.samples_total, c.samples_done = work_plan.samples_total, work_plan.samples_done
        c.criteria_total, c.criteria_done = work_plan.criteria_total, work_plan.criteria_done
        self._cache_keys = self.store.cache_keys()
        self.progress.update(c)
        try:
            completions = self._sample_all([(w, done) for w, done, _ in work_plan.todo])
            grading = [
                _Grading(w, completion, index, first, first + self.options.judge_retries)
                for (w, _, missing), completion in zip(work_plan.todo, completions, strict=True)
                if completion is not None
                for index, first in missing
            ]
            while grading:
                grading = self._grade_round(grading)
        finally:
            self._flush()
            self.progress.update(c)
        return c

    # -- stage 1: samples --------------------------------------------------------------------
    def _sample_all(self, items: Sequence[tuple[WorkItem, str | None]]) -> list[str | None]:
        out: list[str | None] = [done for _, done in items]
        asks: list[tuple[int, str]] = []  # (position in items, cache key)
        bodies: list[dict[str, Any]] = []
        for pos, (w, done) in enumerate(items):
            if done is not None:
                continue
            if self.candidate is None:
                raise RunError(f"{w.item_id}: no completion stored and no candidate model to sample one")
            messages, key = sample_request(self.candidate.spec, self.candidate.settings, w)
            hit = self._cached(key)
            if hit is not None:
                out[pos] = self._sampled(w, key, hit)
            else:
                asks.append((pos, key))
                bodies.append(self.candidate.body(messages, None))
        if self.candidate is not None:
            for tag, response in call_through_ray(self.candidate, bodies):
                pos, key = asks[tag]
                out[pos] = self._sampled(items[pos][0], key, self._real(self.candidate, response))
        return out

    def _sampled(self, w: WorkItem, key: str, result: CallResult | ModelError) -> str | None:
        assert self.candidate is not None
        system = self.candidate.settings.system_message
        sent = ([{"role": "system", "content": system}] if system else []) + [dict(m) for m in w.messages]
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "item_id": w.item_id,
            "repeat": w.repeat,
            "messages": sent,
            "created_at": now(),
        }
        if isinstance(result, ModelError):
            row.update(completion=None, usage=None, cost=None, cached=False, error=str(result))
            self._commit(None, key, self.candidate.spec, [("samples", row)])
            self.counters.samples_failed += 1
            return None
        row.update(
            completion=result.text,
            usage=result.usage.as_dict(),
            cost=result.cost,
            cached=result.cached,
            error=None,
        )
        self._commit(result, key, self.candidate.spec, [("samples", row)])
        self.counters.samples_done += 1
        return result.text

    # -- stage 2: grades, one request per criterion, re-asked in rounds ----------------------
    def _grade_round(self, grading: Iterable[_Grading]) -> list[_Grading]:
        again: list[_Grading] = []
        asks: list[tuple[_Grading, str]] = []
        bodies: list[dict[str, Any]] = []
        schema = judge_schema(self.options)
        for g in grading:
            messages = judge_messages(self.template, self.options, g.w, g.completion, g.index)
            key = judge_key(self.judge.spec, self.judge.settings, messages, schema, g.w.repeat, g.attempt)
            hit = self._cached(key)
            if hit is not None:
                if not self._judged(g, key, hit):
                    again.append(g)
            else:
                asks.append((g, key))
                bodies.append(self.judge.body(messages, schema))
        for tag, response in call_through_ray(self.judge, bodies):
            g, key = asks[tag]
            if not self._judged(g, key, self._real(self.judge, response)):
                again.append(g)
        return again

    def _judged(self, g: _Grading, key: str, result: CallResult | ModelError) -> bool:
        """Record one judge answer; False when the criterion is to be asked again."""
        row: dict[str, Any] = {
            "run_id": self.run_id,
            "item_id": g.w.item_id,
            "repeat": g.w.repeat,
            "criterion": g.index,
            "explanation": None,
        }
        g.attempt += 1
        if isinstance(result, ModelError):
            row.update(status="ungraded", raw=g.raw, error=str(result))
            self._finish_grade(g, row, None, key)
            return True
        g.usage = g.usage + result.usage
        g.cost = None if g.cost is None or result.cost is None else g.cost + result.cost
        g.cached = g.cached and result.cached
        try:
            verdict = parse_verdict(result.text)
        except VerdictParseError as exc:
            g.raw, g.error = result.text, f"unparseable judge answer: {exc}"
            if g.attempt <= g.last:
                self._commit(result, key, self.judge.spec, [])
                return False
            row.update(status="ungraded", raw=g.raw, error=g.error)
        else:
            status = "met" if verdict.criteria_met else "not_met"
            row.update(status=status, explanation=verdict.explanation, raw=None, error=None)
        self._finish_grade(g, row, result, key)
        return True

    def _finish_grade(self, g: _Grading, row: dict[str, Any], result: CallResult | None, key: str) -> None:
        row.update(
            attempts=g.attempt, usage=g.usage.as_dict(), cost=g.cost, cached=g.cached, created_at=now()
        )
        self._commit(result, key, self.judge.spec, [("grades", row)])
        self.counters.criteria_done += 1
        if row["status"] == "ungraded":
            self.counters.ungraded += 1

    # -- calls and commits ---------------------------------------------------------------------
    def _cached(self, key: str) -> CallResult | None:
        if key not in self._cache_keys:
            return None
        hit = self.store.cache_get(key)
        if hit is None:
            return None
        self.counters.count_cache_hit()
        return CallResult(hit.text, Usage(**hit.usage) if hit.usage else Usage(), 0.0, True)

    def _real(self, endpoint: Endpoint, response: str) -> CallResult | ModelError:
        """A response of a real call, counted (calls, tokens, cost) like the engine counts them."""
        try:
            completion: Completion = parse_chat_response(response, endpoint.spec.model)
        except ProviderError as exc:
            return ModelError(f"{endpoint.spec.name}: {exc}")
        cost = self.prices.cost(endpoint.spec.provider, endpoint.spec.model, completion.usage)
        self.counters.count_call(completion.usage.input_tokens, completion.usage.output_tokens, cost)
        return CallResult(completion.text, completion.usage, cost, False)

    def _commit(self, result: CallResult | None, key: str, spec: ModelSpec, ops: list[Op]) -> None:
        self._pending.extend(ops)
        if result is not None and not result.cached:
            self._pending.append(call_cache_op(key, spec, result))
            self._cache_keys.add(key)
        if len(self._pending) >= COMMIT_EVERY:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self.store.write(self._pending)
            self._pending = []
            self.progress.update(self.counters)


# -- entry point -----------------------------------------------------------------------------------
def run_plan(
    store: Store,
    run_id: int,
    config: RunConfig,
    work_plan: Plan,
    *,
    options: EngineOptions,
    progress: ProgressSink | None = None,
    environ: Mapping[str, str] | None = None,
    with_candidate: bool = True,
) -> RunCounters:
    """Execute ``work_plan`` on Ray: the cluster at ``config.ray_address``, the one this process has
    joined already, or a new local Ray (shut down afterwards)."""
    require_ray()
    judge = endpoint_for(config.judge.parsed(), config.judge.settings, config, environ)
    candidate = None
    if with_candidate and config.model is not None:
        candidate = endpoint_for(config.model.parsed(), config.model.settings, config, environ)
    executor = RayExecutor(
        store,
        run_id,
        candidate=candidate,
        judge=judge,
        template=load_template(config.grader_template, config.cache_dir),
        options=options,
        prices=PriceTable.load(config.prices),
        progress=progress,
    )
    started = _join_ray(config.ray_address)
    try:
        return executor.run(work_plan)
    finally:
        if started:
            import ray

            ray.shutdown()


def _join_ray(address: str | None) -> bool:
    """Connect to Ray unless already connected; True when this call started the connection."""
    import ray
    import ray.data

    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunError(f"cannot join the Ray cluster at {address or 'auto'}: {exc}") from None
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    return True
