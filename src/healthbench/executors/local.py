"""The one async engine behind `run`, `regrade`, `meta-eval` and service jobs.

A work item is one (item, repeat): a conversation to answer (or a fixed completion to judge) and the
criteria to grade it on. The engine skips everything already in the store, answers from the call cache
when it can, and otherwise calls the models with bounded concurrency. Every finished call is committed
(call cache + sample or grade row, one transaction) before its concurrency slot is released, so a
``kill -9`` loses at most ``max_connections`` calls; so does a store failure (a full disk, a stopped
PostgreSQL server), after which no further call starts while the run stops. Verdicts are stored under their
(run, item, repeat, criterion, judge) key, never matched up by arrival order. A panel of judges is graded
by the same path: every member is asked every criterion with its own model (a single judge is a panel of
one).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from healthbench.errors import FatalModelError, HealthBenchError, ModelError, StoreError
from healthbench.executors.batching import BatchCaller, CallTag
from healthbench.executors.grading import (
    Ask,
    Caller,
    CallResult,
    EngineOptions,
    Grading,
    Ledger,
    Messages,
    Plan,
    WorkItem,
    no_candidate,
    run_stopped,
    sample_request,
)
from healthbench.executors.progress import CallObserver, CallReport, NoProgress, ProgressSink, RunCounters
from healthbench.grading.template import GraderTemplate
from healthbench.models.base import ChatModel, Completion
from healthbench.models.limits import ConnectionPool, Gate
from healthbench.models.pricing import PriceTable
from healthbench.store.runs import Rows, Store
from healthbench.store.writer import StoreWriter


class Engine:
    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        candidate: ChatModel | None,
        judges: Mapping[str, ChatModel],
        template: GraderTemplate,
        options: EngineOptions | None = None,
        prices: PriceTable | None = None,
        progress: ProgressSink | None = None,
        pool: ConnectionPool,
        batcher: Callable[[RunCounters], BatchCaller] | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        self.store = store
        self.observer = observer  # told of every call as it ends (metrics, traces)
        self.pool = pool  # the models' endpoints: outages for the progress line, and whether they answer
        self.run_id = run_id
        self.candidate = candidate
        self.judges = dict(judges)  # the panel: each member's model by its label, the chair first
        self.template = template
        self.options = options or EngineOptions()
        self.progress = progress or NoProgress()
        self.ledger = Ledger(store, run_id, prices or PriceTable())
        self.counters = self.ledger.counters
        # calls from their start until what they produced is committed, on every endpoint: bounds what a
        # kill -9 loses (an endpoint's own gate is released as soon as its answer arrives)
        self._slots = Gate(self.options.max_connections)
        # items in progress: enough to keep every slot busy, few enough that a 5,000-conversation run
        # does not hold 60,000 rendered judge prompts in memory at once
        open_items = 2 * self.options.max_connections
        # criteria being graded at once (each holds its rendered judge prompt until its row is committed):
        # twice the calls in flight keeps every slot busy; without it, every open item's criteria wait
        # at once (14,000 prompts at --max-connections 512)
        self._open_grades: _Admission | None = _Admission(2 * self.options.max_connections)
        # --batch: the calls of the batched roles go through provider batches (executors/batching.py)
        self.batcher = batcher(self.counters) if batcher is not None else None
        if self.batcher is not None and self.batcher.submits:
            open_items = max(open_items, self.options.batch_open_items)
            self._open_grades = None  # a batch is as large as the requests waiting together
        self._open_items = Gate(open_items)
        self._writer: StoreWriter | None = None
        self._lookups = _CacheLookups(self.ledger)
        # the store failed to commit: the run stops, and no call starts meanwhile (its answer would be
        # lost too), so that what a resume asks again stays within max_connections calls
        self._store_failure: StoreError | None = None

    async def run(self, plan: Plan, *, interrupted_before: bool = False) -> RunCounters:
        """Do the plan's pending work (`Plan.pages`, read as items can be opened); counters start
        from what was already done.
        ``interrupted_before``: an earlier session of the run ended without finishing (killed, Ctrl-C):
        the calls it had in flight were lost and are asked again, at most one per connection slot."""
        lost = self.options.max_connections if interrupted_before else None
        c = self.ledger.start(plan, repeat_bound=lost)
        self.progress.update(c)
        ticker = asyncio.create_task(self._tick())
        if self.batcher is not None:
            self.batcher.start(self.store.cache_has)
        try:
            async with StoreWriter(self.store, self.run_id) as writer:
                self._writer = writer
                try:
                    async with asyncio.TaskGroup() as group:
                        pages = plan.pages()
                        # a page is read only when its first item can be opened: the items alive are
                        # the open ones and the rest of one page. It is read on the event loop, not in
                        # a worker thread: there, each page's memory would stay in that thread's
                        # malloc arena (+17 MB of RSS at 5,000 conversations: benchmarks/full_run.py)
                        while page := next(pages, None):
                            for w, completion, missing in page:  # a task per open item, not per item
                                await self._open_items.acquire()
                                group.create_task(self._item(w, completion, missing))
                            del page  # each item's state lives in its task, dropped once committed
                except BaseExceptionGroup as eg:
                    raise _first_error(eg) from None
        finally:
            ticker.cancel()
            if self.batcher is not None:
                await self.batcher.aclose()
            self._writer = None
            self.progress.update(c)
        return c

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.options.progress_every)
            self.counters.retrying = self.pool.outage_note(time.monotonic())
            self.progress.update(self.counters)

    # -- one work item -------------------------------------------------------------------------
    async def _item(self, w: WorkItem, completion: str | None, missing: list[Ask]) -> None:
        """One open item (its `_open_items` place taken by `run`), released when it is done."""
        try:
            await self._sample_and_grade(w, completion, missing)
        finally:
            self._open_items.release()

    async def _sample_and_grade(self, w: WorkItem, completion: str | None, missing: list[Ask]) -> None:
        if completion is None:
            completion = await self._sample(w)
            if completion is None:
                return
        # a task group, not gather: when one grade stops the run, its siblings are cancelled instead
        # of running on (and reopening the model's HTTP session) after the models are closed
        gradings = [Grading.start(w, completion, i, n, self.options, judge) for i, n, judge in missing]
        warm, gradings = self._warmers(gradings)
        if warm:
            # warm-first: each member's first criterion call writes the shared prefix to its provider's
            # cache before its siblings are sent (other items fill the connection slots meanwhile);
            # they are admitted alone, so that items waiting on them do not hold their siblings' places
            await self._grade_together(warm)
        await self._grade_together(gradings)

    def _warmers(self, gradings: list[Grading]) -> tuple[list[Grading], list[Grading]]:
        """Warm-first (`EngineOptions.warm_first`): the first criterion of each member that warms first
        and has siblings to grade here, and the rest (with ``--batch``, the first ones go in batches of
        their own and the rest once those have answered)."""
        by_member: dict[str, list[int]] = {}
        for n, g in enumerate(gradings):
            if g.judge in self.options.warm_first:
                by_member.setdefault(g.judge, []).append(n)
        first = {ns[0] for ns in by_member.values() if len(ns) > 1}
        return (
            [g for n, g in enumerate(gradings) if n in first],
            [g for n, g in enumerate(gradings) if n not in first],
        )

    async def _grade_together(self, gradings: list[Grading]) -> None:
        """Grade these criteria at once: admitted together (asked together, as identical requests of one
        conversation always were), each committed as it ends."""
        if not gradings:
            return
        if self._open_grades is not None:
            await self._open_grades.enter(len(gradings))
        async with asyncio.TaskGroup() as group:
            for g in gradings:
                group.create_task(self._open_grade(g))

    async def _open_grade(self, g: Grading) -> None:
        try:
            await self._grade(g)
        finally:
            if self._open_grades is not None:
                self._open_grades.leave()

    async def _sample(self, w: WorkItem) -> str | None:
        model = self.candidate
        if model is None:
            raise no_candidate(w)
        messages, key = sample_request(model.spec, model.settings, w)
        try:
            tag = CallTag(w.item_id, w.repeat, -1, 0)
            async with self._call(model, key, messages, None, tag) as result:
                rows, text = self.ledger.sampled(w, model.settings, result)
                await self._commit(result, key, model, rows)
        except FatalModelError:
            raise
        except ModelError as exc:
            self._check_alive(model, exc)
            rows, text = self.ledger.sampled(w, model.settings, str(exc))
            await self._commit(None, key, model, rows)
        return text

    async def _grade(self, g: Grading) -> None:
        """Ask the member until `Grading` has a final row (re-asks: no usable verdict), then commit it."""
        judge = self.judges[g.judge]
        while True:
            messages, schema, key = g.request(judge.spec, judge.settings, self.template, self.options)
            try:
                tag = CallTag(g.w.item_id, g.w.repeat, g.index, g.attempt, g.judge)
                call = self._call(judge, key, messages, schema, tag)
                async with call as result:
                    row = g.answered(result)
                    call.verdict = None if row is None else str(row.status)
                    await self._commit(result, key, judge, self.ledger.graded(row))
                    if row is not None:
                        return
            except FatalModelError:
                raise
            except ModelError as exc:
                self._check_alive(judge, exc)
                await self._commit(None, key, judge, self.ledger.graded(g.failed(str(exc))))
                return

    def _check_alive(self, model: ChatModel, exc: ModelError) -> None:
        """A model that has never answered and just exhausted its retries is down or misconfigured: stop
        the run with that error instead of failing every remaining call the same way."""
        if self.pool.connection(model.spec.connection_key).never_answered(model.spec.name):
            raise run_stopped(exc, f"no call to {model.spec.name} has succeeded") from None

    # -- calls ---------------------------------------------------------------------------------
    def _call(
        self, model: ChatModel, key: str, messages: Messages, schema: dict[str, Any] | None, tag: CallTag
    ) -> _Call:
        return _Call(self, model, key, messages, schema, tag)

    async def _commit(self, result: CallResult | None, key: str, model: ChatModel, rows: Rows) -> None:
        """Write the call (if it was a real call) and its rows in one transaction."""
        assert self._writer is not None
        batch = self.ledger.ops(result, key, model.spec, rows)
        if batch:
            try:
                await self._writer.put(batch)
            except StoreError as exc:
                self._store_failure = self._store_failure or exc
                raise


class _Admission:
    """How many criteria are being graded at once: an item's criteria enter together (so that they are
    asked together, as identical requests of one conversation always were), first come first served,
    once they fit under ``limit`` (or nothing else is being graded); each leaves when it is committed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inside = 0
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, n: int) -> bool:
        return self.inside == 0 or self.inside + n <= self.limit

    async def enter(self, n: int) -> None:
        if not self._queue and self._fits(n):
            self.inside += n
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((n, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # admitted, then cancelled: give it back
                self.inside -= n
                self._admit()
            raise

    def leave(self) -> None:
        self.inside -= 1
        self._admit()

    def _admit(self) -> None:
        while self._queue and self._fits(self._queue[0][0]):
            n, future = self._queue.popleft()
            if future.cancelled():
                continue
            self.inside += n
            future.set_result(None)


class _CacheLookups:
    """The call cache read for the calls about to be made: every key asked in one event-loop
    iteration is looked up in one read (`Ledger.lookup`), like the writer's group commit. Only this
    run's keys are ever read, never the whole cache."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._pending: list[tuple[str, Caller, asyncio.Future[CallResult | None]]] = []
        self._scheduled = False

    async def get(self, key: str, judge: Caller) -> CallResult | None:
        future: asyncio.Future[CallResult | None] = asyncio.get_running_loop().create_future()
        self._pending.append((key, judge, future))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._read)
        return await future

    def _read(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        try:
            answers = self._ledger.lookup([key for key, _, _ in batch], [judge for _, judge, _ in batch])
        except Exception as exc:  # a store failure: handed to every waiting call
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)


class _Call:
    """``async with engine._call(...) as result``: a cached answer, or a model call holding a slot
    until the caller has committed what it made of the answer."""

    __slots__ = (
        "_holding",
        "_report",
        "engine",
        "key",
        "messages",
        "model",
        "schema",
        "tag",
        "verdict",
    )

    def __init__(
        self,
        engine: Engine,
        model: ChatModel,
        key: str,
        messages: Messages,
        schema: dict[str, Any] | None,
        tag: CallTag,
    ) -> None:
        self.engine, self.model, self.key, self.messages, self.schema = engine, model, key, messages, schema
        self.tag = tag
        self._holding = False
        self.verdict: str | None = None
        self._report: tuple[CallResult, float, float | None, str | None] | None = None

    @property
    def role(self) -> str:
        """``judge`` (a call of a panel member, named by the tag) or ``candidate``."""
        return "candidate" if self.tag.criterion < 0 else "judge"

    @property
    def caller(self) -> Caller:
        """Whose call this is, as counted (`Ledger`): False the candidate's, else the member's label."""
        return self.tag.judge if self.role == "judge" else False

    async def __aenter__(self) -> CallResult:
        e = self.engine
        role = self.role
        hit = await e._lookups.get(self.key, self.caller)
        if hit is not None:
            return self._observed(hit, None, None)
        if e.batcher is not None and e.batcher.handles(role, self.key):
            return self._observed(await self._batched(role), None, None)
        await e._slots.acquire()
        self._holding = True
        if e._store_failure is not None:  # the run is stopping: this call's answer could not be kept
            self._release()
            raise e._store_failure
        started = time.time() if e.observer is not None else 0.0
        try:
            completion: Completion = await self.model.generate(self.messages, json_schema=self.schema)
        except BaseException as exc:
            self._release()
            if e.observer is not None and isinstance(exc, ModelError):
                self._tell(None, started, time.time() - started, None, type(exc).__name__)
            raise
        result = e.ledger.real(self.model.spec, completion, judge=self.caller)
        if e.observer is not None:
            self._report = (result, started, time.time() - started, completion.model)
        return result

    def _observed(self, result: CallResult, seconds: float | None, model: str | None) -> CallResult:
        """A cached or batched answer, told to the observer when the caller is done with it."""
        if self.engine.observer is not None:
            self._report = (result, time.time(), seconds, model)
        return result

    def _tell(
        self,
        result: CallResult | None,
        started: float,
        seconds: float | None,
        model: str | None,
        error: str | None = None,
    ) -> None:
        e = self.engine
        assert e.observer is not None
        outcome = "failed" if result is None else "cached" if result.cached else "ok"
        e.observer.call_ended(
            CallReport(
                role=self.role,
                spec=self.model.spec,
                outcome=outcome,
                usage=None if result is None else result.usage,
                cost=None if result is None else result.cost,
                started=started,
                seconds=seconds,
                response_model=model,
                error=error,
                verdict=self.verdict,
                messages=self.messages,
                text=None if result is None else result.text,
            )
        )

    async def _batched(self, role: str) -> CallResult:
        """The call answered through a provider batch: no slot is held while it waits (the batch and
        its requests are in the store), and it is priced at the provider's batch rate."""
        e = self.engine
        assert e.batcher is not None
        answer = await e.batcher.generate(role, self.key, self.tag, self.messages, self.schema)
        judge = self.caller
        if answer.shared:
            return e.ledger.shared(answer.completion.text, answer.completion.usage, judge=judge)
        return e.ledger.real(self.model.spec, answer.completion, batch=answer.batch, judge=judge)

    async def __aexit__(self, *exc: object) -> None:
        self._release()
        if self._report is not None:
            self._tell(*self._report)

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            self.engine._slots.release()


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception to surface from a task group: a HealthBenchError if any, else the first one."""
    flat: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        current = stack.pop()
        if isinstance(current, BaseExceptionGroup):
            stack.extend(reversed(current.exceptions))
        else:
            flat.append(current)
    for exc in flat:
        if isinstance(exc, HealthBenchError):
            return exc
    return flat[0]
