"""Reading and writing runs in the store: the source of truth every result shape is derived from."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Select, Table, and_, func, literal, select, update
from sqlalchemy.exc import IntegrityError

from healthbench.errors import RunError, RunExistsError
from healthbench.store import db
from healthbench.store.db import call_cache, grades, items, runs, samples, upsert
from healthbench.store.location import shown, store_url


class RunStatus(StrEnum):
    """A run's status as stored (``runs.status``)."""

    CREATED = "created"
    RUNNING = "running"  # also what a killed process leaves behind
    FINISHED = "finished"
    INCOMPLETE = "incomplete"  # ended with failed samples or ungraded criteria
    INTERRUPTED = "interrupted"
    FAILED = "failed"


# statuses a run is left in by a session that did not end normally (a killed process leaves "running")
INTERRUPTED = (RunStatus.RUNNING, RunStatus.INTERRUPTED, RunStatus.FAILED)


class GradeStatus(StrEnum):
    """A grade's status as stored (``grades.status``)."""

    MET = "met"
    NOT_MET = "not_met"
    UNGRADED = "ungraded"


CACHE_CHUNK = 500  # keys per `IN (...)` query of the call cache
INSERT_CHUNK = 500  # items per insert of a new run


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
    """What every stored call's row holds: its (item, repeat) and how the call went. Rows are read and
    written as these dataclasses (`Store.put`); the store adds the run and the time of writing."""

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
    judge: str = field(kw_only=True)  # the member that graded it: its label (docs/panels.md)
    status: str  # a GradeStatus
    explanation: str | None
    attempts: int
    raw: str | None = None  # the last unusable judge answer of an ungraded criterion


@dataclass(frozen=True)
class CacheEntry:
    """A real call's answer in the call cache, under its request key."""

    key: str
    provider: str
    model: str
    text: str
    usage: dict[str, int] | None


@dataclass
class Rows:
    """Rows to commit together, in one transaction (`Store.put`)."""

    samples: list[SampleRow] = field(default_factory=list)
    grades: list[GradeRow] = field(default_factory=list)
    cache: list[CacheEntry] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.samples) + len(self.grades) + len(self.cache)

    def extend(self, other: Rows) -> None:
        self.samples.extend(other.samples)
        self.grades.extend(other.grades)
        self.cache.extend(other.cache)


@dataclass(frozen=True)
class UsageRow:
    """What one stored call used: ``role`` is "candidate" (a sample) or "judge" (a grade)."""

    role: str
    usage: dict[str, int] | None
    cost: float | None
    cached: bool
    failed: bool
    judge: str = ""  # a grade's: the label of the panel member that made it ('' for a sample)


@dataclass(frozen=True)
class RunProgress:
    """A run's size and what it has done, counted by the store (`Store.run_progress`)."""

    items: int
    criteria: int  # over all items, for one repeat
    samples_done: int  # successful samples
    grades_done: int  # final grades (met or not met)


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
        records: Iterable[tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], int]],
        *,
        parent_run: str | None = None,
        copy_of: int | None = None,
        copy_grades_of: Collection[str] = (),
    ) -> RunRecord:
        """Store a new run with its items in one transaction; ``records`` may be a generator: they are
        inserted ``INSERT_CHUNK`` at a time, never all held at once, and an exception it raises
        leaves no run. An item is stored at its place in ``records``, or at the position given as
        its third element (records read in file order, stored in the order a sample chose them).
        ``copy_of`` (a regrade, with no ``records``): the items and successful samples of that run
        are copied by the database in the same transaction, none of them read into memory; and the
        grades of its judges ``copy_grades_of`` (labels: a regrade that grows or shrinks a panel)."""
        stamp = db.now()
        try:
            with self.engine.begin() as conn:
                if conn.execute(select(runs.c.id).where(runs.c.name == name)).first() is not None:
                    raise RunExistsError(f"a run named {name!r} already exists")
                inserted = conn.execute(
                    runs.insert().values(
                        name=name,
                        kind=kind,
                        status=RunStatus.CREATED,
                        config=dict(config),
                        created_at=stamp,
                        updated_at=stamp,
                        parent_run=parent_run,
                    )
                ).inserted_primary_key
                assert inserted is not None
                run_id = inserted[0]
                rows: list[dict[str, Any]] = []
                for i, (item_id, record, *at) in enumerate(records):
                    position = at[0] if at else i
                    rows.append(
                        {"run_id": run_id, "position": position, "item_id": item_id, "record": dict(record)}
                    )
                    if len(rows) == INSERT_CHUNK:
                        conn.execute(items.insert(), rows)
                        rows = []
                if rows:
                    conn.execute(items.insert(), rows)
                if copy_of is not None:
                    _copy_rows(conn, items, copy_of, run_id)
                    _copy_rows(conn, samples, copy_of, run_id, samples.c.error.is_(None))
                    if copy_grades_of:
                        _copy_rows(conn, grades, copy_of, run_id, grades.c.judge.in_(list(copy_grades_of)))
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

    def set_status(self, run_id: int, status: RunStatus) -> None:
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
            page, start = self.item_page(run_id, start, page_size)
            if not page:
                return
            yield page

    def item_page(
        self, run_id: int, start: int, page_size: int
    ) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        """Up to ``page_size`` of a run's items from position ``start`` on, in order, and the position
        the next page starts from (`iter_item_pages`; a caller that must not keep a page alive while it
        uses what it made of it reads them one by one)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(items.c.position, items.c.item_id, items.c.record)
                .where(and_(items.c.run_id == run_id, items.c.position >= start))
                .order_by(items.c.position)
                .limit(page_size)
            ).all()
        return [(row.item_id, row.record) for row in rows], rows[-1].position + 1 if rows else start

    def load_samples(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int], SampleRow]:
        """A run's samples by (item, repeat); ``item_ids`` and ``repeat`` narrow the read."""
        rows = self._load_calls(samples, SampleRow, run_id, item_ids, repeat)
        return {(r.item_id, r.repeat): r for r in rows}

    def load_grades(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int, int, str], GradeRow]:
        """A run's grades by (item, repeat, criterion, judge); ``item_ids`` and ``repeat`` narrow the read."""
        rows = self._load_calls(grades, GradeRow, run_id, item_ids, repeat)
        return {(r.item_id, r.repeat, r.criterion, r.judge): r for r in rows}

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
        with self.engine.connect() as conn:
            rows = conn.execute(_narrowed(query, table, item_ids, repeat)).mappings().all()
        return [row_type(**r) for r in rows]

    def load_verdicts(
        self, run_id: int, *, item_ids: Collection[str], repeat: int
    ) -> dict[tuple[str, int, str], tuple[str, str | None]]:
        """(status, explanation) by (item, criterion, judge) for some items of one repeat: what scoring
        and the result documents need of a grade, without its usage (cheaper to read)."""
        query = select(
            grades.c.item_id, grades.c.criterion, grades.c.judge, grades.c.status, grades.c.explanation
        ).where(
            and_(
                grades.c.run_id == run_id,
                grades.c.repeat == repeat,
                grades.c.item_id.in_(list(item_ids)),
            )
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {(r.item_id, r.criterion, r.judge): (r.status, r.explanation) for r in rows}

    def iter_usage(self, run_id: int) -> Iterator[UsageRow]:
        """Usage, cost and cache flag of every stored sample and grade of a run (streamed)."""
        for role, table in (("candidate", samples), ("judge", grades)):
            judge = grades.c.judge if table is grades else literal("").label("judge")
            with self.engine.connect() as conn:
                result = conn.execution_options(yield_per=1000).execute(
                    select(table.c.usage, table.c.cost, table.c.cached, table.c.error, judge).where(
                        table.c.run_id == run_id
                    )
                )
                for row in result:
                    failed = row.error is not None
                    yield UsageRow(role, row.usage, row.cost, bool(row.cached), failed, row.judge)

    def sample_progress(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int], str]:
        """The completions of a run's successful samples (what the engine needs to plan); ``item_ids``
        and ``repeat`` narrow the read (a plan reads those of one page of work at a time)."""
        query = select(samples.c.item_id, samples.c.repeat, samples.c.completion).where(
            and_(samples.c.run_id == run_id, samples.c.error.is_(None))
        )
        with self.engine.connect() as conn:
            rows = conn.execute(_narrowed(query, samples, item_ids, repeat)).all()
        return {(r.item_id, r.repeat): r.completion for r in rows}

    def grade_progress(
        self, run_id: int, *, item_ids: Collection[str] | None = None, repeat: int | None = None
    ) -> dict[tuple[str, int, int, str], tuple[str, int]]:
        """(status, attempts) of every stored grade of a run by (item, repeat, criterion, judge);
        ``item_ids`` and ``repeat`` narrow the read."""
        query = select(
            grades.c.item_id,
            grades.c.repeat,
            grades.c.criterion,
            grades.c.judge,
            grades.c.status,
            grades.c.attempts,
        ).where(grades.c.run_id == run_id)
        with self.engine.connect() as conn:
            rows = conn.execute(_narrowed(query, grades, item_ids, repeat)).all()
        return {(r.item_id, r.repeat, r.criterion, r.judge): (r.status, r.attempts) for r in rows}

    def run_progress(self, run_id: int, n_repeats: int, criteria_field: str | None) -> RunProgress:
        """What a run holds, counted by the database (nothing is read row by row): its items, their
        criteria (the length of each item record's list ``criteria_field``; None: one per item), and
        its successful samples and final (met or not met) grades of the items' first ``n_repeats``."""
        of_run = select(items.c.item_id).where(items.c.run_id == run_id)
        if criteria_field is None:
            criteria: Any = func.count()
        elif self.engine.dialect.name == "postgresql":
            criteria = func.sum(
                func.json_array_length(func.json_extract_path(items.c.record, criteria_field))
            )
        else:
            criteria = func.sum(func.json_array_length(items.c.record, f"$.{criteria_field}"))
        done = {
            table.name: select(func.count())
            .select_from(table)
            .where(
                and_(table.c.run_id == run_id, table.c.repeat < n_repeats, table.c.item_id.in_(of_run), ok)
            )
            for table, ok in (
                (samples, samples.c.error.is_(None)),
                (grades, grades.c.status != GradeStatus.UNGRADED),
            )
        }
        with self.engine.connect() as conn:
            n_items, n_criteria = conn.execute(
                select(func.count(), criteria).select_from(items).where(items.c.run_id == run_id)
            ).one()
            return RunProgress(
                items=int(n_items),
                criteria=int(n_criteria or 0),
                samples_done=int(conn.execute(done["samples"]).scalar_one()),
                grades_done=int(conn.execute(done["grades"]).scalar_one()),
            )

    def cache_lookup(self, keys: Iterable[str]) -> dict[str, CachedCall]:
        """The call cache's answers to ``keys`` (those it holds), read ``CACHE_CHUNK`` keys per query:
        what a run reads of the cache is bounded by its own requests, never by the store's age."""
        return {
            key: CachedCall(text, usage)
            for key, text, usage in self._cache_rows(("key", "text", "usage"), keys)
        }

    def cache_has(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` the call cache holds (keys only, ``CACHE_CHUNK`` per query)."""
        return {key for (key,) in self._cache_rows(("key",), keys)}

    def _cache_rows(self, columns: tuple[str, ...], keys: Iterable[str]) -> list[tuple[Any, ...]]:
        """``columns`` of the call cache's rows under ``keys``: one ``key IN (...)`` query per chunk."""
        wanted = list(dict.fromkeys(keys))
        picked = select(*(call_cache.c[c] for c in columns))
        rows: list[tuple[Any, ...]] = []
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), CACHE_CHUNK):
                chunk = wanted[start : start + CACHE_CHUNK]
                rows += [tuple(row) for row in conn.execute(picked.where(call_cache.c.key.in_(chunk)))]
        return rows

    def cache_get(self, key: str) -> CachedCall | None:
        return self.cache_lookup([key]).get(key)

    def put(
        self,
        run_id: int,
        *,
        samples: Iterable[SampleRow] = (),
        grades: Iterable[GradeRow] = (),
        cache: Iterable[CacheEntry] = (),
    ) -> None:
        """Write rows of run ``run_id`` (and call-cache entries) in one transaction; a row replaces the
        stored row with the same key (work items are idempotent)."""
        stamp = db.now()
        sample_rows = [_values(db.samples, r, stamp, run_id) for r in samples]
        grade_rows = [_values(db.grades, r, stamp, run_id) for r in grades]
        with self.engine.begin() as conn:  # a failure is a StoreError (see healthbench.store.db)
            for table, rows in (
                (db.samples, sample_rows),
                (db.grades, grade_rows),
                (call_cache, [_values(call_cache, c, stamp) for c in cache]),
            ):
                upsert(conn, table, rows)

    def put_rows(self, run_id: int, rows: Rows) -> None:
        """`put` of a `Rows` batch."""
        self.put(run_id, samples=rows.samples, grades=rows.grades, cache=rows.cache)


def _narrowed(
    query: Select[Any], table: Table, item_ids: Collection[str] | None, repeat: int | None
) -> Select[Any]:
    """``query`` of a call table narrowed to ``item_ids`` (when given) and ``repeat`` (when given)."""
    if item_ids is not None:
        query = query.where(table.c.item_id.in_(list(item_ids)))
    if repeat is not None:
        query = query.where(table.c.repeat == repeat)
    return query


def _copy_rows(conn: Connection, table: Table, source: int, target: int, *where: Any) -> None:
    """Copy ``table``'s rows of run ``source`` (those matching ``where``) to run ``target``, in SQL."""
    names = [c.name for c in table.columns]
    picked = [literal(target).label("run_id") if n == "run_id" else table.c[n] for n in names]
    chosen = select(*picked).where(table.c.run_id == source, *where)
    conn.execute(table.insert().from_select(names, chosen))


def _values(
    table: Table, row: CallRow | CacheEntry, stamp: str, run_id: int | None = None
) -> tuple[Any, ...]:
    """A typed row as `upsert` writes it into ``table``, stamped (``asdict`` would deep-copy its usage
    and messages)."""
    columns = dict(vars(row))
    columns["created_at"] = stamp
    if run_id is not None:
        columns["run_id"] = run_id
    return db.row_values(table, columns)
