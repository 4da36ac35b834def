"""Group commit on the event loop: finished calls queue their rows; a flush writes everything queued in
a single transaction, then wakes every caller. A caller's ``await put(...)`` returns only once its rows
are durable, so a ``kill -9`` loses only calls that had not returned yet.

A flush runs ``wait`` seconds after the first rows were queued (`DEFAULT_COMMIT_WAIT`), or in the next
loop iteration once ``rows`` rows are queued (`DEFAULT_COMMIT_ROWS`): a run's ~1,500 calls/s are
committed ~80 at a time instead of ~25 per loop iteration, each commit's fixed cost (the transaction,
the revision bump, SQLite's commit) shared by more calls (docs/benchmarks.md, "Client CPU per call,
second pass"). What it costs is latency: a caller waits for its commit up to ``wait`` longer (half of
it on average) and holds its connection slot as long: ~5 % of a 0.2 s call, well under 1 % of a real
model's. Crash safety is unchanged: a call's slot is released only once its rows are committed.

The flush runs on the loop's own thread: a SQLite transaction of a few thousand rows takes a few
milliseconds, far less than what a writer thread costs in GIL hand-offs under ~1,500 calls/s (measured:
median commit wait fell from 15 ms to under 1 ms).
"""

from __future__ import annotations

import asyncio

from healthbench.defaults import DEFAULT_COMMIT_ROWS, DEFAULT_COMMIT_WAIT
from healthbench.store.runs import Rows, Store


class StoreWriter:
    """The single writer of a run. Use as ``async with StoreWriter(store, run_id) as writer``."""

    def __init__(
        self, store: Store, run_id: int, *, wait: float = DEFAULT_COMMIT_WAIT, rows: int = DEFAULT_COMMIT_ROWS
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._wait, self._rows = wait, rows
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
            self._timer = loop.call_later(self._wait, self._flush)
        await future

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
