"""The Ray executor: a run's model calls as Ray Data pipelines built with `ray.data.llm` processors.

The same work as the local engine (`healthbench.executors.local`), executed another way. The driver plans
from the store a page of work at a time (`Plan.pages`), builds every request with the engine's functions
(`sample_request`, `judge_messages`, `judge_key`), answers what it can from the call cache, and sends the
rest through a `ray.data.llm` processor (`executors.ray_calls`: HTTP with Ray's qps and retries, or vLLM
for a ``vllm/`` candidate). Results stream back to the driver, which parses verdicts with `parse_verdict`
and commits each call (call cache + sample or grade row) through the same `Store` API; the pipeline gets
more work only once what came back is committed, so killing the driver repeats at most ``in_flight``
calls on ``--resume`` (reported as `RunCounters.repeat_bound`). Stage 1 samples, stage 2 grades each
criterion (its own request) with each member of the judge panel, one member's pipeline after another
(a single judge is a panel of one); unparseable verdicts are re-asked in further rounds, up to
``judge_retries``. Each member's verdicts, calls and cost are stored and counted under its label, as the
local engine stores and counts them.

A call that fails after the retries is stored like the local engine stores it (a failed sample, an
ungraded criterion); a fatal failure (wrong key) or a model that fails without ever answering stops the
run, keeping everything committed.

The engine's observer (`CallObserver`: Prometheus metrics, OpenTelemetry spans) is told of every call
as the local engine tells it, by the driver as it takes the call's answer: answered from the call
cache (``cached``), answered (``ok``) or failed, with its usage, cost, the judge's verdict, and its
start, wall time and retries as measured in the worker that made it (`ray_calls.Answer`).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from healthbench.config import RunConfig
from healthbench.defaults import DEFAULT_RAY_CONNECT_TIMEOUT
from healthbench.errors import ConfigError, ModelError, RunError
from healthbench.executors.grading import (
    Caller,
    CallResult,
    EngineOptions,
    Grading,
    Ledger,
    Messages,
    Plan,
    Todo,
    WorkItem,
    no_candidate,
    run_stopped,
    sample_request,
)
from healthbench.executors.progress import CallObserver, CallReport, NoProgress, ProgressSink, RunCounters
from healthbench.executors.ray_calls import MAX_BATCH, Answer, Endpoint, RayEndpoint, call_through_ray
from healthbench.executors.vllm import VllmEndpoint
from healthbench.grading.template import GraderTemplate, load_template
from healthbench.models.base import Completion, ModelSettings, ModelSpec, resolve_api_key
from healthbench.models.errors import ProviderError
from healthbench.models.limits import Answers
from healthbench.models.openai import parse_chat_response
from healthbench.models.pricing import PriceTable
from healthbench.store.runs import Rows, Store

INSTALL_HINT = "--executor ray needs Ray Data: pip install 'healthbench[ray]'"
COMMIT_EVERY = 64  # results per store transaction (and before the pipeline is fed more: see ray_calls)


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


def endpoint_for(
    spec: ModelSpec, settings: ModelSettings, config: RunConfig, environ: Mapping[str, str] | None
) -> RayEndpoint:
    """How the pipeline calls ``spec``: over HTTP (OpenAI-compatible) or, for ``vllm/``, with vLLM."""
    batch = min(MAX_BATCH, config.max_connections)
    if spec.provider == "vllm":
        return VllmEndpoint(spec, settings, dict(config.vllm_engine_args), batch_size=batch)
    if spec.provider != "openai":
        raise ConfigError(
            f"--executor ray calls OpenAI-compatible endpoints; {spec.name} is a {spec.provider} model "
            "(serve it behind an OpenAI-compatible server and pass --base-url)"
        )
    rpm = config.requests_per_minute
    return Endpoint(
        spec=spec,
        settings=settings,
        api_key=resolve_api_key(spec, environ),
        concurrency=max(1, config.max_connections // batch),
        qps=max(1, int(rpm / 60)) if rpm else None,
        retry=config.retry,
        batch_size=batch,
    )


# -- the driver ------------------------------------------------------------------------------------
class RayExecutor:
    """Executes a `Plan` on Ray and commits results through the `Store` API, like the local engine."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        candidate: RayEndpoint | None,
        judges: Mapping[str, RayEndpoint],
        template: GraderTemplate,
        options: EngineOptions,
        prices: PriceTable,
        progress: ProgressSink | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        self.store, self.run_id = store, run_id
        self.observer = observer  # told of every call as the driver takes its answer (metrics, traces)
        self.candidate, self.template, self.options = candidate, template, options
        self.judges = dict(judges)  # the panel: each member's endpoint by its label, the chair first
        self.progress = progress or NoProgress()
        self.ledger = Ledger(store, run_id, prices)
        self.counters = self.ledger.counters
        self._pending = Rows()
        self._answers = Answers()  # models with a successful real call in this session

    def run(self, work_plan: Plan, *, interrupted_before: bool = False) -> RunCounters:
        """Do the plan's pending work. ``interrupted_before``: an earlier session of the run ended
        without finishing (killed driver): its lost answers are asked again, at most ``in_flight``."""
        endpoints = (self.candidate, *self.judges.values())  # one pipeline at a time
        lost = max(e.in_flight for e in endpoints if e is not None) if interrupted_before else None
        c = self.ledger.start(work_plan, repeat_bound=lost)
        self.progress.update(c)
        try:
            for page in work_plan.pages():  # a page of work at a time: sampled, then graded
                self._page(page)
        finally:
            self._flush()
            self.progress.update(c)
        return c

    def _page(self, page: Sequence[Todo]) -> None:
        """One page of the plan: its samples (stage 1), then its criteria, re-asked in rounds (stage 2)."""
        completions = self._sample_all([(w, done) for w, done, _ in page])
        grading = [
            Grading.start(w, completion, index, first, self.options, judge)
            for (w, _, missing), completion in zip(page, completions, strict=True)
            if completion is not None
            for index, first, judge in missing
        ]
        while grading:
            grading = self._grade_round(grading)

    # -- stage 1: samples --------------------------------------------------------------------
    def _sample_all(self, items: Sequence[tuple[WorkItem, str | None]]) -> list[str | None]:
        out: list[str | None] = [done for _, done in items]
        requests: list[tuple[int, Messages, str]] = []  # (position in items, messages, cache key)
        for pos, (w, done) in enumerate(items):
            if done is not None:
                continue
            if self.candidate is None:
                raise no_candidate(w)
            requests.append((pos, *sample_request(self.candidate.spec, self.candidate.settings, w)))
        asks: list[tuple[int, str, Messages]] = []  # (position in items, cache key, messages)
        bodies: list[dict[str, Any]] = []
        hits = self.ledger.lookup([key for _, _, key in requests])
        for (pos, messages, key), hit in zip(requests, hits, strict=True):
            if hit is not None:
                out[pos] = self._sampled(items[pos][0], key, _Taken(hit, messages))
            else:
                assert self.candidate is not None
                asks.append((pos, key, messages))
                bodies.append(self.candidate.body(messages, None))
        if self.candidate is not None:
            for answer in call_through_ray(self.candidate, bodies, flush=self._flush):
                pos, key, messages = asks[answer.tag]
                taken = self._real(self.candidate, answer, messages, False)
                out[pos] = self._sampled(items[pos][0], key, taken)
        return out

    def _sampled(self, w: WorkItem, key: str, taken: _Taken) -> str | None:
        assert self.candidate is not None
        result = taken.result
        outcome = str(result) if isinstance(result, ModelError) else result
        rows, text = self.ledger.sampled(w, self.candidate.settings, outcome)
        self._commit(None if isinstance(outcome, str) else outcome, key, self.candidate.spec, rows)
        self._tell(self.candidate, False, taken)
        return text

    # -- stage 2: grades, one request per criterion and member, re-asked in rounds -------------
    def _grade_round(self, grading: Sequence[Grading]) -> list[Grading]:
        """One round: each member asked the criteria it has left, member after member (the chair
        first); the criteria to ask again in the next round."""
        again: list[Grading] = []
        for label, judge in self.judges.items():
            again += self._grade_with(label, judge, [g for g in grading if g.judge == label])
        return again

    def _grade_with(self, label: str, judge: RayEndpoint, grading: Iterable[Grading]) -> list[Grading]:
        """Member ``label`` asked these criteria: from the call cache, or through its own pipeline."""
        again: list[Grading] = []
        asks: list[tuple[Grading, str, Messages]] = []
        bodies: list[dict[str, Any]] = []
        requests = [(g, *g.request(judge.spec, judge.settings, self.template, self.options)) for g in grading]
        hits = self.ledger.lookup([key for _, _, _, key in requests], judge=label)
        for (g, messages, schema, key), hit in zip(requests, hits, strict=True):
            if hit is not None:
                if not self._judged(judge, g, key, _Taken(hit, messages)):
                    again.append(g)
            else:
                asks.append((g, key, messages))
                bodies.append(judge.body(messages, schema))
        for answer in call_through_ray(judge, bodies, flush=self._flush):
            g, key, messages = asks[answer.tag]
            if not self._judged(judge, g, key, self._real(judge, answer, messages, label)):
                again.append(g)
        return again

    def _judged(self, judge: RayEndpoint, g: Grading, key: str, taken: _Taken) -> bool:
        """Record one answer of member ``judge``; False when the criterion is to be asked again."""
        result = taken.result
        if isinstance(result, ModelError):
            self._commit(None, key, judge.spec, self.ledger.graded(g.failed(str(result))))
            self._tell(judge, g.judge, taken)
            return True
        row = g.answered(result)
        self._commit(result, key, judge.spec, self.ledger.graded(row))
        self._tell(judge, g.judge, taken, None if row is None else str(row.status))
        return row is not None

    # -- calls and commits ---------------------------------------------------------------------
    def _real(self, endpoint: RayEndpoint, answer: Answer, messages: Messages, caller: Caller) -> _Taken:
        """The answer of a real call, counted (calls, tokens, cost) like the engine counts them, as the
        call of ``caller`` (False: the candidate; else the member's label); a call that failed is a
        ModelError to store, unless it is fatal or the model has never answered (the run stops: the
        observer is told of the call first, as the local engine tells it)."""
        name = endpoint.spec.name
        try:
            if answer.error is not None:  # the retry loop's message, naming the model (as the engine's)
                raise ModelError(answer.error)
            completion: Completion = parse_chat_response(answer.response, endpoint.spec.model)
        except (ModelError, ProviderError) as exc:
            error = exc if isinstance(exc, ModelError) else ModelError(f"{name}: {exc}")
            taken = _Taken(error, messages, answer)
            if answer.fatal or self._answers.never_answered(name):
                self._tell(endpoint, caller, taken)
                why = "retrying cannot help" if answer.fatal else f"no call to {name} has succeeded"
                raise run_stopped(error, why) from None
            return taken
        self._answers.record(name)
        result = self.ledger.real(endpoint.spec, completion, judge=caller)
        return _Taken(result, messages, answer, completion.model)

    def _tell(self, endpoint: RayEndpoint, caller: Caller, taken: _Taken, verdict: str | None = None) -> None:
        """The observer told of one call of ``caller`` (as in `_real`), as the local engine tells it
        (`CallReport`): each retried attempt, then how the call ended (a judge call: with its
        criterion's final verdict)."""
        if self.observer is None:
            return
        role = "candidate" if caller is False else "judge"
        result, answer = taken.result, taken.answer
        for reason in answer.retries if answer is not None else ():
            self.observer.call_retried(role, endpoint.spec, reason)
        ok = None if isinstance(result, ModelError) else result
        error = None
        if ok is None:  # the type of the worker's error (FatalModelError, OutageError ...), else ours
            error = (answer.error_type if answer is not None else None) or type(result).__name__
        self.observer.call_ended(
            CallReport(
                role=role,
                spec=endpoint.spec,
                outcome="failed" if ok is None else "cached" if ok.cached else "ok",
                usage=None if ok is None else ok.usage,
                cost=None if ok is None else ok.cost,
                started=answer.started if answer is not None and answer.started else time.time(),
                seconds=None if answer is None else answer.seconds,
                response_model=taken.model,
                error=error,
                verdict=verdict,
                messages=taken.messages,
                text=None if ok is None else ok.text,
            )
        )

    def _commit(self, result: CallResult | None, key: str, spec: ModelSpec, rows: Rows) -> None:
        self._pending.extend(self.ledger.ops(result, key, spec, rows))
        if len(self._pending) >= COMMIT_EVERY:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self.store.put_rows(self.run_id, self._pending)
            self._pending = Rows()
            self.progress.update(self.counters)


class _Taken(NamedTuple):
    """A call's result as the driver took it: the answer (from the call cache, or a real call's), or
    the error of a call that failed; its request, and how it went (``answer``: None for a cached one)."""

    result: CallResult | ModelError
    messages: Messages
    answer: Answer | None = None
    model: str | None = None  # the model that answered, as the response names it


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
    interrupted_before: bool = False,
    template: GraderTemplate | None = None,
    observer: CallObserver | None = None,
) -> RunCounters:
    """Execute ``work_plan`` on Ray: the cluster at ``config.ray_address``, the one this process has
    joined already, or a new local Ray (shut down afterwards). ``interrupted_before``: see
    `RayExecutor.run`; ``observer``: told of every call (metrics, traces)."""
    require_ray()
    judges = {m.label: endpoint_for(m.parsed(), m.settings, config, environ) for m in config.panel}
    candidate = None
    if with_candidate and config.model is not None:
        candidate = endpoint_for(config.model.parsed(), config.model.settings, config, environ)
    executor = RayExecutor(
        store,
        run_id,
        candidate=candidate,
        judges=judges,
        template=template or load_template(config.grader_template, config.cache_dir),
        options=options,
        prices=PriceTable.load(config.prices),
        progress=progress,
        observer=observer,
    )
    with ray_session(config.ray_address, timeout=config.ray_connect_timeout):
        return executor.run(work_plan, interrupted_before=interrupted_before)


def leave_ray() -> None:
    """Disconnect from Ray (and stop the local Ray `join_ray` started, if any)."""
    import ray

    ray.shutdown()


def join_ray(address: str | None, *, timeout: float = DEFAULT_RAY_CONNECT_TIMEOUT) -> bool:
    """Connect to Ray unless already connected; True when this call started the connection. A cluster
    given by address must answer within ``timeout`` seconds (`check_reachable`), else a one-line
    RunError names the address."""
    import ray
    import ray.data

    remote = address not in (None, "", "auto", "local")
    if ray.is_initialized():
        if remote and address is not None:
            check_same_cluster(address, ray.get_runtime_context().gcs_address)
        return False
    if remote:
        assert address is not None
        check_reachable(address, timeout)
        # Ray's own wait for the cluster's GCS (about 1 s per try), bounded the same way
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", str(max(1, math.ceil(timeout))))
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            ray.init(
                address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
            )
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    if remote:  # a port that answers but is no Ray cluster would keep ray.init waiting for minutes
        waiting = threading.Thread(target=connect, name="healthbench-ray-init", daemon=True)
        waiting.start()
        waiting.join(timeout)
        if waiting.is_alive():
            raise RunError(
                f"cannot join the Ray cluster at {address}: no Ray cluster answered there within "
                f"{timeout:g}s (--ray-connect-timeout)"
            )
    else:
        connect()
    error = outcome[0]
    if isinstance(
        error, ConnectionError | RuntimeError | ValueError | ImportError
    ):  # (ray:// needs ray[client])
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RunError(f"cannot join the Ray cluster at {address or 'auto'}: {first}") from None
    if error is not None:
        raise error
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    return True


def check_same_cluster(address: str, joined: str) -> None:
    """A RunError unless ``address`` (``HOST:PORT``) is the cluster this process is connected to (GCS
    address ``joined``): Ray's connection is one per process, and a run must not go to another cluster
    than the one it names. A ``ray://`` client address (another port than the GCS's) is not compared."""
    if address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    joined_host, _, joined_port = joined.rpartition(":")
    try:
        ip, joined_ip = socket.gethostbyname(host.strip("[]")), socket.gethostbyname(joined_host)
        same = port == joined_port and ip == joined_ip
    except OSError:
        same = False
    if not same:
        raise RunError(
            f"cannot join the Ray cluster at {address}: this process is already connected to Ray at "
            f"{joined} (one Ray connection per process)"
        )


def check_reachable(address: str, timeout: float) -> None:
    """A RunError unless the host:port of ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) accepts a
    TCP connection within ``timeout`` seconds: Ray itself would retry a closed port for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # not HOST:PORT: Ray's own error names it
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise RunError(
            f"cannot join the Ray cluster at {address}: {reason} (waited up to {timeout:g}s, "
            "--ray-connect-timeout); is a cluster running there?"
        ) from None


class _Sessions:
    """Ray's connection is one per process (``ray.init``): how many runs or jobs of this process use
    it now, and whether one of them started it (then the last to leave stops it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.started = False


_SESSIONS = _Sessions()


def enter_ray(address: str | None, *, timeout: float | None = None) -> None:
    """Join Ray for one run or job (`join_ray`); pair each call with `exit_ray`."""
    with _SESSIONS.lock:
        started = join_ray(address, timeout=DEFAULT_RAY_CONNECT_TIMEOUT if timeout is None else timeout)
        _SESSIONS.users += 1
        _SESSIONS.started = _SESSIONS.started or started


def exit_ray() -> None:
    """One run or job is done with Ray (finished, failed or cancelled): the last one to leave stops the
    Ray that this process started (a local Ray, no address given), so that it never outlives the
    work that needed it; a cluster joined by address is only disconnected from."""
    with _SESSIONS.lock:
        _SESSIONS.users -= 1
        if _SESSIONS.users == 0 and _SESSIONS.started:
            _SESSIONS.started = False
            leave_ray()


@contextmanager
def ray_session(address: str | None, *, timeout: float | None = None) -> Iterator[None]:
    """Joined to Ray for the block (`enter_ray`, `exit_ray`)."""
    enter_ray(address, timeout=timeout)
    try:
        yield
    finally:
        exit_ray()
