"""A run's provider batches in the store (``--batch``): typed writes and reads of batch_tables.py.

A batch is recorded with its whole request set *before* it is submitted, and its provider id as soon
as the provider has created it, so that a restarted run polls the same batches and submits none of
their requests again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, select, update

from healthbench.store.batch_tables import batch_requests, provider_batches
from healthbench.store.db import now
from healthbench.store.runs import Store


@dataclass(frozen=True)
class BatchRequestRow:
    """One request of a batch: its custom_id (the call's cache key) and what it answers."""

    custom_id: str
    item_id: str
    repeat: int
    criterion: int  # -1: the candidate's answer
    attempt: int
    judge: str = ""  # the panel member asked (its label); '': the candidate


@dataclass(frozen=True)
class ProviderBatchRecord:
    id: int
    role: str
    provider: str
    batch_id: str | None
    state: str
    total: int
    done: int
    failed: int
    resubmit_of: int | None
    error: str | None


@dataclass(frozen=True)
class Abandoned:
    """A batch recorded but whose provider id was never stored."""

    id: int
    role: str
    created_at: str  # ISO time (UTC) it was recorded, a moment before it was submitted


_COLUMNS = tuple(provider_batches.c[name] for name in ProviderBatchRecord.__dataclass_fields__)


def batch_counts(store: Store) -> dict[tuple[str, str], int]:
    """How many provider batches of every run are in each (provider, state) (the service's /metrics)."""
    column = provider_batches.c
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(column.provider, column.state, func.count()).group_by(column.provider, column.state)
        ).all()
    return {(str(provider), str(state)): int(count) for provider, state, count in rows}


class BatchLedger:
    """The provider batches of one run."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.engine = store.engine
        self.run_id = run_id

    def add(
        self, role: str, provider: str, requests: Sequence[BatchRequestRow], *, resubmit_of: int | None = None
    ) -> int:
        """Record a batch about to be submitted (state ``submitting``) with its requests; its local id."""
        stamp = now()
        with self.engine.begin() as conn:
            inserted = conn.execute(
                provider_batches.insert().values(
                    run_id=self.run_id,
                    role=role,
                    provider=provider,
                    batch_id=None,
                    state="submitting",
                    total=len(requests),
                    done=0,
                    failed=0,
                    resubmit_of=resubmit_of,
                    error=None,
                    created_at=stamp,
                    updated_at=stamp,
                )
            ).inserted_primary_key
            assert inserted is not None
            local_id = int(inserted[0])
            conn.execute(
                batch_requests.insert(),
                [
                    {
                        "batch": local_id,
                        "custom_id": r.custom_id,
                        "run_id": self.run_id,
                        "item_id": r.item_id,
                        "repeat": r.repeat,
                        "criterion": r.criterion,
                        "attempt": r.attempt,
                        "judge": r.judge,
                    }
                    for r in requests
                ],
            )
        return local_id

    def submitted(self, local_id: int, batch_id: str) -> None:
        """The provider created the batch: from now on a restart polls it instead of submitting."""
        self._set(local_id, batch_id=batch_id, state="validating")

    def update(self, local_id: int, state: str, done: int, failed: int, error: str | None = None) -> None:
        self._set(local_id, state=state, done=done, failed=failed, error=error)

    def lose(self, local_id: int, error: str | None) -> None:
        """The provider no longer knows the batch (404): state ``lost``, its last known counts kept."""
        self._set(local_id, state="lost", error=error)

    def _set(self, local_id: int, **values: object) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(provider_batches)
                .where(provider_batches.c.id == local_id)
                .values(**values, updated_at=now())
            )

    def abandon_unsubmitted(self) -> list[Abandoned]:
        """Batches recorded whose provider id was never stored (the process died while submitting them:
        the provider may or may not have created them): marked ``abandoned``, so that their requests
        are submitted again. Which they were (when each was recorded, to find it at the provider)."""
        where = and_(
            provider_batches.c.run_id == self.run_id,
            provider_batches.c.batch_id.is_(None),
            provider_batches.c.state == "submitting",
        )
        with self.engine.begin() as conn:
            rows = conn.execute(
                select(provider_batches.c.id, provider_batches.c.role, provider_batches.c.created_at)
                .where(where)
                .order_by(provider_batches.c.id)
            ).all()
            conn.execute(update(provider_batches).where(where).values(state="abandoned", updated_at=now()))
        return [Abandoned(r.id, r.role, str(r.created_at)) for r in rows]

    def batches(self) -> list[ProviderBatchRecord]:
        """Every batch of the run, oldest first."""
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    select(*_COLUMNS)
                    .where(provider_batches.c.run_id == self.run_id)
                    .order_by(provider_batches.c.id)
                )
                .mappings()
                .all()
            )
        return [ProviderBatchRecord(**row) for row in rows]

    def requests(self, local_id: int) -> list[BatchRequestRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    batch_requests.c.custom_id,
                    batch_requests.c.item_id,
                    batch_requests.c.repeat,
                    batch_requests.c.criterion,
                    batch_requests.c.attempt,
                    batch_requests.c.judge,
                ).where(batch_requests.c.batch == local_id)
            ).all()
        return [
            BatchRequestRow(r.custom_id, r.item_id, r.repeat, r.criterion, r.attempt, r.judge) for r in rows
        ]

    def members(self) -> dict[int, str]:
        """The judge each batch of the run asks (its requests' member: a provider batch holds the
        requests of one model); '' for the candidate's batches and those stored before panels."""
        query = (
            select(batch_requests.c.batch, func.max(batch_requests.c.judge))
            .join(provider_batches, provider_batches.c.id == batch_requests.c.batch)
            .where(provider_batches.c.run_id == self.run_id)
            .group_by(batch_requests.c.batch)
        )
        with self.engine.connect() as conn:
            return {int(batch): str(judge or "") for batch, judge in conn.execute(query).all()}

    def submissions(self) -> dict[str, int]:
        """How many submitted batches of the run held each custom_id (bounds its retries across restarts)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(batch_requests.c.custom_id)
                .join(provider_batches, provider_batches.c.id == batch_requests.c.batch)
                .where(
                    and_(
                        provider_batches.c.run_id == self.run_id,
                        provider_batches.c.batch_id.is_not(None),
                    )
                )
            ).scalars()
            counts: dict[str, int] = {}
            for key in rows:
                counts[key] = counts.get(key, 0) + 1
        return counts
