"""Bad inputs and faults, table-driven: each exits non-zero with exactly one line on stderr (no
traceback), and nothing already stored is lost or changed."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pg_fixtures import PG_PORT, PgServer
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.errors import StoreError
from healthbench.runner.run import prepare_eval
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats
from healthbench.testing.process import fake_server_process

runner = CliRunner()
META_FIXTURE = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"


def conversation(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "prompt": [{"role": "user", "content": "I have a mild headache. What should I do?"}],
        "prompt_id": "bad-1",
        "rubrics": [{"criterion": "Suggests rest and fluids", "points": 5, "tags": []}],
    }
    row.update(changes)
    return row


def jsonl(*rows: dict[str, object]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def snapshot(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, sorted: what "nothing stored was lost or changed" compares."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(map(tuple, conn.execute(f'SELECT * FROM "{t}"')), key=repr) for t in tables}


@pytest.fixture(scope="module")
def base_store(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding a finished run ``base`` and a run ``unanswered`` that has no answer yet."""
    db = tmp_path_factory.mktemp("base") / "s.db"
    result = runner.invoke(app, [*model_args(server), "--store", str(db), "--name", "base", "--limit", "2"])
    assert result.exit_code == 0, result.output
    config = build_config(
        {"model": {"spec": "cand", "base_url": server}, "judge": {"spec": "judge", "base_url": server}},
        {"limit": 2},
    )
    prepare_eval(Store(db), config, "unanswered")
    return db


def model_args(url: str) -> list[str]:
    return ["run", "--model", "cand", "--base-url", url, "--judge", "judge", "--judge-base-url", url]


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Path, str], list[str]]  # (scratch directory, fake server URL) -> arguments
    message: str  # a part of the one line on stderr
    files: dict[str, str] = field(default_factory=dict)  # written into the scratch directory first
    env: dict[str, str] = field(default_factory=dict)
    code: int = 1
    no_call: bool = False  # the fake server must see no request
    skip_if_local: bool = False  # only meaningful without the `local` extra


CASES = [
    Case(
        "dataset-and-data",
        lambda d, u: ["run", "--dataset", "demo", "--data", str(d / "ok.jsonl")],
        "--dataset and --data",
        files={"ok.jsonl": jsonl(conversation())},
    ),
    Case("resume-with-model", lambda d, u: ["run", "--resume", "base", "--model", "x"], "drop --model"),
    Case("resume-with-name", lambda d, u: ["run", "--resume", "base", "--name", "y"], "drop --name"),
    Case(
        "resume-with-timeout",
        lambda d, u: ["run", "--resume", "base", "--timeout", "5", "--temperature", "1"],
        "drop --temperature, --timeout",
    ),
    Case(
        "resume-with-newest-flags",
        lambda d, u: ["run", "--resume", "base", "--profile", "inspect", "--completions", "physician"],
        "drop --profile, --completions",
    ),
    Case("resume-unknown", lambda d, u: ["run", "--resume", "nosuch"], "nosuch"),
    Case(
        "labels-with-judge",
        lambda d, u: ["meta-eval", "--labels", str(d / "l.jsonl"), "--judge", "openai/gpt-4.1"],
        "--labels scores labels made elsewhere",
    ),
    Case("min-physician-ratings", lambda d, u: ["meta-eval", "--min-physician-ratings", "-1"], "0 or more"),
    Case("fake-server-port", lambda d, u: ["fake-server", "--port", "70000"], "--port 70000"),
    Case("data-is-a-directory", lambda d, u: ["run", "--data", str(d)], "is a directory"),
    Case(
        "markup-in-path",
        lambda d, u: ["run", "--data", str(d / "[bold red]x[/].jsonl")],
        "[bold red]x[/].jsonl: file not found",
    ),
    Case(
        "bad-role",
        lambda d, u: ["run", "--data", str(d / "d.jsonl")],
        "d.jsonl:1 field 'prompt.0.role'",
        files={"d.jsonl": jsonl(conversation(prompt=[{"role": "robot", "content": "hi"}]))},
    ),
    Case(
        "ends-with-assistant",
        lambda d, u: ["run", "--data", str(d / "d.jsonl")],
        "the last turn is 'assistant'",
        files={
            "d.jsonl": jsonl(
                conversation(
                    prompt=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
                )
            )
        },
    ),
    Case(
        "empty-criterion",
        lambda d, u: ["run", "--data", str(d / "d.jsonl")],
        "field 'rubrics.0.criterion': the criterion is empty",
        files={"d.jsonl": jsonl(conversation(rubrics=[{"criterion": " ", "points": 5, "tags": []}]))},
    ),
    Case(
        "nan-points",
        lambda d, u: ["run", "--data", str(d / "d.jsonl")],
        "points is NaN",
        files={
            "d.jsonl": '{"prompt": [{"role": "user", "content": "hi"}], "prompt_id": "p", '
            '"rubrics": [{"criterion": "c", "points": NaN, "tags": []}]}\n'
        },
    ),
    Case(
        "missing-key",
        lambda d, u: ["run", "--model", "openai/gpt-4.1", "--judge", "judge", "--judge-base-url", u],
        "OPENAI_API_KEY",
        env={"OPENAI_API_KEY": ""},
        no_call=True,
    ),
    Case(
        "meta-eval-missing-key",
        lambda d, u: ["meta-eval", "--judge", "openai/gpt-4.1"],
        "OPENAI_API_KEY",
        env={"OPENAI_API_KEY": ""},
    ),
    Case(
        "missing-extra",
        lambda d, u: ["run", "--limit", "1"],  # the offline default needs the `local` extra
        "pip install 'healthbench[local]'",
        skip_if_local=True,
    ),
    Case(
        "regrade-missing-answers",
        lambda d, u: ["regrade", "unanswered", "--judge", "judge", "--judge-base-url", u],
        "has no answer for 2 of 2 conversations",
        no_call=True,
    ),
    Case(
        "regrade-missing-key",
        lambda d, u: ["regrade", "base", "--judge", "anthropic/claude-sonnet-4-5"],
        "ANTHROPIC_API_KEY",
        env={"ANTHROPIC_API_KEY": ""},
        no_call=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_loses_nothing(
    case: Case, server: str, base_store: Path, tmp_path: Path
) -> None:
    if case.skip_if_local and importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("the local extra is installed")
    db = tmp_path / "s.db"
    for part in base_store.parent.glob("s.db*"):  # the database and its WAL
        shutil.copy(part, tmp_path / part.name)
    for name, text in case.files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    before = snapshot(db)
    assert {"base", "unanswered"} <= {row[1] for row in before["runs"]}
    reset_stats(server)
    args = [*case.args(tmp_path, server)]
    if args[0] in ("run", "regrade", "meta-eval"):
        args += ["--store", str(db)]
    result = runner.invoke(app, args, env=case.env)
    assert result.exit_code == case.code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith("error: ") and case.message in lines[0], lines[0]
    assert snapshot(db) == before  # nothing stored was lost or changed, no run was left behind
    if case.no_call:
        assert fetch_stats(server)["requests"] == 0


def test_run_name_with_markup_round_trips(server: str, tmp_path: Path) -> None:
    db, name = tmp_path / "s.db", "[bold red]x[/]"
    result = runner.invoke(app, [*model_args(server), "--store", str(db), "--name", name, "--limit", "1"])
    assert result.exit_code == 0, result.output
    listing = runner.invoke(app, ["runs", "--store", str(db)], env={"COLUMNS": "200"})
    assert name in listing.output
    again = runner.invoke(app, ["results", name, "--store", str(db)])
    assert again.exit_code == 0 and name in again.output


def test_runs_shows_a_local_file_with_its_sha256(server: str, tmp_path: Path) -> None:
    data = tmp_path / "mine.jsonl"
    data.write_bytes(b"\xef\xbb\xbf" + jsonl(conversation()).encode())  # a UTF-8 BOM is accepted
    db = tmp_path / "s.db"
    result = runner.invoke(app, [*model_args(server), "--store", str(db), "--data", str(data)])
    assert result.exit_code == 0, result.output
    listing = runner.invoke(app, ["runs", "--store", str(db)], env={"COLUMNS": "300"})
    import hashlib

    assert f"mine.jsonl sha256:{hashlib.sha256(data.read_bytes()).hexdigest()}" in listing.output


# -- faults that end a run: in subprocesses, as a user meets them -----------------------------------
def cli(url: str, db: Path | str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "healthbench", *model_args(url), "--store", str(db), "--name", "r", *extra]


def wait_for_requests(url: str, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while fetch_stats(url)["requests"] < count:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)


def status_of(db: Path, name: str) -> str:
    run = Store(db).get_run(name)
    assert run is not None
    return run.status


def test_sigterm_marks_the_run_interrupted_and_prints_the_resume_command(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with fake_server_process("--latency", "0.3") as url:
        process = subprocess.Popen(
            cli(url, db, "--max-connections", "2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        wait_for_requests(url, 3)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert err.strip().splitlines() == [
        f"error: terminated; everything finished so far is saved; continue with: "
        f"healthbench run --resume r --store {db}"
    ]
    assert status_of(db, "r") == "interrupted"


def test_an_endpoint_that_stops_answering_ends_the_run_after_the_allowed_outage(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = {**os.environ, "COLUMNS": "200"}
    with fake_server_process("--latency", "0.2") as url:
        process = subprocess.Popen(
            cli(url, db, "--max-connections", "2", "--max-outage", "2", "--max-retries", "1000"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        wait_for_requests(url, 4)
    # the server is gone: the run retries for about --max-outage seconds, then stops
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "has not answered for" in lines[0] and "--max-outage 2" in lines[0], err
    assert lines[0].endswith(f"continue with: healthbench run --resume r --store {db}")
    assert "retrying, next attempt in" in out  # the outage was shown while it lasted (plain lines)
    assert status_of(db, "r") != "running"
    assert "overall_score" not in out  # no score over part of the conversations


def test_a_run_missing_answers_exits_non_zero_with_the_resume_command(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    faults = ["--fault-rate", "0.5", "--rate-limit-weight", "0", "--unavailable-weight", "0"]
    with fake_server_process(*faults, "--garbage-weight", "0") as url:
        result = subprocess.run(
            cli(url, db, "--max-retries", "0", "--max-connections", "1"),
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "300"},
        )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"continue with: healthbench run --resume r --store {db}")
    if "overall" in result.stdout:  # a score over part of the conversations is labelled so
        assert "PARTIAL:" in result.stdout


def test_results_of_a_run_missing_answers_label_the_score_partial(server: str, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = runner.invoke(app, [*model_args(server), "--store", str(db), "--name", "r", "--limit", "2"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:  # one answer lost, as after a failed sample
        conn.execute(
            "UPDATE samples SET completion = NULL, error = 'boom' "
            "WHERE rowid = (SELECT MIN(rowid) FROM samples)"
        )
    shown = runner.invoke(app, ["results", "r", "--store", str(db)], env={"COLUMNS": "300"})
    assert "PARTIAL: 1 of 2 conversations answered" in shown.output


# -- the store failing during a run: one line, a non-zero exit, nothing already stored lost ---------
def test_store_reads_and_status_updates_that_fail_are_one_store_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = Store(db)
    run = store.create_run("r", "eval", {"run": {}}, [("a", {"x": 1})])
    store.engine.dispose()  # the open connections go: the next one meets what is there now
    db.unlink()
    db.mkdir()  # the store file replaced by a folder: nothing can be opened there
    calls: list[Callable[[], object]] = [
        lambda: store.get_run("r"),
        lambda: store.set_status(run.id, "running"),
        lambda: store.sample_progress(run.id),
        lambda: store.grade_progress(run.id),
        lambda: store.cache_get("k"),
        lambda: store.write([("samples", {})]),
    ]
    for call in calls:
        with pytest.raises(StoreError) as info:
            call()
        assert str(info.value) == f"cannot use the store {db}: unable to open database file"


def test_a_postgresql_store_lost_mid_run_stops_it_with_one_line_and_loses_nothing(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    database = pg_url.split("@/")[1].split("?")[0]
    with fake_server_process("--latency", "0.3") as url:
        process = subprocess.Popen(
            cli(url, pg_url, "--max-connections", "2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_requests(url, 6)
        before = _stored_rows(pg_server, database)
        pg_server.admin(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        pg_server.admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
        )
        _, err = process.communicate(timeout=120)
        pg_server.admin(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        after = Store(pg_url)
        run = after.require_run("r")
        samples, grades = len(after.sample_progress(run.id)), len(after.grade_progress(run.id))
        # and the run continues where it stopped
        resumed = subprocess.run(
            [sys.executable, "-m", "healthbench", "run", "--resume", "r", "--store", pg_url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert process.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: cannot use the store postgresql+psycopg://"), err
    assert before[0] > 0 and samples >= before[0] and grades >= before[1]  # nothing stored was lost
    assert resumed.returncode == 0, resumed.stderr
    assert after.require_run("r").status == "finished"


def _stored_rows(server: PgServer, database: str) -> tuple[int, int]:
    """(samples, grades) stored so far, read as the admin (the run's own connections may be cut)."""
    import psycopg

    with psycopg.connect(
        host=str(server.socket_dir), port=PG_PORT, user=server.user, dbname=database, autocommit=True
    ) as conn:
        samples = conn.execute("SELECT count(*) FROM samples").fetchone()
        grades = conn.execute("SELECT count(*) FROM grades").fetchone()
    assert samples is not None and grades is not None
    return int(samples[0]), int(grades[0])
