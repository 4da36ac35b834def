"""The store on both back ends: URLs, bad stores as one-line errors, migrations, concurrent opening,
idempotent writes and group-commit errors."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import one_line_error
from sqlalchemy import create_engine, event, inspect, text
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.errors import RunError, StoreError, StoreMissingError
from healthbench.store import Store, db
from healthbench.store.batch_tables import batch_metadata
from healthbench.store.job_tables import job_metadata
from healthbench.store.location import STORE_ENV, hide_password, store_url
from healthbench.store.migrations import MIGRATIONS, initial_tables, migrate
from healthbench.store.runs import CacheEntry, GradeRow, GradeStatus, Rows, SampleRow
from healthbench.store.writer import StoreWriter

ALL_MIGRATIONS = [m.name for m in MIGRATIONS]
cli = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None):
    return cli.invoke(app, list(args), env=env)


# -- where the store is ------------------------------------------------------------------------------
def test_paths_and_urls_name_the_same_file(tmp_path: Path) -> None:
    file = tmp_path / "x.db"
    assert store_url(str(file)).database == str(file)
    assert store_url(f"sqlite:///{file}").database == str(file)
    assert store_url(None, {STORE_ENV: f"sqlite:///{file}"}).database == str(file)
    assert store_url("rel.db").database == str(Path("rel.db").absolute())
    assert store_url("postgresql://u@h/db").drivername == "postgresql+psycopg"  # psycopg 3, not psycopg2


def test_cli_store_url_is_not_turned_into_a_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Store(tmp_path / "x.db").create_run("r1", "eval", {"run": _run_cfg()}, [])
    result = invoke("runs", "--store", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.exit_code == 0, result.output
    assert "r1" in result.stdout
    result = invoke("runs", env={STORE_ENV: f"sqlite:///{tmp_path / 'x.db'}"})
    assert "r1" in result.stdout
    assert not any(p.name.startswith("sqlite") for p in tmp_path.iterdir())  # no ./sqlite:/... file


@pytest.mark.parametrize(
    "mangled", ["postgresql+psycopg:/hb:secret@/db?host=/tmp/pg", "sqlite:/tmp/x.db", "postgresql:/db"]
)
def test_a_url_with_a_slash_missing_is_refused_not_made_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mangled: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="looks like a URL with a slash missing") as info:
        Store(mangled)
    assert "secret" not in str(info.value)
    result = invoke("run", "--store", mangled)
    assert result.exit_code == 1 and "looks like a URL with a slash missing" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no ./postgresql+psycopg:/... file


def test_passwords_are_hidden_everywhere(pg_url: str) -> None:
    url = pg_url.replace("postgresql+psycopg://postgres@", "postgresql+psycopg://postgres:hunter2@")
    store = Store(url)  # trust authentication: the password is ignored by the server
    assert "hunter2" not in store.url and "***" in store.url
    store.create_run("r1", "eval", {"run": _run_cfg()}, [])
    result = invoke("runs", "--store", url)
    assert result.exit_code == 0 and "hunter2" not in result.output
    assert hide_password("postgresql://u:p%40ss@h/db and more") == "postgresql://u:***@h/db and more"


def test_unreachable_postgresql_is_one_line_without_the_password() -> None:
    message = one_line_error(invoke("runs", "--store", "postgresql+psycopg://bob:hunter2@127.0.0.1:1/db"))
    assert "hunter2" not in message and "bob:***@127.0.0.1:1/db" in message


# -- bad stores ----------------------------------------------------------------------------------------
def _bad_store(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A bad --store of ``kind`` and a piece of the expected message."""
    if kind == "directory":
        return str(tmp_path), "is a directory"
    if kind == "unwritable":
        blocker = tmp_path / "file"
        blocker.write_text("x")
        return str(blocker / "sub" / "x.db"), "cannot create the store folder"
    if kind == "random bytes":
        (tmp_path / "r.db").write_bytes(bytes(range(256)) * 8)
        return str(tmp_path / "r.db"), "is not a SQLite database"
    if kind == "text":
        (tmp_path / "t.db").write_text("hello\n")
        return str(tmp_path / "t.db"), "is not a SQLite database"
    if kind == "corrupt":
        (tmp_path / "c.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
        return str(tmp_path / "c.db"), "cannot open the store"
    if kind == "unsupported":
        return "mysql://u:secret@h/db", "unsupported database"
    raise AssertionError(kind)


BAD_KINDS = ["directory", "unwritable", "random bytes", "text", "corrupt", "unsupported"]


@pytest.mark.parametrize(
    ("kind", "command"),
    # (a read-only command on a store that cannot be created is test_read_only_commands_never_create...)
    [(k, c) for k in BAD_KINDS for c in ("run", "runs", "results") if k != "unwritable" or c == "run"],
)
def test_a_bad_store_is_one_line(kind: str, command: str, tmp_path: Path) -> None:
    target, expected = _bad_store(kind, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    args = {"run": ["run", "--limit", "1"], "runs": ["runs"], "results": ["results", "x"]}[command]
    message = one_line_error(invoke(*args, "--store", target))
    assert expected in message and "secret" not in message
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_sqlite_file_of_another_program_is_refused_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.close()
    before = other.read_bytes()
    with pytest.raises(StoreError, match="another program"):
        Store(other)
    message = one_line_error(invoke("runs", "--store", str(other)))
    assert "another program" in message and str(other) in message
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


def test_read_only_commands_never_create_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "none.db"
    result = invoke("runs", "--store", str(missing))
    assert result.exit_code == 0 and "no runs" in result.stdout
    assert "no store at" in one_line_error(invoke("results", "x", "--store", str(missing)))
    with pytest.raises(StoreMissingError):
        Store(missing, create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_store_of_a_newer_version_is_refused(store_target: str) -> None:
    Store(store_target).close()
    store = Store(store_target)
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO schema_migrations VALUES ('9999_future', 'x')"))
    store.close()
    with pytest.raises(StoreError, match="newer healthbench"):
        Store(store_target)


# -- migrations ----------------------------------------------------------------------------------------
def _tables(store: Store) -> set[str]:
    return set(inspect(store.engine).get_table_names())


def _applied(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(text("SELECT name FROM schema_migrations ORDER BY name")).scalars())


def test_migrations_from_empty(store_target: str) -> None:
    store = Store(store_target)
    assert _applied(store) == ALL_MIGRATIONS
    # the migrations leave exactly the tables and columns the code declares today
    declared = {**db.metadata.tables, **job_metadata.tables, **batch_metadata.tables}
    inspector = inspect(store.engine)
    assert {
        name: {c["name"] for c in inspector.get_columns(name)}
        for name in inspector.get_table_names()
        if name != "schema_migrations"
    } == {name: {c.name for c in table.columns} for name, table in declared.items()}
    assert migrate(store.engine, "x") == []  # idempotent: nothing left to apply


def test_a_store_made_by_the_first_version_is_migrated_and_kept(store_target: str) -> None:
    """The fixture is built with the frozen 0001 DDL, as stores written before 0002 are."""
    engine = create_engine(store_url(store_target))
    old = initial_tables()
    with engine.begin() as conn:
        old.create_all(conn)
        conn.execute(
            text(
                "CREATE TABLE schema_migrations "
                "(name VARCHAR(100) PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)"
            )
        )
        conn.execute(text("INSERT INTO schema_migrations VALUES ('0001_initial', '2026-01-01')"))
        conn.execute(
            old.tables["runs"]
            .insert()
            .values(
                name="old",
                kind="eval",
                status="finished",
                config={"run": {"a": [1]}},
                created_at="t",
                updated_at="t",
            )
        )
        conn.execute(
            old.tables["jobs"]
            .insert()
            .values(
                id="j", run_name="old", kind="eval", status="done", request={}, created_at="t", updated_at="t"
            )
        )
    engine.dispose()
    store = Store(store_target)
    assert _applied(store) == ALL_MIGRATIONS
    assert "jobs" not in _tables(store)
    run = store.require_run("old")
    assert (run.status, run.config) == ("finished", {"run": {"a": [1]}})
    columns = {c["name"] for c in inspect(store.engine).get_columns("runs")}
    assert {"lease_token", "lease_host", "lease_pid", "lease_since", "lease_expires"} <= columns


def test_a_store_with_remembered_figures_is_migrated_and_kept(store_target: str) -> None:
    """0009 drops what 0008 added (table run_results, column runs.revision) and keeps the runs."""
    store = Store(store_target)
    run = store.create_run("old", "eval", {"run": _run_cfg()}, [("c1", {})])
    store.put(run.id, samples=[_sample("kept", False)])
    with store.engine.begin() as conn:  # a store as 0008 left it, figures remembered
        conn.execute(text("DELETE FROM schema_migrations WHERE name = '0009_drop_run_results'"))
        conn.execute(text("ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 0"))
        conn.execute(
            text(
                "CREATE TABLE run_results (run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,"
                " name VARCHAR(40) NOT NULL, key VARCHAR(64) NOT NULL, body TEXT NOT NULL,"
                " PRIMARY KEY (run_id, name))"
            )
        )
        conn.execute(text(f"INSERT INTO run_results VALUES ({run.id}, 'figures', 'k', '{{}}')"))
    store.close()
    store = Store(store_target)
    assert _applied(store) == ALL_MIGRATIONS
    assert "run_results" not in _tables(store)
    assert "revision" not in {c["name"] for c in inspect(store.engine).get_columns("runs")}
    assert store.load_samples(store.require_run("old").id)[("c1", 0)].completion == "kept"
    store.close()


def test_a_store_before_judge_panels_gets_its_grades_keyed_by_their_runs_judge(store_target: str) -> None:
    """0010 rebuilds ``grades`` with ``judge`` in its key, each stored grade given its run's judge."""
    store = Store(store_target)
    runs = [store.create_run(name, "eval", {"run": _run_cfg()}, [("c1", {})]) for name in ("a", "b")]
    with store.engine.begin() as conn:  # a store as 0009 left it: grades without a judge, one row each
        conn.execute(text("DELETE FROM schema_migrations WHERE name = '0010_grade_judge'"))
        conn.execute(text("DROP TABLE grades"))
        conn.execute(text("ALTER TABLE batch_requests DROP COLUMN judge"))
        initial_tables().tables["grades"].create(conn)
        conn.execute(
            text("UPDATE runs SET config = :c WHERE name = 'b'"),
            {"c": json.dumps({"run": {"judge": {"spec": "k"}}})},
        )
        for run in runs:
            conn.execute(
                text(
                    "INSERT INTO grades (run_id, item_id, repeat, criterion, status, attempts, cached,"
                    f" created_at) VALUES ({run.id}, 'c1', 0, 2, 'met', 1, false, 't')"
                )
            )
    store.close()
    store = Store(store_target)
    assert _applied(store) == ALL_MIGRATIONS
    assert [k for run in runs for k in store.load_grades(run.id)] == [("c1", 0, 2, "j"), ("c1", 0, 2, "k")]
    # another member's verdict on the same criterion is a row of its own
    other = GradeRow("c1", 0, None, None, False, None, 2, GradeStatus.NOT_MET, None, 1, judge="m2")
    store.put(runs[0].id, grades=[other])
    assert store.load_verdicts(runs[0].id, item_ids=["c1"], repeat=0) == {
        ("c1", 2, "j"): ("met", None),
        ("c1", 2, "m2"): ("not_met", None),
    }
    assert "judge" in {c["name"] for c in inspect(store.engine).get_columns("batch_requests")}
    store.close()


def test_the_initial_migration_is_today_minus_later_changes() -> None:
    """0001 is frozen: the tables it creates never follow edits of db.py."""
    assert set(initial_tables().tables) == {"runs", "items", "samples", "grades", "call_cache", "jobs"}
    assert "lease_token" not in initial_tables().tables["runs"].c


OPENER = """
import sys, time
from healthbench.errors import HealthBenchError
from healthbench.store import Store, db
from healthbench.store.job_tables import job_metadata
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
try:
    Store(sys.argv[1]).create_run(sys.argv[3], "eval", {"run": {}}, [("c", {})])
except HealthBenchError as exc:
    sys.exit(f"error: {exc}")
"""


def test_processes_opening_a_new_store_together_do_not_race(store_target: str, tmp_path: Path) -> None:
    trials, processes = (3, 4)
    for trial in range(trials):
        target = store_target if trial == 0 or "://" in store_target else str(tmp_path / f"t{trial}.db")
        if "://" in store_target and trial:
            break  # one fresh PostgreSQL database per test
        start = time.time() + 2.0
        started = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, target, str(start), f"r{i}"], stderr=subprocess.PIPE, text=True
            )
            for i in range(processes)
        ]
        errors = [p.communicate(timeout=120)[1] for p in started]
        assert [p.returncode for p in started] == [0] * processes, errors
        store = Store(target)
        assert sorted(r.name for r in store.list_runs()) == [f"r{i}" for i in range(processes)]
        assert _applied(store) == ALL_MIGRATIONS
        store.close()


# -- writes --------------------------------------------------------------------------------------------
def _run_cfg() -> dict[str, object]:
    return {"judge": {"spec": "j"}, "model": {"spec": "m"}, "dataset": "demo"}


def _sample(completion: str, cached: bool, repeat: int = 0) -> SampleRow:
    usage = {"input_tokens": 3, "output_tokens": 4}
    return SampleRow("c1", repeat, usage, 0.5, cached, None, completion, [{"role": "user", "content": "hi"}])


def test_writes_are_idempotent_and_round_trip_json_and_booleans(store_target: str) -> None:
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {"prompt": [{"a": 1}]})])
    store.put(run.id, samples=[_sample("first", True)])
    store.put(run.id, samples=[_sample("second", False)] * 2)
    rows = store.load_samples(run.id)
    assert list(rows) == [("c1", 0)]
    row = rows[("c1", 0)]
    assert (row.completion, row.cached, row.usage, row.messages) == (
        "second",
        False,
        {"input_tokens": 3, "output_tokens": 4},
        [{"role": "user", "content": "hi"}],
    )
    assert store.load_items(run.id) == [("c1", {"prompt": [{"a": 1}]})]
    store.put(run.id, cache=[CacheEntry("k" * 64, "openai", "m", "t", {"n": 1})] * 2)
    cached = store.cache_get("k" * 64)
    assert cached is not None and (cached.text, cached.usage) == ("t", {"n": 1})
    assert store.cache_has(["k" * 64, "x" * 64]) == {"k" * 64}
    assert store.cache_get("x" * 64) is None
    grade = GradeRow(
        "c1", 0, None, None, False, "boom", 2, GradeStatus.UNGRADED, None, 3, raw="no json", judge="j"
    )
    store.put(run.id, grades=[grade])
    assert store.load_grades(run.id) == {("c1", 0, 2, "j"): grade}


def test_rows_read_back_as_written_and_json_null_stays_json_null(store_target: str) -> None:
    """Rows go to the driver as tuples with their JSON encoded by msgspec: what is read back equals what
    was written (non-ASCII, escapes, None), and a None in a JSON column is JSON ``null`` text, as
    SQLAlchemy's JSON type wrote it (rows written before read the same)."""
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {})])
    odd = 'Sé "q"\\ ✓ 中文 🩺\n\u2028 \x01'
    messages = [{"role": "system", "content": odd}, {"role": "user", "content": "hi"}]
    usage = {"input_tokens": 3, "output_tokens": 4}
    written = [
        SampleRow("c1", 0, usage, 0.25, True, None, odd, messages),
        SampleRow("c1", 1, None, None, False, "boom", None, None),
    ]
    grade = GradeRow("c1", 0, usage, 1e-05, False, None, 3, GradeStatus.MET, odd, 2, judge="j")
    store.put(run.id, samples=written, grades=[grade], cache=[CacheEntry("k" * 64, "openai", "m", odd, None)])
    assert store.load_samples(run.id) == {("c1", 0): written[0], ("c1", 1): written[1]}
    assert store.load_grades(run.id) == {("c1", 0, 3, "j"): grade}
    cached = store.cache_get("k" * 64)
    assert cached is not None and (cached.text, cached.usage) == (odd, None)
    with store.engine.connect() as conn:
        stored = conn.execute(
            text("SELECT messages IS NULL, usage IS NULL FROM samples WHERE repeat = 1")
        ).one()
        assert tuple(stored) == (False, False)  # JSON null, not SQL NULL


def test_cache_lookups_find_exactly_the_keys_held(store_target: str) -> None:
    """Any number of keys finds exactly those held, none twice."""
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [])
    store.put(
        run.id, cache=[CacheEntry(f"{i:064d}", "openai", "m", f"a{i}", {"n": i}) for i in range(0, 40, 2)]
    )
    for n in (1, 2, 3, 5, 8, 9, 17, 33):
        asked = [f"{i:064d}" for i in range(n)]
        found = store.cache_lookup(asked)
        assert {k: (v.text, v.usage) for k, v in found.items()} == {
            f"{i:064d}": (f"a{i}", {"n": i}) for i in range(0, n, 2)
        }
        assert store.cache_has(asked) == set(found)


def test_cache_lookups_read_only_the_keys_asked_for_in_chunks(store_target: str) -> None:
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [])
    entries = [CacheEntry(f"{i:064d}", "openai", "m", f"answer {i}", None) for i in range(1200)]
    store.put(run.id, cache=entries)
    asked = [f"{i:064d}" for i in (5, 700, 1199)] + ["n" * 64, f"{5:064d}"]
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    found = store.cache_lookup(asked)
    assert {k: v.text for k, v in found.items()} == {
        f"{5:064d}": "answer 5", f"{700:064d}": "answer 700", f"{1199:064d}": "answer 1199"
    }  # fmt: skip
    assert len(statements) == 1  # four distinct keys: one chunk
    statements.clear()
    assert len(store.cache_has(f"{i:064d}" for i in range(1100))) == 1100
    assert len(statements) == 3  # 1,100 keys: chunks of 500


def test_a_second_run_with_the_same_name_is_refused(store_target: str) -> None:
    store = Store(store_target)
    store.create_run("r", "eval", {"run": _run_cfg()}, [])
    with pytest.raises(RunError, match="already exists"):
        store.create_run("r", "eval", {"run": _run_cfg()}, [])


def test_a_failed_group_commit_reaches_every_waiting_writer(store_target: str) -> None:
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {})])

    async def main() -> list[BaseException | None]:
        async with StoreWriter(store, run.id) as writer:
            good = [writer.put(Rows(samples=[_sample("ok", False, repeat=i)])) for i in range(3)]
            broken = GradeRow("c1", 0, None, None, False, None, 0, GradeStatus.MET, None, None, judge="j")  # type: ignore[arg-type]
            bad = writer.put(Rows(grades=[broken]))  # attempts is NOT NULL
            results = await asyncio.gather(*good, bad, return_exceptions=True)
        return list(results)

    results = asyncio.run(main())
    assert len(results) == 4 and all(isinstance(r, Exception) for r in results)
    assert len({id(r) for r in results}) == 1  # the same error, handed to each caller
    assert store.load_samples(run.id) == {}  # one transaction: nothing of the batch was written


def test_rows_queued_before_the_deadline_are_committed_together(tmp_path: Path) -> None:
    """Rows queued before the flush's deadline are committed in one transaction; each caller returns
    once its rows are durable."""
    store = Store(tmp_path / "s.db")
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {})])
    commits: list[int] = []
    event.listen(store.engine, "commit", lambda conn: commits.append(1))

    async def put(writer: StoreWriter, repeat: int) -> None:
        await writer.put(Rows(samples=[_sample("ok", False, repeat=repeat)]))
        assert ("c1", repeat) in store.load_samples(run.id)  # durable when put returns

    async def main() -> None:
        async with StoreWriter(store, run.id, wait=0.05) as writer:
            await asyncio.gather(*(put(writer, i) for i in range(3)))
            await put(writer, 3)  # queued alone: committed alone, by its own deadline

    asyncio.run(main())
    assert len(commits) == 2
    assert sorted(store.load_samples(run.id)) == [("c1", i) for i in range(4)]


def test_the_writers_exit_commits_what_is_still_queued(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {})])

    async def main() -> None:
        async with StoreWriter(store, run.id, wait=3600) as writer:
            last = asyncio.create_task(writer.put(Rows(samples=[_sample("ok", False)])))
            await asyncio.sleep(0)  # queued: its deadline is an hour away
            assert not last.done()
        await asyncio.wait_for(last, 60)  # committed by the exit, not by the deadline

    asyncio.run(main())
    assert sorted(store.load_samples(run.id)) == [("c1", 0)]


def test_group_commit_writes_every_batch(store_target: str) -> None:
    store = Store(store_target)
    run = store.create_run("r", "eval", {"run": _run_cfg()}, [("c1", {})])

    async def main() -> None:
        async with StoreWriter(store, run.id) as writer:
            await asyncio.gather(
                *(writer.put(Rows(samples=[_sample("ok", False, repeat=i)])) for i in range(50))
            )

    asyncio.run(main())
    assert sorted(store.load_samples(run.id)) == [("c1", i) for i in range(50)]
