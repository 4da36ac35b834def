"""Group commit: finished calls are queued to one writer thread that commits whatever is waiting in a
single transaction, then wakes every caller. A caller's ``await write(...)`` returns only once its rows
are durable, so a ``kill -9`` loses only calls that had not returned yet."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from healthbench.store.runs import Store

Op = tuple[str, Mapping[str, Any]]
_STOP = object()


class StoreWriter:
    """The single writer of a run. Use as ``async with StoreWriter(store) as writer``."""

    def __init__(self, store: Store, *, max_batch: int = 2000) -> None:
        self._store = store
        self._queue: queue.Queue[Any] = queue.Queue()
        self._max_batch = max_batch
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.transactions = 0

    async def __aenter__(self) -> StoreWriter:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._work, name="healthbench-store-writer", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._queue.put(_STOP)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def write(self, ops: Sequence[Op]) -> None:
        assert self._loop is not None, "StoreWriter used outside `async with`"
        future: asyncio.Future[None] = self._loop.create_future()
        self._queue.put((list(ops), future))
        await future

    def _work(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if any(entry is _STOP for entry in batch):
                stop = True
                batch = [entry for entry in batch if entry is not _STOP]
            if not batch:
                continue
            ops = [op for entry in batch for op in entry[0]]
            error: BaseException | None = None
            try:
                self._store.write(ops)
                self.transactions += 1
            except BaseException as exc:  # handed to every waiting caller
                error = exc
            for _, future in batch:
                self._resolve(future, error)

    def _resolve(self, future: asyncio.Future[None], error: BaseException | None) -> None:
        assert self._loop is not None

        def settle() -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)

        self._loop.call_soon_threadsafe(settle)
