"""Group commit on the event loop: finished calls queue their rows; a flush writes everything queued in
a single transaction, then wakes every caller. A caller's ``await put(...)`` returns only once its rows
are durable, so a ``kill -9`` loses only calls that had not returned yet.

Rows are committed once the calls stop arriving: a flush is due ``quiet`` seconds after the last rows
were queued if none came since (`DEFAULT_COMMIT_QUIET`, 2 ms), ``wait`` seconds after the first at the
latest (`DEFAULT_COMMIT_WAIT`, 20 ms), or in the next loop iteration once ``rows`` rows are queued
(`DEFAULT_COMMIT_ROWS`). A busy run (~1,500 calls/s) thus commits ~80 calls at a time instead of the
~25 finished in one loop iteration, each commit's fixed cost (the transaction, the revision bump,
SQLite's commit) shared by more calls; a lone call waits only ``quiet`` longer. What it costs is
latency: a caller waits up to ``wait`` longer for its commit and holds its connection slot as long,
at most 10 % of a 0.2 s call and well under 1 % of a real model's. Crash safety is unchanged: a call's
slot is released only once its rows are committed (docs/benchmarks.md, "Client CPU per call, second
pass").

The flush runs on the loop's own thread: a SQLite transaction of a few thousand rows takes a few
milliseconds, far less than what a writer thread costs in GIL hand-offs under ~1,500 calls/s (measured:
median commit wait fell from 15 ms to under 1 ms).
"""

from __future__ import annotations

import asyncio

from healthbench.defaults import DEFAULT_COMMIT_QUIET, DEFAULT_COMMIT_ROWS, DEFAULT_COMMIT_WAIT
from healthbench.store.runs import Rows, Store


class StoreWriter:
    """The single writer of a run. Use as ``async with StoreWriter(store, run_id) as writer``."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        quiet: float = DEFAULT_COMMIT_QUIET,
        wait: float = DEFAULT_COMMIT_WAIT,
        rows: int = DEFAULT_COMMIT_ROWS,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._quiet, self._wait, self._rows = quiet, wait, rows
        self._first = 0.0  # when the first pending rows were queued (loop time)
        self._seen = 0  # how many puts were pending at the last check
        self._pending: list[tuple[Rows, asyncio.Future[None]]] = []
        self._queued = 0  # rows in _pending
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._now = False  # the flush is in the next loop iteration (enough rows queued)

    async def __aenter__(self) -> StoreWriter:
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pending:
            self._flush()

    async def put(self, rows: Rows) -> None:
        """Returns once ``rows`` are committed (with everything else queued until the flush)."""
        loop = self._loop
        assert loop is not None, "StoreWriter used outside `async with`"
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append((rows, future))
        self._queued += len(rows)
        if self._queued >= self._rows or self._wait <= 0:
            if not self._now:  # enough rows: flushed in the next loop iteration, without waiting longer
                if self._timer is not None:
                    self._timer.cancel()
                self._timer, self._now = loop.call_soon(self._flush), True
        elif self._timer is None:
            self._first, self._seen = loop.time(), len(self._pending)
            self._timer = loop.call_later(min(self._quiet, self._wait), self._check)
        await future

    def _check(self) -> None:
        """Flush, unless rows keep coming and the first ones have waited less than ``wait``."""
        assert self._loop is not None
        now = self._loop.time()
        if len(self._pending) > self._seen and now - self._first < self._wait:
            self._seen = len(self._pending)
            self._timer = self._loop.call_later(min(self._quiet, self._first + self._wait - now), self._check)
        else:
            self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()  # (when called by __aexit__)
        self._timer, self._now, self._queued = None, False, 0
        batch, self._pending = self._pending, []
        if not batch:
            return
        error: BaseException | None = None
        together = Rows()
        for rows, _ in batch:
            together.extend(rows)
        try:
            self._store.put_rows(self._run_id, together)
        except Exception as exc:  # handed to every waiting caller
            error = exc
        for _, future in batch:
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
