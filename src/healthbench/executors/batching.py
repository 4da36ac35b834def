"""``--batch``: the engine's calls answered through the provider's batch API instead of one request each.

This is a transport, not a second engine. The engine builds the same request (same messages, same
cache key) and asks `BatchCaller.generate` instead of the model; the caller queues the request,
submits queued requests as provider batches (split by the provider's request and byte limits), polls
them, and resolves each waiting call with its answer, which the engine then commits, re-asks (a judge
answer without a verdict) and counts exactly as an online answer.

Crash safety: a batch's request set (custom_id = the call's cache key → run, conversation, repeat,
criterion, attempt) is committed to the store before it is submitted, and its provider id as soon as
the provider has created it. A restarted run (``--resume``) polls the batches whose answers are not all
in the call cache yet, and the engine's requests for those keys wait on them: nothing is submitted
twice, whatever ``--batch`` the restart gives: a batch of an earlier session is polled and its answers
used even when its role is no longer batched (``--batch none``: only the calls in no batch go online).
Only a process killed between the provider creating a batch and the store recording its id (one HTTP
round trip) leaves a batch the next session does not know about; its requests are then submitted
again, and the line that says so says the provider may have created (and bill) it.

A batch the provider no longer knows (404: expired and purged, deleted, another account's) is lost:
its unanswered requests go into a new batch (or online, with ``fallback="online"`` or when their
role is no longer batched), said in one line.

Failures: an errored, expired or canceled request is submitted again in a later batch, at most
``max_retries`` times (like an online call's retries), or, with ``fallback="online"``, asked online.
A batch that fails (or is cancelled) as a whole is reported in one line and submitted again once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from healthbench.errors import ConfigError, FatalModelError, ModelError, RunError
from healthbench.executors.progress import RunCounters
from healthbench.models.base import Completion, Messages
from healthbench.models.batch_api import BatchApi, BatchStatus, RequestFailure, batch_api, line_bytes
from healthbench.models.limits import ManagedModel
from healthbench.store.batches import BatchLedger, BatchRequestRow

Role = Literal["candidate", "judge"]


@dataclass(frozen=True)
class BatchOptions:
    roles: frozenset[str]  # the roles whose calls go through batches: {"judge"} or both (or none)
    # roles of batches of an earlier session (the run resumed with another --batch): polled, and the
    # calls whose requests they hold wait on them, but no new batch is made for these roles
    poll_roles: frozenset[str] = frozenset()
    fallback: Literal["retry", "online"] = "retry"
    poll_interval: float = 30.0  # longest wait between two polls of a batch (the first is after 1 s)
    linger: float = 2.0  # a partial batch is submitted once no request has come for this long
    max_wait: float = 60.0  # ... or once its oldest request has waited this long
    max_retries: int = 8  # submissions again of an errored or expired request
    max_requests: int | None = None  # per batch (None: the provider's limit)
    max_bytes: int | None = None  # per batch file (None: the provider's limit)


@dataclass(frozen=True, slots=True)
class CallTag:
    """What a call answers: stored with its batch request (criterion -1: the candidate's answer)."""

    item_id: str
    repeat: int
    criterion: int
    attempt: int
    judge: str = ""  # the panel member asked (its label); '': the candidate


@dataclass(frozen=True)
class BatchAnswer:
    completion: Completion
    batch: bool  # answered by a batch (batch price); False: asked online after failing in batches
    shared: bool = False  # the same request (same key) asked twice at once: answered, and paid, once


@dataclass
class _Pending:
    """A request waiting for its answer. Its batch line is built when it is submitted (and again if it
    is submitted again), so a queued request holds no copy of its prompt beyond the engine's."""

    key: str
    tag: CallTag
    messages: Messages
    schema: dict[str, Any] | None
    size: int  # bytes of its batch line


# a queue of requests to batch: (role, member); member '' for the candidate. A provider batch holds the
# requests of one model, so each member of a judge panel has its own queue and batches
QueueKey = tuple[str, str]


@dataclass
class _Queue:
    """The requests of one role (of one member of the judge panel) waiting to be put in a batch."""

    role: Role
    member: str  # the judge's label ('' for the candidate)
    model: ManagedModel
    api: BatchApi
    items: list[_Pending] = field(default_factory=list)
    first: float = 0.0  # monotonic time the oldest queued request came
    last: float = 0.0  # ... and the newest
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class BatchCaller:
    """Answers the engine's calls of the batched roles through provider batches (see the module doc)."""

    def __init__(
        self,
        ledger: BatchLedger,
        options: BatchOptions,
        counters: RunCounters,
        models: dict[QueueKey, ManagedModel],
    ) -> None:
        """``models``: the candidate's (``("candidate", "")``) and each judge's (``("judge", label)``,
        the chair first)."""
        self.ledger = ledger
        self.options = options
        self.counters = counters
        self.queues: dict[QueueKey, _Queue] = {}
        for (role, member), model in models.items():
            if role not in options.roles | options.poll_roles:
                continue
            api = batch_api(model.provider)
            if api is None:
                raise ConfigError(
                    f"--batch: {model.spec.name} has no batch API; batches need an OpenAI, Anthropic or "
                    "OpenAI-compatible (/v1/files + /v1/batches) model"
                )
            self.queues[role, member] = _Queue(role, member, model, api)  # type: ignore[arg-type]
        # the chair: whose queue polls a judge batch stored before panels (its requests name no member)
        members = [member for role, member in models if role == "judge"]
        self._chair = members[0] if members else ""
        self._panel = len(members) > 1
        self._waiters: dict[str, list[asyncio.Future[BatchAnswer]]] = {}
        self._requests: dict[str, _Pending] = {}
        self._ready: dict[str, Completion | RequestFailure] = {}
        self._in_batch: dict[str, int] = {}  # key -> local id of the batch that holds it
        self._tries: dict[str, int] = {}  # key -> batches submitted with it (across sessions)
        self._status: dict[int, tuple[str, BatchStatus]] = {}  # live batches: local id -> (role, status)
        self._tasks: set[asyncio.Task[None]] = set()
        self._error: BaseException | None = None  # a submitter or poller died of it: no answer will come

    def handles(self, role: str, key: str) -> bool:
        """Whether call ``key`` of ``role`` is answered here: every call of a batched role, and a call
        whose request waits in (or was answered by) a batch of an earlier session."""
        if role in self.options.roles:
            return True
        known = any(queue_role == role for queue_role, _ in self.queues)
        return known and (key in self._in_batch or key in self._ready)

    def _named(self, queue: _Queue) -> str:
        """How a queue's batches are named in lines: its role, and its member in a panel of judges."""
        return f"{queue.role} {queue.member}" if self._panel and queue.role == "judge" else queue.role

    def _queue_of(self, role: str, member: str) -> _Queue | None:
        """The queue of ``role``'s calls to ``member`` (a judge batch of before panels: the chair's)."""
        if role == "judge" and not member:
            member = self._chair
        return self.queues.get((role, member))

    @property
    def submits(self) -> bool:
        """Whether new batches are made (False: only an earlier session's batches are polled)."""
        return bool(self.options.roles)

    def _batched(self, queue: _Queue) -> bool:
        return queue.role in self.options.roles

    # -- lifecycle ------------------------------------------------------------------------------
    def note(self, line: str) -> None:
        """One line on a batch event (a batch failed as a whole, batches abandoned by a crash)."""
        self.counters.batch_events.append(line)

    def start(self, cached: Callable[[Iterable[str]], set[str]]) -> None:
        """Pick up this run's batches from the store (a restart polls those whose answers are not all
        in the call cache: ``cached(keys)`` says which of its requests' keys are) and start the
        submitters."""
        abandoned = self.ledger.abandon_unsubmitted()
        if abandoned:
            self.note(
                f"{len(abandoned)} batch(es) whose provider id was never stored (the process stopped while "
                f"submitting them, at {', '.join(a.created_at[:19].replace('T', ' ') for a in abandoned)} "
                "UTC): the provider may have created them, and then bills them; their requests are "
                "submitted again. To find one, list your batches at the provider (OpenAI: GET "
                "/v1/batches; Anthropic: GET /v1/messages/batches) created at that time, and cancel it"
            )
        self._tries = self.ledger.submissions()
        latest: dict[str, int] = {}
        member: dict[int, str] = {}  # batch -> the judge its requests ask (one model per batch)
        records = [b for b in self.ledger.batches() if b.batch_id is not None]
        for record in records:
            for row in self.ledger.requests(record.id):
                latest[row.custom_id] = record.id
                member[record.id] = row.judge
        answered = cached(latest) if latest else set()  # this run's batch requests only
        waiting: dict[str, int] = {}  # role not batched this session -> its requests waiting in batches
        for record in records:
            queue = self._queue_of(record.role, member.get(record.id, ""))
            outstanding = [k for k, local in latest.items() if local == record.id and k not in answered]
            if queue is None or not outstanding or record.state == "lost":  # lost: asked again as new
                continue
            for key in outstanding:
                self._in_batch[key] = record.id
            assert record.batch_id is not None
            self.counters.batches_resumed += 1
            if not self._batched(queue):
                waiting[record.role] = waiting.get(record.role, 0) + len(outstanding)
            self._spawn(self._poll(queue, record.id, record.batch_id, record.resubmit_of))
        for role, count in sorted(waiting.items()):
            self.note(
                f"{count} {role} request(s) wait in provider batches of an earlier session: their "
                f"answers are used when they come (not asked online again); the {role}'s other calls "
                "are asked online"
            )
        for queue in self.queues.values():
            if self._batched(queue):
                self._spawn(self._submitter(queue))

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def cancel_provider_batches(self) -> int:
        """Cancel this run's provider batches still running (a cancelled service job); how many."""
        cancelled = 0
        members = self.ledger.members()
        for record in self.ledger.batches():
            queue = self._queue_of(record.role, members.get(record.id, ""))
            if (
                queue is None
                or record.batch_id is None
                or record.state
                not in (
                    "validating",
                    "in_progress",
                    "finalizing",
                )
            ):
                continue
            await queue.model.call(partial(queue.api.cancel, record.batch_id))
            self.ledger.update(record.id, "cancelled", record.done, record.failed, "cancelled by the user")
            cancelled += 1
        return cancelled

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        raised = task.exception()
        error: BaseException = (
            raised
            if isinstance(raised, FatalModelError)
            else RunError(
                f"{raised} (provider batches can no longer be submitted or polled; everything finished "
                "so far is saved and the batches keep running: resume the run to poll them again)"
            )
        )
        self._error = error
        for waiters in self._waiters.values():  # nothing would ever answer them: stop the run
            for future in waiters:
                if not future.done():
                    future.set_exception(error)
        self._waiters.clear()

    # -- the engine's side ----------------------------------------------------------------------
    async def generate(
        self, role: str, key: str, tag: CallTag, messages: Messages, schema: dict[str, Any] | None
    ) -> BatchAnswer:
        """The answer to one call, from a batch (or online after failing in batches)."""
        if self._error is not None:
            raise self._error
        queue = self._queue_of(role, tag.judge)
        assert queue is not None, f"no batch queue for {role} {tag.judge!r}"
        future: asyncio.Future[BatchAnswer] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(key, [])
        waiters.append(future)
        if len(waiters) == 1:
            size = line_bytes(queue.api.line(key, queue.api.body(messages, schema)))
            self._requests[key] = _Pending(key, tag, messages, schema, size)
            if key in self._ready:  # answered by a batch of an earlier session
                self._deliver(queue, key, self._ready.pop(key))
            elif key not in self._in_batch:
                self._enqueue(queue, self._requests[key])
        return await future

    def _enqueue(self, queue: _Queue, pending: _Pending) -> None:
        now = time.monotonic()
        if not queue.items:
            queue.first = now
        queue.items.append(pending)
        queue.last = now
        queue.wake.set()

    def _deliver(self, queue: _Queue, key: str, outcome: Completion | RequestFailure) -> None:
        """A batch's outcome for ``key``: answer its waiters, or retry it."""
        waiters = self._waiters.get(key)
        if not waiters:  # nobody asks (yet): a batch of an earlier session answered before the engine
            self._ready[key] = outcome
            return
        if isinstance(outcome, Completion):
            self._answer(key, [BatchAnswer(outcome, batch=True, shared=i > 0) for i in range(len(waiters))])
            return
        self.counters.batch_failed_requests += 1
        pending = self._requests[key]
        if self.options.fallback == "online" or not self._batched(queue):
            self.counters.batch_online += 1
            self._spawn(self._online(queue, pending))
        elif self._tries.get(key, 0) <= self.options.max_retries:
            self.counters.batch_retried += 1
            self._enqueue(queue, pending)
        else:
            tries = self._tries.get(key, 0)
            self._fail(key, ModelError(
                f"{queue.model.spec.describe()}: batch request {outcome.kind} in {tries} batches; "
                f"last error: {outcome.message}"
            ))  # fmt: skip

    def _answer(self, key: str, answers: list[BatchAnswer]) -> None:
        waiters = self._waiters.pop(key, [])
        self._requests.pop(key, None)
        for future, answer in zip(waiters, answers, strict=False):
            if not future.done():
                future.set_result(answer)

    def _fail(self, key: str, error: BaseException) -> None:
        self._requests.pop(key, None)
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_exception(error)

    async def _online(self, queue: _Queue, pending: _Pending) -> None:
        try:
            completion = await queue.model.generate(pending.messages, json_schema=pending.schema)
        except ModelError as exc:
            self._fail(pending.key, exc)
            return
        waiters = self._waiters.get(pending.key, [])
        self._answer(pending.key, [BatchAnswer(completion, False, i > 0) for i in range(len(waiters))])

    # -- submitting -----------------------------------------------------------------------------
    def _limits(self, queue: _Queue) -> tuple[int, int]:
        limits = queue.api.limits
        return (
            min(limits.max_requests, self.options.max_requests or limits.max_requests),
            min(limits.max_bytes, self.options.max_bytes or limits.max_bytes),
        )

    async def _submitter(self, queue: _Queue) -> None:
        """Submit queued requests: a full batch at once, a partial one after ``linger`` idle seconds
        or ``max_wait`` seconds after its oldest request."""
        max_requests, max_bytes = self._limits(queue)
        while True:
            await queue.wake.wait()
            queue.wake.clear()
            while queue.items:
                now = time.monotonic()
                idle = now - queue.last >= self.options.linger
                waited = now - queue.first >= self.options.max_wait
                if len(queue.items) < max_requests and not idle and not waited:
                    deadline = min(queue.last + self.options.linger, queue.first + self.options.max_wait)
                    await asyncio.sleep(max(0.001, deadline - now))
                    continue
                chunk: list[_Pending] = []
                size = 0
                while queue.items and len(chunk) < max_requests and size + queue.items[0].size <= max_bytes:
                    size += queue.items[0].size
                    chunk.append(queue.items.pop(0))
                if not chunk:  # a single request larger than the byte limit
                    pending = queue.items.pop(0)
                    self._fail(
                        pending.key, ModelError(f"request of {pending.size} bytes exceeds the batch limit")
                    )
                    continue
                if queue.items:
                    queue.first = time.monotonic()
                await self._submit(queue, chunk)

    async def _submit(self, queue: _Queue, chunk: list[_Pending], resubmit_of: int | None = None) -> None:
        rows = [
            BatchRequestRow(p.key, p.tag.item_id, p.tag.repeat, p.tag.criterion, p.tag.attempt, p.tag.judge)
            for p in chunk
        ]
        local = self.ledger.add(queue.role, queue.model.spec.provider, rows, resubmit_of=resubmit_of)
        for p in chunk:
            self._in_batch[p.key] = local
        api = queue.api
        try:  # the lines are made while the file is written (again on a retry), never all held at once
            batch_id = await queue.model.call(
                lambda: api.submit(api.line(p.key, api.body(p.messages, p.schema)) for p in chunk)
            )
        except ModelError as exc:
            self.ledger.update(local, "failed", 0, len(chunk), str(exc))
            for p in chunk:
                self._in_batch.pop(p.key, None)
                self._fail(p.key, exc)
            return
        self.ledger.submitted(local, batch_id)
        for p in chunk:
            self._tries[p.key] = self._tries.get(p.key, 0) + 1
        self.counters.batches_submitted += 1
        self.counters.batch_requests += len(chunk)
        self._spawn(self._poll(queue, local, batch_id, resubmit_of))

    # -- polling --------------------------------------------------------------------------------
    async def _poll(self, queue: _Queue, local: int, batch_id: str, resubmit_of: int | None) -> None:
        """Poll a batch until it ends (first after 1 s, then twice as long each time, up to
        ``poll_interval``: a small batch is seen done soon, a long one is not polled needlessly), then
        hand out its answers by custom_id."""
        wait = min(1.0, self.options.poll_interval)
        while True:
            status = await queue.model.call(lambda: queue.api.poll(batch_id))
            if status.state == "lost":  # its last known counts stay recorded
                self.ledger.lose(local, status.error)
            else:
                self.ledger.update(local, status.state, status.done, status.failed, status.error)
            self._status[local] = (self._named(queue), status)
            self._show()
            if status.terminal:
                break
            await asyncio.sleep(wait)
            wait = min(2 * wait, self.options.poll_interval)
        keys = [k for k, holder in self._in_batch.items() if holder == local]
        if status.state == "lost":
            self._lose(queue, local, keys, batch_id, status)
            return
        whole = status.state in ("failed", "cancelled") or (status.state == "expired" and status.done == 0)
        if whole and any(status.results_ref):  # what it did answer before it ended is kept
            outcomes = await queue.model.call(lambda: queue.api.results(status))
            for key in [k for k in keys if isinstance(outcomes.get(k), Completion)]:
                del self._in_batch[key]
                self._deliver(queue, key, outcomes[key])
            keys = [k for k in keys if k in self._in_batch]
        if whole and keys:
            again = resubmit_of is None and self._batched(queue)
            what = (
                "submitting it again"
                if again
                else "asking its requests online"
                if not self._batched(queue)
                else "it was already a resubmission: its requests fail"
            )
            self.note(
                f"{self._named(queue)} batch {batch_id} ({len(keys)} requests) {status.state}"
                f"{': ' + status.error if status.error else ''}; {what}"
            )
            for key in keys:
                del self._in_batch[key]
            if again:
                self.counters.batches_resubmitted += 1
                known = [self._requests[k] for k in keys if k in self._requests]
                for key in keys:
                    if key not in self._requests:
                        self._ready[key] = RequestFailure(status.state, f"batch {batch_id} {status.state}")
                if known:
                    await self._submit(queue, known, resubmit_of=local)
            else:
                failure = RequestFailure(status.state, f"batch {batch_id} {status.state} twice")
                for key in keys:
                    self._tries[key] = self.options.max_retries + 1
                    self._deliver(queue, key, failure)
        elif not whole:
            outcomes = await queue.model.call(lambda: queue.api.results(status))
            missing = RequestFailure("missing", f"no result for the request in batch {batch_id}")
            for key in keys:
                del self._in_batch[key]
                self._deliver(queue, key, outcomes.get(key, missing))
        self._status.pop(local, None)
        self._show()

    def _lose(self, queue: _Queue, local: int, keys: list[str], batch_id: str, status: BatchStatus) -> None:
        """A batch the provider no longer knows: its unanswered requests are asked again (a new batch,
        or online), once each like an errored request (within ``max_retries``)."""
        online = self.options.fallback == "online" or not self._batched(queue)
        self.note(
            f"{self._named(queue)} batch {batch_id} is lost ({status.error}); its {len(keys)} unanswered "
            f"request(s) are {'asked online' if online else 'submitted in a new batch'}"
        )
        failure = RequestFailure("lost", status.error or f"batch {batch_id} lost")
        for key in keys:
            del self._in_batch[key]
            self._deliver(queue, key, failure)
        self._status.pop(local, None)
        self._show()

    def _show(self) -> None:
        """The progress line's batch part: states and counts, e.g. ``judge batch in_progress 120/500``."""
        parts = [
            f"{role} batch {s.state} {s.done}/{s.total}"
            for role, s in self._status.values()
            if not s.terminal
        ]
        queued = sum(len(q.items) for q in self.queues.values())
        if queued:
            parts.append(f"{queued} queued")
        self.counters.batches = ", ".join(parts) or None
