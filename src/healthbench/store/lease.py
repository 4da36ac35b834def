"""One run name, one process: the process executing a run holds its lease (columns of ``runs``).

The holder renews the lease every ``ttl / 3`` seconds. Another process may take it over only when it
has expired (the holder stopped renewing: killed, frozen, its machine gone) or, on the same host, when
the holder's pid is no longer alive (``kill -9`` does not block a run for ``ttl`` seconds). Taking and
renewing are single conditional UPDATEs, so they are atomic on SQLite and PostgreSQL alike.

The holder of a run in a SQLite store also watches the store's file: deleted or replaced while the run
writes it (SQLite goes on writing the deleted file, and everything written since would vanish with it),
the run is stopped at the next heartbeat, or when it ends, with a `StoreGoneError`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from healthbench.errors import RunBusyError, RunError, StoreError, StoreGoneError
from healthbench.store.db import now, runs
from healthbench.store.location import file_identity, sqlite_file
from healthbench.store.runs import Store

LEASE_COLUMNS = ("lease_token", "lease_host", "lease_pid", "lease_since", "lease_expires")
LEASE_TTL = 30.0  # seconds without a renewal after which a run's lease may be taken over


@dataclass(frozen=True)
class Holder:
    token: str
    host: str
    pid: int
    since: str
    expires: float


class RunLease:
    """The right to execute run ``run_id``. ``async with lease.held():`` takes it, renews it in the
    background and releases it; a second process gets a RunError naming the holder."""

    def __init__(
        self,
        store: Store,
        run_id: int,
        run_name: str,
        *,
        ttl: float = LEASE_TTL,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        self.store, self.run_id, self.run_name, self.ttl = store, run_id, run_name, ttl
        self.host = host or socket.gethostname()
        self.pid = os.getpid() if pid is None else pid
        self.token = secrets.token_hex(16)
        self.file = sqlite_file(store.engine.url)  # None: PostgreSQL (or in-memory SQLite)
        self.identity = file_identity(self.file) if self.file is not None else None

    def acquire(self) -> None:
        """Take the lease, or raise RunError naming the process that holds it."""
        if self._take(or_(runs.c.lease_token.is_(None), runs.c.lease_expires < time.time())):
            return
        holder = self.holder()
        if holder is None:  # released between our two statements
            if self._take(runs.c.lease_token.is_(None)):
                return
            holder = self.holder()
        if holder is not None and self._is_dead(holder) and self._take(runs.c.lease_token == holder.token):
            return
        if holder is None:
            raise RunError(f"run {self.run_name!r} changed hands while starting; run the command again")
        raise RunBusyError(
            f"run {self.run_name!r} is being executed by pid {holder.pid} on {holder.host} since "
            f"{holder.since[:19].replace('T', ' ')} UTC; wait for it to end or stop it (a holder that "
            f"died releases the run at most {self.ttl:.0f} s after its last heartbeat)"
        )

    def renew(self) -> bool:
        """Extend the lease; False when it is no longer ours (another process took it over)."""
        with self.store.engine.begin() as conn:
            result = conn.execute(
                update(runs)
                .where(and_(runs.c.id == self.run_id, runs.c.lease_token == self.token))
                .values(lease_expires=time.time() + self.ttl)
            )
        return result.rowcount == 1

    def release(self) -> None:
        with self.store.engine.begin() as conn:
            conn.execute(
                update(runs)
                .where(and_(runs.c.id == self.run_id, runs.c.lease_token == self.token))
                .values(
                    lease_token=None, lease_host=None, lease_pid=None, lease_since=None, lease_expires=None
                )
            )

    def holder(self) -> Holder | None:
        columns = (runs.c.lease_token, runs.c.lease_host, runs.c.lease_pid, runs.c.lease_since)
        with self.store.engine.connect() as conn:
            row = conn.execute(select(*columns, runs.c.lease_expires).where(runs.c.id == self.run_id)).first()
        if row is None or row.lease_token is None:
            return None
        return Holder(row.lease_token, row.lease_host, row.lease_pid, row.lease_since, row.lease_expires)

    def file_gone(self) -> bool:
        """Whether the store's file was deleted or replaced since the lease was made (SQLite only)."""
        return self.file is not None and file_identity(self.file) != self.identity

    def gone_error(self) -> StoreGoneError:
        return StoreGoneError(
            f"the store file {self.file} was deleted or replaced while run {self.run_name!r} was using "
            "it: what the run wrote there is gone with it; restore the file from a backup, or start "
            "the run again"
        )

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self.acquire()
        owner = asyncio.current_task()
        lost = asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat(owner, lost))
        try:
            yield
        except BaseException as exc:
            if self.file_gone():  # whatever stopped the run, this is what the user must know
                raise self.gone_error() from None
            if isinstance(exc, asyncio.CancelledError) and lost.is_set():
                raise RunError(
                    f"run {self.run_name!r} was taken over by another process (this one stopped renewing "
                    f"its lease for over {self.ttl:.0f} s); everything finished so far is saved"
                ) from None
            raise
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat
            if not lost.is_set() and not self.file_gone():
                with suppress(StoreError, SQLAlchemyError):  # the store is gone: the lease expires by itself
                    self.release()
        if self.file_gone():  # deleted after the last heartbeat
            raise self.gone_error()

    async def _heartbeat(self, owner: asyncio.Task[object] | None, lost: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            if self.file_gone():
                if owner is not None:
                    owner.cancel()  # (`held` raises the StoreGoneError)
                return
            try:
                ours = self.renew()
            except (StoreError, SQLAlchemyError):  # a busy or briefly unreachable store: try again next beat
                continue
            if not ours:
                lost.set()
                if owner is not None:
                    owner.cancel()
                return

    def _take(self, condition: object) -> bool:
        with self.store.engine.begin() as conn:
            result = conn.execute(
                update(runs)
                .where(and_(runs.c.id == self.run_id, condition))  # type: ignore[arg-type]
                .values(
                    lease_token=self.token,
                    lease_host=self.host,
                    lease_pid=self.pid,
                    lease_since=now(),
                    lease_expires=time.time() + self.ttl,
                )
            )
        return result.rowcount == 1

    def _is_dead(self, holder: Holder) -> bool:
        """True only when we can tell: the holder ran on this host and its pid is gone."""
        if holder.host != self.host or holder.pid == self.pid:
            return False
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's process
            return False
        return False
