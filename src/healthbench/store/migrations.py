"""Named schema migrations, applied in order and recorded in ``schema_migrations``.

Each migration is a frozen definition: it spells out the tables and columns as they were when it was
written, never today's ``db.metadata`` (``create_all`` of today's tables would give old and new stores
different histories). Migration 0001 therefore repeats ``db.py``'s table declarations on purpose:
the two are not duplicates to merge. A store opened by any version applies only the migrations it has
not recorded.

Opening is safe under concurrency: the check and the steps run in one transaction holding the store's
migration lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``pg_advisory_xact_lock``), so processes that open
a new store together apply each migration once. A SQLite file with tables but no ``schema_migrations``
belongs to another program and is refused before anything is written to it.

To add a migration: write ``def _000N_what(conn: Connection) -> None`` with explicit DDL (portable to
SQLite and PostgreSQL: ``Table(...).create(conn)``, ``ALTER TABLE ... ADD COLUMN ...``), append one line
``Migration("000N_what", _000N_what),`` at the END of ``MIGRATIONS`` (never edit or reorder applied
ones), update the tables in ``db.py`` to match, and add a case to tests/test_store.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NamedTuple

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
    UniqueConstraint,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import OperationalError

from healthbench.errors import StoreError

SQLITE_SETUP_WAIT = 30.0  # seconds a new SQLite store's setup is retried while another process holds it

MIGRATIONS_TABLE = "schema_migrations"
# any constant: the key of the PostgreSQL advisory lock that serializes migrations of one database
PG_MIGRATION_LOCK = 0x4842_0001


class Migration(NamedTuple):
    name: str
    apply: Callable[[Connection], None]


def _migrations_table(metadata: MetaData) -> Table:
    return Table(
        MIGRATIONS_TABLE,
        metadata,
        Column("name", String(100), primary_key=True),
        Column("applied_at", String(40), nullable=False),
    )


def initial_tables() -> MetaData:
    """The tables of ``0001_initial`` exactly as the first stores have them (frozen: do not edit)."""
    md = MetaData()
    Table(
        "runs",
        md,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("name", String(200), nullable=False, unique=True),
        Column("kind", String(20), nullable=False),
        Column("status", String(20), nullable=False),
        Column("config", JSON, nullable=False),
        Column("created_at", String(40), nullable=False),
        Column("updated_at", String(40), nullable=False),
        Column("parent_run", String(200)),
    )
    Table(
        "items",
        md,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("item_id", String(300), nullable=False),
        Column("record", JSON, nullable=False),
    )
    Table(
        "samples",
        md,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("item_id", String(300), primary_key=True),
        Column("repeat", Integer, primary_key=True),
        Column("completion", Text),
        Column("messages", JSON),
        Column("usage", JSON),
        Column("cost", Float),
        Column("cached", Boolean, nullable=False, default=False),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
    )
    Table(
        "grades",
        md,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("item_id", String(300), primary_key=True),
        Column("repeat", Integer, primary_key=True),
        Column("criterion", Integer, primary_key=True),
        Column("status", String(10), nullable=False),
        Column("explanation", Text),
        Column("raw", Text),
        Column("attempts", Integer, nullable=False),
        Column("usage", JSON),
        Column("cost", Float),
        Column("cached", Boolean, nullable=False, default=False),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
    )
    Table(
        "call_cache",
        md,
        Column("key", String(64), primary_key=True),
        Column("provider", String(40), nullable=False),
        Column("model", String(200), nullable=False),
        Column("text", Text, nullable=False),
        Column("usage", JSON),
        Column("created_at", String(40), nullable=False),
    )
    Table(
        "jobs",
        md,
        Column("id", String(64), primary_key=True),
        Column("run_name", String(200), nullable=False),
        Column("kind", String(20), nullable=False),
        Column("status", String(20), nullable=False),
        Column("request", JSON, nullable=False),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
        Column("updated_at", String(40), nullable=False),
    )
    return md


def _0001_initial(conn: Connection) -> None:
    initial_tables().create_all(conn)


def _0002_drop_unused_jobs(conn: Connection) -> None:
    conn.execute(text("DROP TABLE IF EXISTS jobs"))


def _0003_run_lease(conn: Connection) -> None:
    """Who is executing a run: one process per run name (see lease.py)."""
    for column in (
        "lease_token VARCHAR(64)",
        "lease_host VARCHAR(255)",
        "lease_pid INTEGER",
        "lease_since VARCHAR(40)",
        "lease_expires FLOAT",  # epoch seconds
    ):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {column}"))


def _0004_benchmark_jobs(conn: Connection) -> None:
    """The job service's jobs (with their claim lease), their uploaded files and API token hashes
    (see job_tables.py)."""
    metadata = MetaData()
    Table(
        "benchmark_jobs",
        metadata,
        Column("id", String(40), primary_key=True),
        Column("workspace", String(100), nullable=False),
        Column("name", String(100), nullable=False),
        Column("status", String(20), nullable=False),
        Column("spec", JSON, nullable=False),
        Column("run_name", String(200), nullable=False),
        Column("details", JSON, nullable=False),
        Column("error", Text),
        Column("logs", JSON, nullable=False),
        Column("owner", String(80)),
        Column("lease_until", Float),
        Column("created_at", String(40), nullable=False),
        Column("updated_at", String(40), nullable=False),
        UniqueConstraint("workspace", "name", name="uq_benchmark_jobs_workspace_name"),
    )
    Table(
        "api_tokens",
        metadata,
        Column("token_sha256", String(64), primary_key=True),
        Column("workspaces", JSON, nullable=False),
        Column("label", String(100)),
        Column("created_at", String(40), nullable=False),
    )
    Table(
        "job_uploads",
        metadata,
        Column("job_id", String(40), ForeignKey("benchmark_jobs.id", ondelete="CASCADE"), primary_key=True),
        Column("field", String(40), primary_key=True),
        Column("text", Text, nullable=False),
    )
    metadata.create_all(conn)


def _0006_provider_batches(conn: Connection) -> None:
    """Provider batches of ``--batch`` runs and their requests (see batch_tables.py)."""
    metadata = MetaData()
    Table("runs", metadata, Column("id", Integer, primary_key=True))  # for the foreign key only
    Table(
        "provider_batches",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        Column("role", String(20), nullable=False),
        Column("provider", String(40), nullable=False),
        Column("batch_id", String(200)),
        Column("state", String(20), nullable=False),
        Column("total", Integer, nullable=False),
        Column("done", Integer, nullable=False),
        Column("failed", Integer, nullable=False),
        Column("resubmit_of", Integer),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
        Column("updated_at", String(40), nullable=False),
    )
    Table(
        "batch_requests",
        metadata,
        Column("batch", Integer, ForeignKey("provider_batches.id", ondelete="CASCADE"), primary_key=True),
        Column("custom_id", String(64), primary_key=True),
        Column("run_id", Integer, nullable=False),
        Column("item_id", String(300), nullable=False),
        Column("repeat", Integer, nullable=False),
        Column("criterion", Integer, nullable=False),
        Column("attempt", Integer, nullable=False),
    )
    metadata.tables["provider_batches"].create(conn)
    metadata.tables["batch_requests"].create(conn)


def _0007_job_results(conn: Connection) -> None:
    """Stored result documents of offline jobs (see job_tables.py)."""
    metadata = MetaData()
    Table("benchmark_jobs", metadata, Column("id", String(40), primary_key=True))  # for the foreign key
    Table(
        "job_results",
        metadata,
        Column("job_id", String(40), ForeignKey("benchmark_jobs.id", ondelete="CASCADE"), primary_key=True),
        Column("name", String(40), primary_key=True),
        Column("body", JSON, nullable=False),
    )
    metadata.tables["job_results"].create(conn)


def _0008_run_results(conn: Connection) -> None:
    """A run's revision (bumped by every write of its samples or grades) and its remembered figures
    (table ``run_results``, see db.py and docs/results.md)."""
    conn.execute(text("ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0"))
    metadata = MetaData()
    Table("runs", metadata, Column("id", Integer, primary_key=True))  # for the foreign key
    Table(
        "run_results",
        metadata,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("name", String(40), primary_key=True),
        Column("key", String(64), nullable=False),
        Column("body", Text, nullable=False),
    )
    metadata.tables["run_results"].create(conn)


def _0009_drop_run_results(conn: Connection) -> None:
    """0008 undone: figures are computed each time they are shown (no remembered figures, no revision)."""
    conn.execute(text("DROP TABLE run_results"))
    conn.execute(text("ALTER TABLE runs DROP COLUMN revision"))


def _0010_grade_judge(conn: Connection) -> None:
    """Grades keyed by judge too (judge panels, docs/panels.md): ``grades`` rebuilt with a ``judge``
    column in its primary key (run, item, repeat, criterion, judge), every stored grade given its run's
    judge (the spec text of the stored run config's ``judge``; '' if it has none). ``batch_requests``
    gains the judge of each request ('' for the candidate's)."""
    metadata = MetaData()
    Table("runs", metadata, Column("id", Integer, primary_key=True))  # for the foreign key
    new = Table(
        "grades_0010",
        metadata,
        Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        Column("item_id", String(300), primary_key=True),
        Column("repeat", Integer, primary_key=True),
        Column("criterion", Integer, primary_key=True),
        Column("judge", String(200), primary_key=True),
        Column("status", String(10), nullable=False),
        Column("explanation", Text),
        Column("raw", Text),
        Column("attempts", Integer, nullable=False),
        Column("usage", JSON),
        Column("cost", Float),
        Column("cached", Boolean, nullable=False, default=False),
        Column("error", Text),
        Column("created_at", String(40), nullable=False),
    )
    new.create(conn)
    copied = ", ".join(c.name for c in new.columns if c.name != "judge")
    for run_id, config in conn.execute(text("SELECT id, config FROM runs")).all():
        stored = json.loads(config) if isinstance(config, str) else config
        run_config = (stored or {}).get("run") or {}  # (the stored record: `runner.run.stored_record`)
        judge = str((run_config.get("judge") or {}).get("spec") or "")
        conn.execute(
            text(
                f"INSERT INTO grades_0010 ({copied}, judge) "
                f"SELECT {copied}, :judge FROM grades WHERE run_id = :run"
            ),
            {"judge": judge, "run": run_id},
        )
    conn.execute(text("DROP TABLE grades"))
    conn.execute(text("ALTER TABLE grades_0010 RENAME TO grades"))
    conn.execute(text("ALTER TABLE batch_requests ADD COLUMN judge VARCHAR(200) NOT NULL DEFAULT ''"))


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", _0001_initial),
    Migration("0002_drop_unused_jobs", _0002_drop_unused_jobs),
    Migration("0003_run_lease", _0003_run_lease),
    Migration("0004_benchmark_jobs", _0004_benchmark_jobs),
    Migration("0006_provider_batches", _0006_provider_batches),
    Migration("0007_job_results", _0007_job_results),
    Migration("0008_run_results", _0008_run_results),
    Migration("0009_drop_run_results", _0009_drop_run_results),
    Migration("0010_grade_judge", _0010_grade_judge),
)


def migrate(engine: Engine, where: str) -> list[str]:
    """Apply the migrations not yet recorded (``where`` names the store in errors); returns their names.

    On SQLite, switching a new file to WAL and taking the write lock can answer "database is locked" at
    once, without waiting, while another process sets the same new file up: that is retried for up to
    `SQLITE_SETUP_WAIT` seconds (the other process's migrations are then found applied)."""
    if engine.dialect.name != "sqlite":
        return _migrate(engine, where)
    deadline = time.monotonic() + SQLITE_SETUP_WAIT
    while True:
        try:
            return _migrate(engine, where)
        except OperationalError as exc:
            if "locked" not in str(exc.orig) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _migrate(engine: Engine, where: str) -> list[str]:
    with engine.connect() as conn:
        if _pending(conn, where) == []:  # the common case: no lock taken, nothing written
            return []
    if engine.dialect.name == "sqlite":
        _use_wal(engine)
    with engine.connect() as conn:
        _lock(conn)
        pending = _pending(conn, where)
        table = _migrations_table(MetaData())
        table.create(conn, checkfirst=True)
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        for migration in pending:
            migration.apply(conn)
            conn.execute(table.insert().values(name=migration.name, applied_at=stamp))
        conn.commit()
    return [m.name for m in pending]


def applied(conn: Connection) -> list[str]:
    """The names recorded in ``schema_migrations`` (empty for a new store)."""
    if not inspect(conn).has_table(MIGRATIONS_TABLE):
        return []
    table = _migrations_table(MetaData())
    return list(conn.execute(select(table.c.name).order_by(table.c.name)).scalars())


def _pending(conn: Connection, where: str) -> list[Migration]:
    tables = set(inspect(conn).get_table_names())
    if conn.dialect.name == "sqlite" and tables and MIGRATIONS_TABLE not in tables:
        raise StoreError(
            f"{where} is a SQLite database of another program (tables {', '.join(sorted(tables)[:5])}, "
            "no healthbench schema_migrations); refusing to write to it"
        )
    done = set(applied(conn))
    unknown = done - {m.name for m in MIGRATIONS}
    if unknown:
        raise StoreError(
            f"{where} was written by a newer healthbench (migrations {', '.join(sorted(unknown))}); "
            "upgrade healthbench to use it"
        )
    return [m for m in MIGRATIONS if m.name not in done]


def _use_wal(engine: Engine) -> None:
    with engine.connect() as conn:
        if conn.exec_driver_sql("PRAGMA journal_mode").scalar() != "wal":
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
