"""The run store: one SQL database (SQLite in WAL mode by default) holding runs, their conversations,
samples, grades and the call cache. Written with SQLAlchemy Core so the same code can speak PostgreSQL.

Tables are versioned by named migrations recorded in ``schema_migrations``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
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
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from healthbench.store.job_tables import create_job_tables

STORE_ENV = "HEALTHBENCH_STORE"

metadata = MetaData()

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("applied_at", String(40), nullable=False),
)

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
)

items = Table(
    "items",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("item_id", String(300), nullable=False),
    Column("record", JSON, nullable=False),
)

samples = Table(
    "samples",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("item_id", String(300), primary_key=True),
    Column("repeat", Integer, primary_key=True),
    Column("completion", Text),
    Column("messages", JSON),  # the messages as sent, system message included
    Column("usage", JSON),
    Column("cost", Float),
    Column("cached", Boolean, nullable=False, default=False),
    Column("error", Text),
    Column("created_at", String(40), nullable=False),
)

grades = Table(
    "grades",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("item_id", String(300), primary_key=True),
    Column("repeat", Integer, primary_key=True),
    Column("criterion", Integer, primary_key=True),
    Column("status", String(10), nullable=False),  # met, not_met, ungraded
    Column("explanation", Text),
    Column("raw", Text),
    Column("attempts", Integer, nullable=False),
    Column("usage", JSON),
    Column("cost", Float),
    Column("cached", Boolean, nullable=False, default=False),
    Column("error", Text),
    Column("created_at", String(40), nullable=False),
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

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_name", String(200), nullable=False),
    Column("kind", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("request", JSON, nullable=False),
    Column("error", Text),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
)


def _initial(conn: Connection) -> None:
    metadata.create_all(conn)


MIGRATIONS: list[tuple[str, Callable[[Connection], None]]] = [
    ("0001_initial", _initial),
    ("0002_benchmark_jobs", create_job_tables),
]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def default_store_path() -> Path:
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    return Path(platformdirs.user_data_dir("healthbench")) / "healthbench.db"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def connect(target: str | os.PathLike[str] | None = None) -> Engine:
    """An engine for a SQLAlchemy URL or a SQLite file path (created with its folder if needed)."""
    text = str(target) if target is not None else str(default_store_path())
    if "://" in text:
        engine = create_engine(text)
    else:
        path = Path(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(f"sqlite:///{path}")
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    migrate(engine)
    return engine


def migrate(engine: Engine) -> list[str]:
    """Apply the named migrations not yet recorded; returns the names applied."""
    applied: list[str] = []
    with engine.begin() as conn:
        schema_migrations.create(conn, checkfirst=True)
        done = set(conn.execute(select(schema_migrations.c.name)).scalars())
        for name, step in MIGRATIONS:
            if name in done:
                continue
            step(conn)
            conn.execute(schema_migrations.insert().values(name=name, applied_at=now()))
            applied.append(name)
    return applied


def upsert(
    conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]] | Iterable[Mapping[str, Any]]
) -> None:
    """Insert rows, replacing any row with the same primary key (work items are idempotent)."""
    rows = list(rows)
    if not rows:
        return
    dialect = conn.dialect.name
    insert = postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)
    keys = [c.name for c in table.primary_key.columns]
    update = {c.name: insert.excluded[c.name] for c in table.columns if c.name not in keys}
    conn.execute(insert.on_conflict_do_update(index_elements=keys, set_=update), rows)
