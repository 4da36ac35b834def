"""The run store: one SQL database (SQLite in WAL mode by default, or PostgreSQL) holding runs, their
conversations, samples, grades and the call cache. Written with SQLAlchemy Core so the same code speaks
both. The tables are created and changed only by the named migrations of migrations.py.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Engine,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
)
from sqlalchemy.engine import URL, Connection, Dialect, ExceptionContext
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, SQLAlchemyError

from healthbench.errors import StoreError, StoreMissingError
from healthbench.store.location import hide_password, shown, sqlite_file
from healthbench.store.migrations import migrate

SQLITE_HEADER = b"SQLite format 3\x00"
PG_CONNECT_TIMEOUT = 10  # seconds before an unreachable PostgreSQL is an error

# Today's tables, as the migrations in migrations.py leave them (keep the two in step).
metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),  # "eval" or "meta_eval"
    Column("status", String(20), nullable=False),  # created, running, finished, incomplete, failed
    Column("config", JSON, nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("parent_run", String(200)),  # the run whose samples a regrade reuses
    # the process executing the run (lease.py): one process per run name
    Column("lease_token", String(64)),
    Column("lease_host", String(255)),
    Column("lease_pid", Integer),
    Column("lease_since", String(40)),
    Column("lease_expires", Float),  # epoch seconds
)

items = Table(
    "items",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("item_id", String(300), nullable=False),
    Column("record", JSON, nullable=False),
)


def _call_table(name: str, *columns: Column[Any]) -> Table:
    """A table of one model call per row (samples, grades): keyed by (run, item, repeat, ...), then
    ``columns``, then how the call went."""
    return Table(
        name,
        metadata,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("item_id", String(300), primary_key=True),
        Column("repeat", Integer, primary_key=True),
        *columns,
        Column("usage", JSON),
        Column("cost", Float),
        Column("cached", Boolean, nullable=False, default=False),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
    )


samples = _call_table(
    "samples",
    Column("completion", Text),
    Column("messages", JSON),  # the messages as sent, system message included
)

grades = _call_table(
    "grades",
    Column("criterion", Integer, primary_key=True),
    Column("judge", String(200), primary_key=True),  # the member's label (its spec text; docs/panels.md)
    Column("status", String(10), nullable=False),  # met, not_met, ungraded
    Column("explanation", Text),
    Column("raw", Text),
    Column("attempts", Integer, nullable=False),
)

call_cache = Table(
    "call_cache",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("provider", String(40), nullable=False),
    Column("model", String(200), nullable=False),
    Column("text", Text, nullable=False),
    Column("usage", JSON),
    Column("created_at", String(40), nullable=False),
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def connect(url: URL, *, create: bool = True) -> Engine:
    """An engine on the store at ``url``, migrated to the current schema. ``create=False`` (read-only
    commands) refuses a SQLite file that does not exist instead of creating it."""
    path = sqlite_file(url)
    where = str(path) if path is not None else shown(url)
    if path is not None:
        _check_sqlite_path(path, create=create)
    options: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql":
        # a pooled connection is checked before use: after the server restarted, the first
        # statement gets a new connection instead of failing on the one the restart closed
        options["pool_pre_ping"] = True
        if "connect_timeout" not in url.query:
            options["connect_args"] = {"connect_timeout": PG_CONNECT_TIMEOUT}
    try:
        engine = create_engine(url, **options)
    except ImportError as exc:
        extra = " (pip install 'healthbench[postgres]')" if url.get_backend_name() == "postgresql" else ""
        raise StoreError(f"cannot open the store {where}: {exc}{extra}") from None
    except ArgumentError as exc:
        raise StoreError(f"cannot open the store {where}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        migrate(engine, where)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise StoreError(f"cannot open the store {where}: {reason(exc)}") from None
    except StoreError:
        engine.dispose()
        raise
    event.listen(engine, "handle_error", _store_failure(where))
    return engine


def _store_failure(where: str) -> Any:
    """Once the store is open, a database failure in any read, write or status update (the file gone or
    unwritable, the server stopped, a lock held too long) is one `StoreError`: one line naming the
    store, never a traceback. A key conflict (IntegrityError) stays for its caller to handle."""

    def handle(context: ExceptionContext) -> None:
        if context.is_pre_ping:  # a pooled connection the server closed: the pool opens another
            return
        exc = context.sqlalchemy_exception
        if isinstance(exc, DBAPIError) and not isinstance(exc, IntegrityError):
            raise StoreError(f"cannot use the store {where}: {reason(exc)}") from None

    return handle


def _check_sqlite_path(path: Path, *, create: bool) -> None:
    if path.is_dir():
        raise StoreError(f"store {path} is a directory; give a file path such as {path / 'healthbench.db'}")
    if not create and (not path.exists() or path.stat().st_size == 0):
        raise StoreMissingError(f"no store at {path} (nothing has been run with it yet)")
    if path.exists():
        try:
            with path.open("rb") as handle:
                head = handle.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from None
        if head and head != SQLITE_HEADER:
            raise StoreError(f"store {path} is not a SQLite database (it starts with {head[:16]!r})")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store folder {path.parent}: {exc.strerror or exc}") from None


def reason(exc: SQLAlchemyError) -> str:
    """The first line of the database's own message (no SQL, no parameters, no password)."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return hide_password(text[0]) if text else type(orig).__name__


def upsert(conn: Connection, table: Table, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows, replacing any row with the same primary key (work items are idempotent). Each row
    is a tuple of ``table``'s columns in their order, JSON columns already encoded (`row_values`): the
    dialect's compiled INSERT ... ON CONFLICT DO UPDATE is handed to the driver's ``executemany`` as
    it is, with none of SQLAlchemy's per-row parameter processing (a run's group commit writes ~2 rows
    per model call; that processing cost more than the database's own work)."""
    if not rows:
        return
    statement = _driver_statement(
        conn.dialect, ("upsert", table.name), lambda: _upsert(conn.dialect.name, table)
    )
    params: list[Any] = list(rows) if statement.names is None else [statement.params(r) for r in rows]
    conn.exec_driver_sql(statement.sql, params)


def row_values(table: Table, columns: Mapping[str, Any]) -> tuple[Any, ...]:
    """A row of ``table`` as `upsert` takes it: its ``columns`` (by name) in the table's order, each
    JSON column's value encoded as JSON text (by msgspec; None is JSON ``null``, as SQLAlchemy's JSON
    type stores it)."""
    pick, json_columns = _layout(table)
    if json_columns:
        columns = dict(columns)
        for name in json_columns:
            columns[name] = _json_text(columns[name])
    return pick(columns)


def _json_text(value: Any) -> str:
    import msgspec.json  # here: a store read (`healthbench runs`) need not load msgspec (~25 ms)

    return msgspec.json.encode(value).decode()


@functools.cache
def _layout(table: Table) -> tuple[Callable[[Mapping[str, Any]], tuple[Any, ...]], tuple[str, ...]]:
    """How `row_values` picks ``table``'s columns (a tuple: every table has several) and which are JSON."""
    names = [c.name for c in table.columns]
    assert len(names) > 1
    return operator.itemgetter(*names), tuple(c.name for c in table.columns if isinstance(c.type, JSON))


@dataclass(frozen=True)
class _DriverStatement:
    """A statement compiled for a dialect, as its driver takes it: the SQL text, and the parameter
    names when the driver takes named parameters (psycopg; None: positional, in the names' order)."""

    sql: str
    names: tuple[str, ...] | None

    def params(self, values: Sequence[Any]) -> Any:
        """One execution's parameters: ``values`` in the names' order."""
        return tuple(values) if self.names is None else dict(zip(self.names, values, strict=True))


_driver_statements: dict[tuple[Any, ...], _DriverStatement] = {}


def _driver_statement(
    dialect: Dialect, memo: tuple[Any, ...], build: Callable[[], tuple[Any, tuple[str, ...]]]
) -> _DriverStatement:
    """The statement ``build`` makes (with its parameters' names, in order), compiled for ``dialect``
    once per dialect, driver and ``memo`` (what names the statement): what `upsert` hands to the
    driver, with none of SQLAlchemy's per-execution work."""
    full = (dialect.name, dialect.driver, *memo)
    known = _driver_statements.get(full)
    if known is None:
        statement, names = build()
        compiled = statement.compile(dialect=dialect)
        if dialect.positional:
            assert tuple(compiled.positiontup or ()) == names, f"{memo[0]} parameters out of order"
        known = _driver_statements[full] = _DriverStatement(
            str(compiled), None if dialect.positional else names
        )
    return known


def _upsert(dialect_name: str, table: Table) -> tuple[Any, tuple[str, ...]]:
    """The INSERT ... ON CONFLICT DO UPDATE of `upsert` (compiled once, `_driver_statement`), and its
    parameters: the table's columns in order."""
    # the dialect's own insert, imported when first written with: a store read (`healthbench runs`)
    # never loads PostgreSQL's dialect for a SQLite store
    if dialect_name == "postgresql":
        from sqlalchemy.dialects import postgresql as dialect
    else:
        from sqlalchemy.dialects import sqlite as dialect  # type: ignore[no-redef]
    insert = dialect.insert(table)
    keys = [c.name for c in table.primary_key.columns]
    update = {c.name: insert.excluded[c.name] for c in table.columns if c.name not in keys}
    columns = tuple(c.name for c in table.columns)
    return insert.on_conflict_do_update(index_elements=keys, set_=update), columns
