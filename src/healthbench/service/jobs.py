"""Background workers that run jobs through the one engine, off the HTTP event loop.

`healthbench serve` runs them in a child process of the HTTP server (`WorkerProcess`), so a job at
hundreds of connections never competes with status requests for one interpreter lock. One thread
there owns one asyncio loop on which every job of this process runs as a task, so that jobs
running at once share one connection budget per endpoint (one `ConnectionPool`). Jobs are claimed
from the store with a lease that the worker renews; a job whose lease ran out (its process died,
even by ``kill -9``) is claimed again and the engine resumes it from the store.

A store outage (PostgreSQL restarted or stopped, a SQLite file that cannot be written) never ends
the workers: claims are retried with a growing pause (`STORE_RETRY_MAX` at most), a job whose store
calls failed is handed back as pending once the store answers again (and claimed again, the engine
resuming its run from what was committed), and `JobWorkers.health` says the workers wait for the
store meanwhile (what ``/health/ready`` reports). The outage's start and end are one log line each.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import multiprocessing
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from healthbench.config import HOW_FIELDS, RunConfig
from healthbench.defaults import (
    DEFAULT_LEASE,
    DEFAULT_PROGRESS_EVERY,
    DEFAULT_SERVICE_CONNECTIONS,
    DEFAULT_SERVICE_WORKERS,
)
from healthbench.errors import HealthBenchError, ModelError, RunBusyError, StoreError
from healthbench.executors.progress import CallObserver, RunCounters, observing, plain_line, resumed_note
from healthbench.executors.ray import enter_ray, exit_ray
from healthbench.models.limits import ConnectionLimits, ConnectionPool
from healthbench.runner.meta_eval import META_EVAL
from healthbench.runner.run import EVAL, cancel_batches, execute, prepare_regrade
from healthbench.runner.work import samples_answers
from healthbench.service.health import WorkerHealth
from healthbench.service.logs import configure_logging, job_context
from healthbench.service.offline import METRICS, label_metrics, run_import
from healthbench.service.operations import job_body, job_config, regrade_job_config
from healthbench.service.schemas import StatusDetails, cost_details
from healthbench.service.uploads import public_message, uploads_folder
from healthbench.store.jobs import JobRecord, JobStore
from healthbench.store.lease import LEASE_TTL
from healthbench.store.runs import RunRecord, Store
from healthbench.telemetry import Tracing, maybe_span, tracing_requested

T = TypeVar("T")
LOG = logging.getLogger("healthbench.service")
POLL = 0.25  # seconds between looks for new jobs and for cancellations
STORE_RETRY_MAX = 5.0  # seconds between two tries at most while the store does not answer
STORE_FAILURES = (StoreError, SQLAlchemyError)
HEALTH_STALE = 10.0  # seconds after which the worker process's last word on its health is not believed
SHARED_HEALTH_BYTES = 1024
PR_SET_PDEATHSIG = 1  # prctl options (linux/prctl.h)
PR_SET_CHILD_SUBREAPER = 36
END_GRACE = 1.0  # seconds a leftover process gets between SIGTERM and SIGKILL
# the worker process yields the CPU to the HTTP process: a job at hundreds of connections uses
# every cycle it gets, while a status poll needs a fraction of a millisecond of it, now
WORKER_NICENESS = 5


@dataclass(frozen=True)
class WorkerSettings:
    workers: int = DEFAULT_SERVICE_WORKERS  # jobs running at once in this process
    lease: float = DEFAULT_LEASE
    connections: int = DEFAULT_SERVICE_CONNECTIONS
    prices: str | None = None  # `serve --prices FILE`: the price file every job's calls are priced with


@dataclass(frozen=True)
class Observability:
    """What a worker tells of its jobs (nothing by default): each model call (``observer``), each job
    session's kind, final status and seconds (``job_ended``), and traces (``tracing``)."""

    observer: CallObserver | None = None
    job_ended: Callable[[str, str, float], None] | None = None
    tracing: Tracing | None = None


def details_of(counters: RunCounters) -> dict[str, float | int]:
    total = counters.samples_total + counters.criteria_total
    done = counters.samples_done + counters.criteria_done
    return StatusDetails(
        progress=round(100.0 * done / total, 2) if total else 0.0,
        samples_done=counters.samples_done,
        samples_total=counters.samples_total,
        samples_failed=counters.samples_failed,
        criteria_done=counters.criteria_done,
        criteria_total=counters.criteria_total,
        ungraded=counters.ungraded,
        input_tokens=counters.tally.input_tokens,
        output_tokens=counters.tally.output_tokens,
        cost=counters.tally.known_cost,  # None (unknown) when a model has no price, never 0
        **cost_details(counters.tally, counters.judge),
        batches=counters.batches,
    ).model_dump()


class StatusSink:
    """The engine's progress sink for a job: writes the counters to the job row, at most every
    ``interval`` seconds (and once more at the end), and a progress line to the job's log at most
    every ``log_every`` seconds (the line the CLI prints without a terminal), after the note of a
    session that resumed an interrupted one."""

    def __init__(
        self,
        jobs: JobStore,
        job_id: str,
        interval: float = 0.5,
        *,
        label: str = "conversations sampled",
        log_every: float = DEFAULT_PROGRESS_EVERY,
    ) -> None:
        self._jobs, self._job_id, self._interval = jobs, job_id, interval
        self._label, self._log_every = label, log_every
        self._last = 0.0
        self._last_line: float | None = None
        self._noted = False
        self.latest: RunCounters | None = None

    def update(self, counters: RunCounters) -> None:
        self.latest = counters
        now = time.monotonic()
        if not self._noted and (note := resumed_note(counters)) is not None:
            self._noted = True
            self._jobs.log(self._job_id, note)
            LOG.info(note)
        if now - self._last >= self._interval:
            self._last = now
            self.flush()
        if self._last_line is None or now - self._last_line >= self._log_every:
            self.log_line()

    def flush(self) -> None:
        if self.latest is not None:
            self._jobs.set_details(self._job_id, details_of(self.latest))

    def finish(self, counters: RunCounters) -> None:
        """The session's totals: in the job row and as the log's last progress line."""
        self.latest = counters
        self.flush()
        self.log_line()

    def log_line(self) -> None:
        if self.latest is not None:
            self._last_line = time.monotonic()
            line = plain_line(self.latest, self._label)
            self._jobs.log(self._job_id, line)
            LOG.info(line)


class JobWorkers:
    """Claims and runs jobs in a background thread until `stop`. Use as a context manager."""

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings | None = None,
        environ: Mapping[str, str] | None = None,
        seen: Observability | None = None,
    ) -> None:
        self.jobs = JobStore(store)
        self.seen = seen or Observability()
        self.store = store
        self.folder = uploads_folder(store)
        self.settings = settings or WorkerSettings()
        self.environ = dict(os.environ if environ is None else environ)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ray_started = False
        self._store_error: str | None = None  # during a store outage: its one line
        self._outage_since: float | None = None

    def __enter__(self) -> JobWorkers:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="healthbench-jobs")
        self._thread.daemon = True
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming; jobs still running are interrupted and handed back as pending."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def health(self) -> WorkerHealth:
        """Whether the workers run, and the store failure they wait out, if any."""
        running = self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()
        return WorkerHealth(running, self._store_error, self._outage_since)

    @property
    def healthy(self) -> bool:
        """Running and reaching the store (`health`)."""
        return self.health().healthy

    def _store_failed(self, exc: Exception) -> None:
        """A store call failed: the outage's first failure is logged (one line), the rest counted."""
        if self._store_error is None:
            self._outage_since = time.time()
            LOG.warning("the store does not answer (%s): running jobs are handed back, new jobs wait", exc)
        self._store_error = str(exc)

    def _store_answered(self) -> None:
        if self._store_error is not None:
            took = time.time() - (self._outage_since or time.time())
            self._store_error = self._outage_since = None
            LOG.warning("the store answers again after %.0f s: jobs are claimed again", took)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, ending early when the workers are stopped."""
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(min(POLL, deadline - time.monotonic()))

    @property
    def ray_started(self) -> bool:
        """Whether a job of this process joined Ray (its core worker then replaced our signal handlers)."""
        return self._ray_started

    def _join_ray(self, address: str | None) -> None:
        """Join Ray for one job (`enter_ray`; its `exit_ray` stops a local Ray once no job uses it)."""
        enter_ray(address)
        self._ray_started = True

    async def _main(self) -> None:
        pool = ConnectionPool(ConnectionLimits(max_connections=self.settings.connections))
        running: set[asyncio.Task[None]] = set()
        while not self._stopping.is_set():
            if len(running) < self.settings.workers:
                job = await self._when_store_answers(
                    lambda: self.jobs.claim(self.owner, time.time(), self.settings.lease)
                )
                if job is not None:
                    task = asyncio.create_task(self._run(job, pool))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    continue
            await asyncio.sleep(POLL)
        for task in list(running):
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _when_store_answers(self, call: Callable[[], T]) -> T | None:
        """``call()`` in a thread, tried again after a growing pause (`POLL` doubled up to
        `STORE_RETRY_MAX`) while the store does not answer; None if the workers stop first."""
        retry = POLL
        while not self._stopping.is_set():
            try:
                result = await asyncio.to_thread(call)
            except STORE_FAILURES as exc:
                self._store_failed(exc)
                await self._pause(retry)
                retry = min(2 * retry, STORE_RETRY_MAX)
                continue
            self._store_answered()
            return result
        return None

    async def _run(self, job: JobRecord, pool: ConnectionPool) -> None:
        """One session of a job (a span of its own when traced), its log lines marked with it, timed
        until it ends; a store failure hands it back."""
        kind = str(job.spec.get("kind", "eval"))
        started = time.monotonic()
        attributes = {"healthbench.job.kind": kind, "healthbench.workspace": job.workspace}
        with (
            job_context(job.workspace, job.name),
            maybe_span(self.seen.tracing, "healthbench job", **attributes, **{"healthbench.job": job.name}),
        ):
            try:
                await self._session(job, pool)
            except STORE_FAILURES as exc:
                self._store_failed(exc)
                await self._hand_back(job)
            finally:
                if self.seen.job_ended is not None:
                    try:
                        status = self._status(job.id) or "deleted"
                    except STORE_FAILURES:  # handed back while the store does not answer
                        status = "unknown"
                    self.seen.job_ended(kind, status, time.monotonic() - started)

    async def _hand_back(self, job: JobRecord) -> None:
        """Once the store answers again, give the job back (pending: claimed again and resumed from
        its stored run; cancelling: cancelled). If the workers stop first, its lease runs out."""
        status = await self._when_store_answers(lambda: self.jobs.hand_back(job.id, self.owner))
        if status is not None:
            message = "the store did not answer; job handed back"
            with contextlib.suppress(*STORE_FAILURES):  # the job is back either way; its log line may wait
                self._event(job, message if status == "pending" else "job cancelled")

    def _event(self, job: JobRecord, message: str) -> None:
        """A line of the job's log, also in the service's log."""
        self.jobs.log(job.id, message)
        LOG.info(message)

    async def _session(self, job: JobRecord, pool: ConnectionPool) -> None:
        if job.status == "cancelling":  # cancelled while its worker was gone
            self._cancelled(job)
            return
        self._event(job, f"job started by {self.owner}")
        work = asyncio.current_task()
        assert work is not None
        watch = asyncio.create_task(self._heartbeat(job, work))
        label = "rows (fixed answers)" if job.spec.get("kind") == "meta-eval" else "conversations sampled"
        sink = StatusSink(self.jobs, job.id, label=label)
        try:
            await self._execute_when_free(job, pool, sink)
        except asyncio.CancelledError:
            if _taken_over(watch):  # its lease ran out and another worker has it: nothing is ours
                LOG.warning("job taken over by another worker; this session stopped")
                return
            sink.flush()
            if self._stopping.is_set():  # service shutting down: another start picks it up
                self.jobs.set_status(job.id, "pending", expect=("active",))
                self.jobs.set_status(job.id, "cancelled", expect=("cancelling",))
                self._event(job, "service stopped; job handed back")
            else:
                await self._cancel_batches(job)
                self._cancelled(job)
            return
        except STORE_FAILURES:
            raise  # not the job's fault: handed back by `_run`
        except ModelError as exc:  # the endpoint's own words go to the operator's log only
            LOG.warning("model call failed for good: %s", exc)
            self._fail(job, model_failure(exc))
        except HealthBenchError as exc:
            uploads = await asyncio.to_thread(self.jobs.uploads, job.id)
            self._fail(job, public_message(str(exc), self.folder, self.store.url, uploads))
        except Exception as exc:  # a job must never take the worker down
            LOG.error("internal error", exc_info=True)
            self._fail(job, f"internal error ({type(exc).__name__})")
        else:
            sink.flush()
            if self.jobs.set_status(job.id, "completed", expect=("active",)):
                self._event(job, "job completed")
            else:  # cancel arrived after the last call: the work is done but the user asked to stop
                self._cancelled(job)
        finally:
            watch.cancel()

    def _cancelled(self, job: JobRecord) -> None:
        """End a cancelled job: its log line first, so whoever sees the status sees the line too."""
        self._event(job, "job cancelled")
        self.jobs.set_status(job.id, "cancelled")

    async def _execute_when_free(self, job: JobRecord, pool: ConnectionPool, sink: StatusSink) -> None:
        """`_execute`, waiting while another process still holds the job's run (a worker killed with
        its service lets go of the run when its pid ends, or at most the holder's lease (`LEASE_TTL`
        for a command, `--lease` for a job) after its last heartbeat): such a job is retried, not failed."""
        deadline = time.monotonic() + max(LEASE_TTL, self.settings.lease) + 5 * POLL
        said = False
        while True:
            try:
                await self._execute(job, pool, sink)
                return
            except RunBusyError as exc:
                if time.monotonic() > deadline:
                    raise
                if not said:  # once: the line names the holder and how long it may take
                    said = True
                    self._event(job, f"waiting: {exc}")
                await asyncio.sleep(4 * POLL)

    async def _cancel_batches(self, job: JobRecord) -> None:
        """A cancelled job's provider batches still running are cancelled too (--batch)."""
        try:
            cancelled = await cancel_batches(self.store, job.run_name, environ=self.environ)
        except HealthBenchError as exc:
            self.jobs.log(job.id, f"could not cancel the provider batches: {exc}")
            return
        if cancelled:
            self.jobs.log(job.id, f"{cancelled} provider batch(es) cancelled")

    def _fail(self, job: JobRecord, message: str) -> None:
        self.jobs.set_status(job.id, "error", error=message)
        self._event(job, f"job failed: {message}")

    async def _execute(self, job: JobRecord, pool: ConnectionPool, sink: StatusSink) -> None:
        uploads = await asyncio.to_thread(self.jobs.uploads, job.id)
        kind = job.spec.get("kind", "eval")
        if kind in ("import", "meta-eval-labels"):
            await asyncio.to_thread(self._offline, job, uploads)
            return
        run, config = await asyncio.to_thread(self._prepare, job, uploads)
        on_ray = config.executor == "ray"
        if on_ray:
            await asyncio.to_thread(self._join_ray, config.ray_address)
        try:
            with maybe_span(self.seen.tracing, "healthbench run", **{"healthbench.run": run.name}):
                counters = await execute(
                    self.store,
                    run,
                    config,
                    progress=sink,
                    environ=self.environ,
                    pool=pool,
                    with_candidate=samples_answers(run, config),
                    observer=self.seen.observer,
                    lease=self.settings.lease,  # a job and its run are let go of together
                )
        finally:
            if on_ray:  # finished, failed or cancelled: a local Ray stops with its last job
                await asyncio.shield(asyncio.to_thread(exit_ray))
        sink.finish(counters)
        if counters.samples_failed:
            self.jobs.log(job.id, f"{counters.samples_failed} samples failed")
        if counters.ungraded:
            self.jobs.log(job.id, f"{counters.ungraded} criteria ungraded")

    def _prepare(self, job: JobRecord, uploads: dict[str, str]) -> tuple[RunRecord, RunConfig]:
        """The run of an online job: made, or the one an earlier attempt left (taken
        over after a crash, or asked to resume) continued as `healthbench run --resume` continues
        it (`RunKind.continued`), with the job's connection and retry settings."""
        kind = job.spec.get("kind", "eval")
        if kind == "regrade":
            parent, config = regrade_job_config(self.store, job.workspace, job.spec, uploads, self.folder)
        else:
            config = job_config(job.spec, uploads, self.folder)  # also writes the uploads its settings name
        if self.settings.prices is not None:
            config = config.model_copy(update={"prices": self.settings.prices})
        run_kind = META_EVAL if kind == "meta-eval" else EVAL
        if self.store.get_run(job.run_name) is not None:
            how = config.model_dump(mode="json", include=HOW_FIELDS)
            run, config = run_kind.continued(job.run_name, store=self.store, overrides=how)
        elif kind == "regrade":
            run = prepare_regrade(self.store, parent, config, job.run_name, environ=self.environ)
        else:
            run = run_kind.prepare(self.store, config, job.run_name, environ=self.environ)
        return run, config

    def _offline(self, job: JobRecord, uploads: dict[str, str]) -> None:
        """An offline job: no model call, so no progress to report but the end."""
        body = job_body(job.spec, uploads)
        if body.kind == "import":
            details = run_import(self.store, job.run_name, body, self.jobs.drop_run)
            self.jobs.set_details(job.id, details)
            self.jobs.log(job.id, f"imported {details['samples_done']} graded samples as run {job.run_name}")
        else:
            # scored once, here (the request only checks that the uploads read), and stored: GETs read it
            self.jobs.set_result(job.id, METRICS, label_metrics(body))
            self.jobs.set_details(job.id, StatusDetails(progress=100.0).model_dump())

    async def _heartbeat(self, job: JobRecord, work: asyncio.Task[None]) -> str | None:
        """Renew the lease; cancel the job's task when it is cancelled or no longer ours (returns
        the status seen: None when another worker took the job over)."""
        renew_every = min(self.settings.lease / 3, 2.0)
        last = time.monotonic()
        while True:
            await asyncio.sleep(POLL)
            try:
                if time.monotonic() - last < renew_every:
                    status = await asyncio.to_thread(self._status, job.id)
                else:
                    status = await asyncio.to_thread(
                        self.jobs.renew, job.id, self.owner, time.time() + self.settings.lease
                    )
                    last = time.monotonic()
            except STORE_FAILURES:  # the job's own store calls meet the outage too: handed back then
                continue
            if status != "active":
                work.cancel()
                return status

    def _status(self, job_id: str) -> str | None:
        record = self.jobs.get_by_id(job_id)
        return record.status if record is not None else None


def _taken_over(watch: asyncio.Task[str | None]) -> bool:
    """Whether the job's heartbeat ended because the job is no longer this worker's."""
    return watch.done() and not watch.cancelled() and watch.exception() is None and watch.result() is None


def model_failure(exc: ModelError) -> str:
    """A job's error for a model call that failed for good: which model, and the HTTP status if any,
    never the endpoint's own text (which may come from any service the job was aimed at)."""
    if exc.endpoint is None:
        return "a model call failed for good"
    answer = f"answered HTTP {exc.status}" if exc.status else "gave no usable answer"
    return f"model call failed: {exc.endpoint} {answer}"


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value)


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when its parent dies (even by ``kill -9``), and make
    it the parent of any process its children leave behind (Ray's agents outlive ``ray.shutdown``),
    so that `end_descendants` finds them."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (Linux: read from /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def end_descendants(grace: float = END_GRACE) -> None:
    """Stop every process still below this one: SIGTERM, then SIGKILL after ``grace`` seconds for
    those that ignore it; each is reaped. Nothing the worker started outlives it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = descendants(os.getpid())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            _reap()
            pids = descendants(os.getpid())
            time.sleep(0.05)
        if not pids:
            break
    _reap()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def worker_process_main(
    target: str | None, settings: WorkerSettings, parent: int, shared: Any = None, log_format: str = "text"
) -> None:
    """Entry point of the service's worker process: run jobs until asked to stop (SIGTERM/SIGINT)
    or until the service process is gone, telling the service process its health through ``shared``
    (`publish_health`)."""
    _die_with_parent()
    configure_logging(log_format)
    with contextlib.suppress(OSError, AttributeError):  # os.nice: Unix only
        os.nice(WORKER_NICENESS)
    stop = threading.Event()

    def listen() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())

    listen()
    store = _open_store(target, stop)
    if store is None:
        return
    seen = _observability()
    try:
        with JobWorkers(store, settings, seen=seen) as workers:
            ray_seen = False
            while not stop.wait(POLL) and os.getppid() == parent:
                if shared is not None:
                    publish_health(shared, workers.health())
                if workers.ray_started and not ray_seen:
                    ray_seen = True
                    listen()  # Ray's core worker put its own SIGTERM handler (it exits at once) over ours
    finally:
        if seen.tracing is not None:
            seen.tracing.shutdown()
        store.close()
        end_descendants()


def _open_store(target: str | None, stop: threading.Event) -> Store | None:
    """The worker process's store, tried again (a growing pause) while it does not answer; None
    when asked to stop first."""
    retry = POLL
    while True:
        try:
            return Store(target)
        except StoreError as exc:
            LOG.warning("the store does not answer (%s): the job workers wait for it", exc)
        if stop.wait(retry):
            return None
        retry = min(2 * retry, STORE_RETRY_MAX)


def _observability() -> Observability:
    """The service's: Prometheus metrics (service/metrics.py, imported here: the process was started
    with ``PROMETHEUS_MULTIPROC_DIR`` set), and traces when the ``OTEL_*`` variables ask for them."""
    from healthbench.service import metrics
    from healthbench.telemetry import configure

    tracing = configure() if tracing_requested() else None
    observer = observing(metrics.MetricsObserver(), None if tracing is None else tracing.observer())
    return Observability(observer, metrics.job_ended, tracing)


def publish_health(shared: Any, health: WorkerHealth) -> None:
    """Write ``health`` (stamped with the time) where the service process reads it (`read_health`)."""
    state = {**asdict(health), "store_error": (health.store_error or "")[:300] or None, "at": time.time()}
    shared.value = json.dumps(state).encode()[: SHARED_HEALTH_BYTES - 1]


def read_health(shared: Any) -> WorkerHealth:
    """What the worker process last published; not running if it said nothing for `HEALTH_STALE` s."""
    raw = shared.value
    if not raw:  # not published yet: the process imports and opens the store first
        return WorkerHealth(False, starting=True)
    try:
        state = json.loads(raw)
    except ValueError:
        return WorkerHealth(False)
    if time.time() - state["at"] > HEALTH_STALE:
        return WorkerHealth(False)
    return WorkerHealth(state["running"], state["store_error"], state["since"], state["starting"])


class WorkerProcess:
    """`JobWorkers` in a child process, so that a busy job never holds the HTTP process's GIL. Its
    `health` is what the child publishes every `POLL` seconds (shared memory)."""

    def __init__(self, target: str | None, settings: WorkerSettings, log_format: str = "text") -> None:
        context = multiprocessing.get_context("spawn")
        self._shared = context.Array(ctypes.c_char, SHARED_HEALTH_BYTES)
        self._process = context.Process(
            target=worker_process_main,
            args=(target, settings, os.getpid(), self._shared, log_format),
            name="healthbench-jobs",
        )

    def health(self) -> WorkerHealth:
        """The workers' state as the worker process last published it (not running if it died)."""
        if not self._process.is_alive():
            return WorkerHealth(False)
        return read_health(self._shared)

    def __enter__(self) -> WorkerProcess:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.is_alive():
            self._process.terminate()  # SIGTERM: running jobs are handed back as pending
            self._process.join(60)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
