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
from helpers import all_met_labels, meta_eval_rows, one_line_error
from pg_fixtures import PG_PORT, PgServer
from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.data.subset import select
from healthbench.errors import StoreError
from healthbench.runner.run import prepare_eval
from healthbench.store import Store
from healthbench.store.runs import SampleRow
from healthbench.testing.fake_server import fetch_stats, reset_stats

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
    store = Store(db)
    prepare_eval(store, config, "unanswered")
    store.close()
    with sqlite3.connect(db) as conn:  # everything in the database file itself: a copy is byte-exact
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


ALLRESULTS = Path(__file__).parent / "fixtures" / "small_allresults.json"
SIDE_FILES = ("s.db-wal", "s.db-shm")  # made by SQLite when the store is opened; the rows are compared


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (but SQLite's side files) and its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in SIDE_FILES
    }


def write_inputs(d: Path) -> None:
    """The files the cases read: a good `_allresults.json` and bad variants of it, labels, JSONL."""
    good = ALLRESULTS.read_bytes()
    document = json.loads(good)
    examples = document["metadata"]["example_level_metadata"]
    first_rubric = json.dumps(examples[0]["rubric_items"][0]["criterion"]).encode()
    (d / "ok_allresults.json").write_bytes(good)
    (d / "utf8_allresults.json").write_bytes(good.replace(first_rubric[1:-1], b"\xff\xfe", 1))
    (d / "bigint_allresults.json").write_bytes(b'{"score": ' + b"1" * 5000 + b"}")
    (d / "nested_allresults.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (d / "cut_allresults.json").write_bytes(b'{"score": 0.5, "metrics": {"a": "unterminated')
    (d / "empty_allresults.json").write_text(
        json.dumps({**document, "metadata": {"example_level_metadata": []}}), encoding="utf-8"
    )
    (d / "mmlu_allresults.json").write_text(  # simple-evals' layout for another benchmark
        json.dumps({"score": 0.5, "metrics": {"score": 0.5}, "htmls": [], "convos": [], "metadata": None}),
        encoding="utf-8",
    )
    twice = [examples[0], {**examples[1], "prompt_id": examples[0]["prompt_id"]}]
    (d / "twice_allresults.json").write_text(
        json.dumps({**document, "metadata": {"example_level_metadata": twice}}), encoding="utf-8"
    )
    (d / "utf8.jsonl").write_bytes(jsonl(conversation()).encode().replace(b"headache", b"head\xffache"))
    (d / "bigint.jsonl").write_bytes(b'{"prompt_id": ' + b"1" * 5000 + b"}\n")
    (d / "nested.jsonl").write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    rows = [json.loads(line) for line in META_FIXTURE.read_text(encoding="utf-8").splitlines()]
    label = {"completion_id": rows[0]["completion_id"], "rubric": rows[0]["rubric"]}
    (d / "disagree.jsonl").write_text(json.dumps({**label, "criteria_met": True, "label": False}) + "\n")
    (d / "labels_nested.jsonl").write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    (d / "labels_bigint.jsonl").write_bytes(b'{"criteria_met": ' + b"1" * 5000 + b"}\n")
    (d / "precious.txt").write_text("keep me\n")
    (d / "adir").mkdir()


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
    needs: str | None = None  # a module the case needs (skipped without it)
    absent: tuple[str, ...] = ()  # names in the scratch directory that must not exist afterwards
    seconds: float = 30.0  # the command must end within this


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
        ":1: invalid JSON (invalid character at column",
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


# -- issue 20: the commands that read files, stores and clusters -------------------------------------
def readers(name: str, message: str) -> list[Case]:
    """The same bad ``_allresults.json`` given to every command that reads one."""
    return [
        Case(f"import-{name}", lambda d, u: ["import", str(d / f"{name}_allresults.json")], message),
        Case(
            f"analyze-{name}",
            lambda d, u: ["analyze", str(d / f"{name}_allresults.json"), "--out", str(d / "o")],
            message,
            absent=("o",),
        ),
        Case(
            f"compare-{name}",
            lambda d, u: ["compare", str(d / "ok_allresults.json"), str(d / f"{name}_allresults.json")],
            message,
        ),
        Case(
            f"report-{name}",
            lambda d, u: ["report", str(d / f"{name}_allresults.json"), "-o", str(d / "r.html")],
            message,
            absent=("r.html",),
        ),
    ]


def scorers(flag: str, value: str, message: str) -> list[Case]:
    """A bad bootstrap option given to every command that scores: refused where it is parsed."""
    ok = "ok_allresults.json"
    commands: list[tuple[str, Callable[[Path, str], list[str]]]] = [
        ("import", lambda d, u: ["import", str(d / ok), flag, value]),
        ("analyze", lambda d, u: ["analyze", str(d / ok), "--out", str(d / "o"), flag, value]),
        ("compare", lambda d, u: ["compare", str(d / ok), str(d / ok), flag, value]),
        ("report", lambda d, u: ["report", str(d / ok), "-o", str(d / "r.html"), flag, value]),
        ("results", lambda d, u: ["results", "base", "--store", str(d / "s.db"), flag, value]),
        ("run", lambda d, u: [*model_args(u), "--limit", "1", flag, value]),
    ]
    return [
        Case(f"{command}{flag}={value}", args, message, code=2, no_call=True, absent=("o", "r.html"))
        for command, args in commands
    ]


def missing_store(command: str, args: Callable[[Path], list[str]], *, env: bool = False) -> Case:
    """A read-only command given a store that does not exist: refused, and nothing is created."""
    if env:  # the store named by $HEALTHBENCH_STORE
        return Case(
            f"{command}-missing-store-env",
            lambda d, u: args(d),
            "no store at",
            env={"HEALTHBENCH_STORE": "/nonexistent-hb/new.db"},
            absent=("new.db",),
        )
    return Case(
        f"{command}-missing-store",
        lambda d, u: [*args(d), "--store", str(d / "new.db")],
        "no store at",
        absent=("new.db", "new.db-wal", "new.db-shm"),
    )


OK = "ok_allresults.json"
ISSUE_20 = [
    # 1. malformed JSON the fast readers do not catch
    *readers("utf8", "not valid UTF-8"),
    *readers("bigint", "field 'score': number out of range"),
    *readers("nested", "expected a JSON object, got a list"),
    *readers("cut", "invalid JSON (input data was truncated at column"),
    Case(
        "validate-utf8",
        lambda d, u: ["data", "validate", str(d / "utf8.jsonl")],
        "utf8.jsonl:1: not valid UTF-8",
    ),
    Case(
        "validate-bigint",
        lambda d, u: ["data", "validate", str(d / "bigint.jsonl")],
        "bigint.jsonl:1: integer value out of range",
    ),
    Case(
        "validate-nested",
        lambda d, u: ["data", "validate", str(d / "nested.jsonl")],
        "nested.jsonl:1: invalid JSON (arrays or objects nested too deeply",
    ),
    Case(
        "run-nested",
        lambda d, u: ["run", "--data", str(d / "nested.jsonl")],
        "nested.jsonl:1: invalid JSON",
        no_call=True,
    ),
    Case(
        "labels-nested",
        lambda d, u: ["meta-eval", "--labels", str(d / "labels_nested.jsonl"), "--data", str(META_FIXTURE)],
        "labels_nested.jsonl:1: invalid JSON",
    ),
    Case(
        "labels-bigint",
        lambda d, u: ["meta-eval", "--labels", str(d / "labels_bigint.jsonl"), "--data", str(META_FIXTURE)],
        "labels_bigint.jsonl:1: integer value out of range",
    ),
    # 2. and 3. numeric options checked where they are parsed, in one line
    *scorers("--seed", "-1", "Invalid value for '--seed'"),
    *scorers("--n-resamples", "1000000000", "Invalid value for '--n-resamples'"),
    *scorers("--n-resamples", "-1", "Invalid value for '--n-resamples'"),
    Case(
        "margin-not-a-number",
        lambda d, u: ["compare", str(d / OK), str(d / OK), "--margin", "x"],
        "Invalid value for '--margin'",
        code=2,
    ),
    Case(
        "margin-2",
        lambda d, u: ["compare", str(d / OK), str(d / OK), "--margin", "2"],
        "2.0 is not a score difference",
        code=2,
    ),
    Case(
        "fail-if-worse-by-inf",
        lambda d, u: ["compare", str(d / OK), str(d / OK), "--fail-if-worse-by", "inf"],
        "inf is not a score difference",
        code=2,
    ),
    Case(
        "unknown-option",
        lambda d, u: ["compare", str(d / OK), str(d / OK), "--nope"],
        "No such option: --nope",
        code=2,
    ),
    Case(
        "missing-argument",
        lambda d, u: ["compare", str(d / OK)],
        "Missing argument 'b' (see healthbench compare --help)",
        code=2,
    ),
    *[
        Case(
            f"run{flag}={value}",
            lambda d, u, f=flag, v=value: [*model_args(u), "--limit", "1", f, v],
            message,
            no_call=True,
        )
        for flag, value, message in (
            ("--temperature", "-5", "model.settings.temperature: Input should be greater than or equal to 0"),
            ("--timeout", "inf", "model.settings.timeout: Input should be a finite number"),
            ("--max-connections", "0", "max_connections: Input should be greater than 0"),
            ("--limit", "0", "limit: Input should be greater than or equal to 1"),
        )
    ],
    Case(
        "run--ray-connect-timeout=0",
        lambda d, u: [*model_args(u), "--ray-connect-timeout", "0"],
        "Invalid value for '--ray-connect-timeout'",
        code=2,
        no_call=True,
    ),
    # 4. an output that is one of the inputs (by inode), a folder, under a file, or another output
    Case(
        "import-export-over-input",
        lambda d, u: ["import", str(d / OK), "--export", str(d / OK)],
        "ok_allresults.json is the input",
    ),
    Case(
        "import-metrics-over-input",
        lambda d, u: ["import", str(d / OK), "--metrics-out", f"{d}/./{OK}"],
        "is the input",
    ),
    Case(
        "report-over-input",
        lambda d, u: ["report", str(d / OK), "-o", str(d / OK)],
        "would overwrite that input",
    ),
    Case(
        "report-over-store",
        lambda d, u: ["report", "base", "-o", str(d / "s.db"), "--store", str(d / "s.db")],
        "would overwrite that input",
    ),
    Case(
        "results-over-store",
        lambda d, u: ["results", "base", "--store", str(d / "s.db"), "--metrics-out", str(d / "s.db")],
        "would overwrite that input",
    ),
    Case(
        "run-over-data",
        lambda d, u: ["run", "--data", str(d / "d.jsonl"), "--metrics-out", str(d / "d.jsonl")],
        "would overwrite that input",
        files={"d.jsonl": jsonl(conversation())},
        no_call=True,
    ),
    Case(
        "two-outputs-one-file",
        lambda d, u: [
            "import",
            str(d / OK),
            "--export",
            str(d / "x.json"),
            "--metrics-out",
            str(d / "x.json"),
        ],
        "--metrics-out and --export are both",
    ),
    Case(
        "export-to-a-folder",
        lambda d, u: ["import", str(d / OK), "--export", str(d / "adir")],
        "adir is a folder",
    ),
    Case(
        "export-under-a-file",
        lambda d, u: ["import", str(d / OK), "--export", str(d / "precious.txt" / "x.json")],
        "precious.txt is a file, not a folder",
    ),
    Case(
        "analyze-out-is-a-file",
        lambda d, u: ["analyze", str(d / OK), "--out", str(d / "precious.txt")],
        "precious.txt is a file, not a folder",
    ),
    Case(
        "figures-under-a-file",
        lambda d, u: ["report", str(d / OK), "-o", str(d / "r.html"), "--figures", str(d / "precious.txt")],
        "precious.txt is a file, not a folder",
        needs="matplotlib",
        absent=("r.html",),
    ),
    Case(
        "report-fails-before-any-output",
        lambda d, u: [
            "report",
            str(d / "utf8_allresults.json"),
            "-o",
            str(d / "r.html"),
            "--figures",
            str(d / "f"),
        ],
        "not valid UTF-8",
        absent=("r.html", "f"),
    ),
    Case(
        "labels-metrics-over-labels",
        lambda d, u: [
            *("meta-eval", "--labels", str(d / "disagree.jsonl"), "--data", str(META_FIXTURE)),
            *("--metrics-out", str(d / "disagree.jsonl")),
        ],
        "would overwrite that input",
    ),
    # 5. read-only commands never create a store
    missing_store("compare", lambda d: ["compare", str(d / OK), "base"]),
    missing_store("analyze", lambda d: ["analyze", "ba*", "--out", str(d / "o")]),
    missing_store("report", lambda d: ["report", "base", "-o", str(d / "r.html")]),
    missing_store("regrade", lambda d: ["regrade", "base", "--judge", "judge"]),
    missing_store("results", lambda d: ["results", "base"]),
    missing_store("resume", lambda d: ["run", "--resume", "base"]),
    missing_store("meta-eval-resume", lambda d: ["meta-eval", "--resume", "base"]),
    missing_store("compare", lambda d: ["compare", "base", "base"], env=True),
    # 6. a Ray cluster that cannot be reached: one line naming it, bounded, no run stored
    Case(
        "ray-closed-port",
        lambda d, u: [
            *model_args(u),
            "--executor",
            "ray",
            "--ray-address",
            "127.0.0.1:1",
            "--ray-connect-timeout",
            "2",
            "--limit",
            "1",
        ],
        "cannot join the Ray cluster at 127.0.0.1:1",
        needs="ray",
        no_call=True,
        seconds=60,
    ),
    Case(
        "ray-address-with-local",
        lambda d, u: [*model_args(u), "--ray-address", "auto", "--limit", "1"],
        "--ray-address: only used by --executor ray",
        no_call=True,
    ),
    Case(
        "vllm-arg-with-local",
        lambda d, u: [*model_args(u), "--vllm-engine-arg", "max_model_len=8", "--limit", "1"],
        "--vllm-engine-arg: only used by --executor ray",
        no_call=True,
    ),
    # unclear or inconsistent
    *readers("twice", "is also example 0 with another rubric"),
    *readers("empty", "the file holds no graded example"),
    *readers("mmlu", "not a HealthBench result file"),
    Case(
        "labels-disagree",
        lambda d, u: ["meta-eval", "--labels", str(d / "disagree.jsonl"), "--data", str(META_FIXTURE)],
        "disagree.jsonl:1: criteria_met is true but label is false",
    ),
    Case(
        "resume-an-eval-as-meta-eval",
        lambda d, u: ["meta-eval", "--resume", "base"],
        "run 'base' is an eval run",
    ),
    Case(
        "theme-not-found",
        lambda d, u: [*model_args(u), "--theme", "nosuch"],
        "no conversation has the theme 'nosuch' (theme:nosuch)",
        no_call=True,
    ),
]
CASES += ISSUE_20


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_loses_nothing(
    case: Case, server: str, base_store: Path, tmp_path: Path
) -> None:
    if case.skip_if_local and importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("the local extra is installed")
    if case.needs is not None and importlib.util.find_spec(case.needs) is None:
        pytest.skip(f"{case.needs} is not installed")
    db = tmp_path / "s.db"
    shutil.copy(base_store, db)  # the database alone (checkpointed: its WAL is empty)
    write_inputs(tmp_path)
    for name, text in case.files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    before, files = snapshot(db), contents(tmp_path)
    assert {"base", "unanswered"} <= {row[1] for row in before["runs"]}
    reset_stats(server)
    args = [*case.args(tmp_path, server)]
    if args[0] in ("run", "regrade", "meta-eval") and not {"--store", "--labels"} & set(args):
        args += ["--store", str(db)]
    started = time.monotonic()
    result = runner.invoke(app, args, env={"HEALTHBENCH_STORE": str(db), **case.env})
    assert time.monotonic() - started < case.seconds
    assert result.exit_code == case.code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    assert lines[0].startswith("error: ") and case.message in lines[0], lines[0]
    assert snapshot(db) == before  # nothing stored was lost or changed, no run was left behind
    assert contents(tmp_path) == files  # every input (the store too) byte for byte, no file added
    for name in case.absent:
        assert not (tmp_path / name).exists(), name
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
    listing = runner.invoke(app, ["runs", "--store", str(db)], env={"COLUMNS": "120"})
    import hashlib

    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    assert f"mine.jsonl sha256:{digest[:12]} " in listing.output  # shortened: the row stays one line
    assert digest[12:] not in listing.output


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
    store = Store(db)  # one answer lost, as after a failed sample (written as the engine writes one)
    run = store.require_run("r")
    first = min(store.load_samples(run.id).values(), key=lambda row: row.item_id)
    store.put(run.id, samples=[SampleRow(first.item_id, 0, None, None, False, "boom", None, None)])
    store.close()
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
        lambda: store.put(run.id, samples=[SampleRow("a", 0, None, None, False, None, "x", None)]),
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


# -- issue 20: what is accepted, and said, instead of failing ----------------------------------------
def test_a_bom_is_accepted_in_an_allresults_file_as_in_jsonl(tmp_path: Path) -> None:
    write_inputs(tmp_path)
    (tmp_path / "bom").mkdir()
    bom = tmp_path / "bom" / "ok_allresults.json"  # the same name: the same output, byte for byte
    bom.write_bytes(b"\xef\xbb\xbf" + ALLRESULTS.read_bytes())
    plain = runner.invoke(app, ["import", str(tmp_path / "ok_allresults.json")], env={"COLUMNS": "200"})
    with_bom = runner.invoke(app, ["import", str(bom)], env={"COLUMNS": "200"})
    assert with_bom.exit_code == 0, with_bom.output
    assert with_bom.stdout == plain.stdout
    out = tmp_path / "o"
    assert runner.invoke(app, ["analyze", str(bom), "--out", str(out)]).exit_code == 0


def test_a_label_outside_the_limit_sample_is_not_an_error(tmp_path: Path) -> None:
    rows = meta_eval_rows(META_FIXTURE)
    labels = all_met_labels(rows, tmp_path / "labels.jsonl")
    result = runner.invoke(
        app, ["meta-eval", "--labels", str(labels), "--data", str(META_FIXTURE), "--limit", "1"]
    )
    assert result.exit_code == 0, result.output
    chosen = select(read_records(META_FIXTURE, MetaEvalRecord), limit=1)[0]
    other = next(r for r in rows if r["completion_id"] != chosen.completion_id)
    elsewhere = tmp_path / "elsewhere.jsonl"  # one label, for a row outside the --limit 1 sample
    elsewhere.write_text(
        json.dumps({"completion_id": other["completion_id"], "rubric": other["rubric"], "label": True}) + "\n"
    )
    sampled = runner.invoke(
        app, ["meta-eval", "--labels", str(elsewhere), "--data", str(META_FIXTURE), "--limit", "1"]
    )
    message = one_line_error(sampled)
    assert (
        message
        == f"error: {elsewhere}: none of the 1 rows chosen (--limit, --category) has a label in this file"
    )


def test_compare_of_an_input_with_itself_says_so(tmp_path: Path) -> None:
    write_inputs(tmp_path)
    same = str(tmp_path / "ok_allresults.json")
    result = runner.invoke(app, ["compare", same, same], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"A and B are the same input ({same}): every difference is 0 by construction" in result.output


def test_ctrl_c_outside_a_run_does_not_claim_anything_was_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import healthbench.analysis.analyze as analysis

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(analysis, "analyze", interrupted)
    write_inputs(tmp_path)
    result = runner.invoke(
        app, ["analyze", str(tmp_path / "ok_allresults.json"), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines() == ["error: interrupted"]
    assert not (tmp_path / "o").exists()


def test_a_write_error_names_the_path_given_not_a_temporary_file(tmp_path: Path) -> None:
    from healthbench.atomic import atomic_writer

    (tmp_path / "adir").mkdir()
    (tmp_path / "precious.txt").write_text("keep me\n")
    with pytest.raises(IsADirectoryError) as folder, atomic_writer(tmp_path / "adir") as out:
        out.write(b"x")
    assert folder.value.filename == str(tmp_path / "adir")
    target = tmp_path / "precious.txt" / "x.json"
    with pytest.raises(NotADirectoryError) as under_file, atomic_writer(target) as out:
        out.write(b"x")
    assert under_file.value.filename == str(target)
    assert under_file.value.strerror == f"{tmp_path / 'precious.txt'} is a file, not a folder"
    assert (tmp_path / "precious.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "precious.txt"]  # no temporary file left


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_a_ray_address_that_answers_but_is_no_cluster_fails_in_bounded_time(tmp_path: Path) -> None:
    """A port that accepts TCP but is no Ray cluster: ray.init would wait for minutes; the run stops
    after --ray-connect-timeout with one line of ours and stores no run (a subprocess: the abandoned
    connection attempt must not outlive the command)."""
    import socket

    db = tmp_path / "s.db"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        result = subprocess.run(
            [
                *cli("http://127.0.0.1:9/v1", db, "--limit", "1"),
                *("--executor", "ray", "--ray-address", address, "--ray-connect-timeout", "2"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    ours = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert ours == [
        f"error: cannot join the Ray cluster at {address}: no Ray cluster answered there within 2s "
        "(--ray-connect-timeout)"
    ]
    others = [line for line in result.stderr.splitlines() if line and not line.startswith("error:")]
    assert all(line.startswith("[") for line in others), others  # at most Ray's own C++ log lines
    assert "Traceback" not in result.stderr
    assert elapsed < 60  # Ray's import (a few seconds) + 2 s, never Ray's minutes of retries
    assert Store(db).get_run("r") is None  # no run to --resume
