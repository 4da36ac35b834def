"""Reading and writing runs in the store: the source of truth every result shape is derived from."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from sqlalchemy import Engine, Table, and_, func, select, update
from sqlalchemy.exc import IntegrityError

from healthbench.errors import RunError, RunExistsError
from healthbench.store import db
from healthbench.store.db import call_cache, grades, items, runs, samples, upsert
from healthbench.store.location import shown, store_url


@dataclass(frozen=True)
class RunRecord:
    id: int
    name: str
    kind: str
    status: str
    config: dict[str, Any]
    created_at: str
    updated_at: str
    parent_run: str | None


RUN_COLUMNS = tuple(runs.c[f.name] for f in fields(RunRecord))
CallRowT = TypeVar("CallRowT", bound="CallRow")


@dataclass(frozen=True)
class CallRow:
    """What every stored call's row holds: its (item, repeat) and how the call went."""

    item_id: str
    repeat: int
    usage: dict[str, int] | None
    cost: float | None
    cached: bool
    error: str | None


@dataclass(frozen=True)
class SampleRow(CallRow):
    completion: str | None
    messages: list[dict[str, str]] | None


@dataclass(frozen=True)
class GradeRow(CallRow):
    criterion: int
    status: str
    explanation: str | None
    attempts: int


@dataclass(frozen=True)
class UsageRow:
    """What one stored call used: ``role`` is "candidate" (a sample) or "judge" (a grade)."""

    role: str
    usage: dict[str, int] | None
    cost: float | None
    cached: bool
    failed: bool


@dataclass(frozen=True)
class CachedCall:
    text: str
    usage: dict[str, int] | None


class Store:
    """A handle on one database. Reads run on any thread; writes go through short transactions."""

    def __init__(self, target: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        """Open (and migrate) the store at ``target``: a SQLAlchemy URL or a SQLite path; None means
        $HEALTHBENCH_STORE, else the default file. ``create=False`` never creates a SQLite file."""
        self.engine: Engine = db.connect(store_url(target), create=create)
        self.url = shown(self.engine.url)  # password hidden: safe to print

    def close(self) -> None:
        self.engine.dispose()

    # -- runs ---------------------------------------------------------------------------------
    def create_run(
        self,
        name: str,
        kind: str,
        config: Mapping[str, Any],
        records: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        parent_run: str | None = None,
    ) -> RunRecord:
        stamp = db.now()
        try:
            with self.engine.begin() as conn:
                if conn.execute(select(runs.c.id).where(runs.c.name == name)).first() is not None:
                    raise RunExistsError(f"a run named {name!r} already exists")
                inserted = conn.execute(
                    runs.insert().values(
                        name=name,
                        kind=kind,
                        status="created",
                        config=dict(config),
                        created_at=stamp,
                        updated_at=stamp,
                        parent_run=parent_run,
                    )
                ).inserted_primary_key
                assert inserted is not None
                run_id = inserted[0]
                rows = [
                    {"run_id": run_id, "position": i, "item_id": item_id, "record": dict(record)}
                    for i, (item_id, record) in enumerate(records)
                ]
                if rows:
                    conn.execute(items.insert(), rows)
        except IntegrityError:  # another process created it between our check and our insert
            raise RunExistsError(f"a run named {name!r} already exists") from None
        run = self.get_run(name)
        assert run is not None
        return run

    def get_run(self, name: str) -> RunRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(*RUN_COLUMNS).where(runs.c.name == name)).mappings().first()
        return RunRecord(**row) if row else None

    def require_run(self, name: str) -> RunRecord:
        run = self.get_run(name)
        if run is None:
            raise RunError(f"no run named {name!r} in {self.url}; `healthbench runs` lists them")
        return run

    def list_runs(self) -> list[RunRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(*RUN_COLUMNS).order_by(runs.c.id)).mappings().all()
        return [RunRecord(**row) for row in rows]

    def set_status(self, run_id: int, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id).values(status=status, updated_at=db.now()))

    def load_items(self, run_id: int) -> list[tuple[str, dict[str, Any]]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(items.c.item_id, items.c.record)
                .where(items.c.run_id == run_id)
                .order_by(items.c.position)
            ).all()
        return [(row.item_id, row.record) for row in rows]

    def count_items(self, run_id: int) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count()).select_from(items).where(items.c.run_id == run_id)
                ).scalar_one()
            )

    def iter_item_pages(
        self, run_id: int, page_size: int = 500
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """A run's items in order, ``page_size`` at a time (a page is read when the previous one is used)."""
        start = 0
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(items.c.position, items.c.item_id, items.c.record)
                    .where(and_(items.c.run_id == run_id, items.c.position >= start))
                    .order_by(items.c.position)
                    .limit(page_size)
                ).all()
            if not rows:
                return
            yield [(row.item_id, row.record) for row in rows]
            start = rows[-1].position + 1

    def load_samples(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int], SampleRow]:
        """A run's samples by (item, repeat); ``item_ids`` and ``repeat`` narrow the read."""
        rows = self._load_calls(samples, SampleRow, run_id, item_ids, repeat)
        return {(r.item_id, r.repeat): r for r in rows}

    def load_grades(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int, int], GradeRow]:
        """A run's grades by (item, repeat, criterion); ``item_ids`` and ``repeat`` narrow the read."""
        rows = self._load_calls(grades, GradeRow, run_id, item_ids, repeat)
        return {(r.item_id, r.repeat, r.criterion): r for r in rows}

    def _load_calls(
        self,
        table: Table,
        row_type: type[CallRowT],
        run_id: int,
        item_ids: Collection[str] | None,
        repeat: int | None,
    ) -> list[CallRowT]:
        """The rows of ``table`` (samples or grades) of a run, read into ``row_type``'s fields."""
        query = select(*(table.c[f.name] for f in fields(row_type))).where(table.c.run_id == run_id)
        if item_ids is not None:
            query = query.where(table.c.item_id.in_(list(item_ids)))
        if repeat is not None:
            query = query.where(table.c.repeat == repeat)
        with self.engine.connect() as conn:
            return [row_type(**r) for r in conn.execute(query).mappings().all()]

    def load_verdicts(
        self, run_id: int, *, item_ids: Collection[str], repeat: int
    ) -> dict[tuple[str, int], tuple[str, str | None]]:
        """(status, explanation) by (item, criterion) for some items of one repeat: what scoring
        and the result documents need of a grade, without its usage (cheaper to read)."""
        query = select(grades.c.item_id, grades.c.criterion, grades.c.status, grades.c.explanation).where(
            and_(
                grades.c.run_id == run_id,
                grades.c.repeat == repeat,
                grades.c.item_id.in_(list(item_ids)),
            )
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {(r.item_id, r.criterion): (r.status, r.explanation) for r in rows}

    def iter_usage(self, run_id: int) -> Iterator[UsageRow]:
        """Usage, cost and cache flag of every stored sample and grade of a run (streamed)."""
        for role, table in (("candidate", samples), ("judge", grades)):
            with self.engine.connect() as conn:
                result = conn.execution_options(yield_per=1000).execute(
                    select(table.c.usage, table.c.cost, table.c.cached, table.c.error).where(
                        table.c.run_id == run_id
                    )
                )
                for row in result:
                    yield UsageRow(role, row.usage, row.cost, bool(row.cached), row.error is not None)

    def sample_progress(self, run_id: int) -> dict[tuple[str, int], str]:
        """The completions of a run's successful samples (what the engine needs to plan)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(samples.c.item_id, samples.c.repeat, samples.c.completion).where(
                    and_(samples.c.run_id == run_id, samples.c.error.is_(None))
                )
            ).all()
        return {(r.item_id, r.repeat): r.completion for r in rows}

    def grade_progress(self, run_id: int) -> dict[tuple[str, int, int], tuple[str, int]]:
        """(status, attempts) of every stored grade of a run."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    grades.c.item_id, grades.c.repeat, grades.c.criterion, grades.c.status, grades.c.attempts
                ).where(grades.c.run_id == run_id)
            ).all()
        return {(r.item_id, r.repeat, r.criterion): (r.status, r.attempts) for r in rows}

    def copy_samples(self, source_run: int, target_run: int) -> int:
        """Reuse another run's successful samples (regrading without re-sampling)."""
        with self.engine.begin() as conn:
            rows = (
                conn.execute(
                    select(samples).where(and_(samples.c.run_id == source_run, samples.c.error.is_(None)))
                )
                .mappings()
                .all()
            )
            upsert(conn, samples, [dict(r, run_id=target_run) for r in rows])
        return len(rows)

    def cache_keys(self) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(select(call_cache.c.key)).scalars())

    def cache_get(self, key: str) -> CachedCall | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(call_cache.c.text, call_cache.c.usage).where(call_cache.c.key == key)
            ).first()
        return CachedCall(row.text, row.usage) if row else None

    def write(self, ops: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Write a batch of rows in one transaction; ``ops`` are (table name, row) pairs."""
        by_table: dict[str, list[Mapping[str, Any]]] = {}
        for table, row in ops:
            by_table.setdefault(table, []).append(row)
        with self.engine.begin() as conn:  # a failure is a StoreError (see healthbench.store.db)
            for table, rows in by_table.items():
                upsert(conn, db.metadata.tables[table], rows)
