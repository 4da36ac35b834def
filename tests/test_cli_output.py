"""What the CLI prints: version and help, 80-column tables, plain progress off a terminal, and the
endpoint conventions users bring from the OpenAI and Anthropic SDKs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import all_met_labels, meta_eval_rows
from rich.console import Console
from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench
import healthbench.cli
from healthbench.cli.app import app
from healthbench.cli.options import base_urls
from healthbench.cli.progress import PlainProgress
from healthbench.executors.progress import RunCounters
from healthbench.models.tally import CallTally
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats

runner = CliRunner()
META = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"


def test_version_and_short_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"healthbench {healthbench.__version__}"
    for args in (["-h"], ["run", "-h"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0 and "Usage: healthbench" in shown.output


def test_meta_eval_category_names_wrap_at_80_columns(tmp_path: Path) -> None:
    rows = meta_eval_rows(META)
    labels = all_met_labels(rows, tmp_path / "labels.jsonl")
    result = runner.invoke(
        app, ["meta-eval", "--labels", str(labels), "--data", str(META)], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "…" not in result.output
    # the first column, read top to bottom, holds every category name whole
    scope = "".join(line.split("│")[1].strip() for line in result.output.splitlines() if line.startswith("│"))
    for category in {r["category"] for r in rows}:
        assert category in scope
    assert "no physician in that scope has more than 50 rating pairs" in " ".join(result.output.split())


def test_plain_progress_prints_a_line_every_few_seconds() -> None:
    console = Console(record=True, width=300, force_terminal=False)
    counters = RunCounters(
        samples_total=4, samples_done=1, criteria_total=40, criteria_done=10, tally=CallTally(calls=11)
    )
    counters.started -= 100.0  # 100 s into the run: 10 of 40 criteria done, so 300 s left
    counters.retrying = "http://x failing for 12s (500); retrying, next attempt in 4s"
    with PlainProgress(console, label="conversations sampled", every=3600) as progress:
        progress.update(counters)
        progress.update(counters)  # within the interval: nothing more
    lines = console.export_text().splitlines()
    assert len(lines) == 2  # the first update and the last state at the end
    pattern = (
        r"conversations sampled 1/4 · criteria graded 10/40 · 0\.1 calls/s · 11 calls · 0 cached · "
        r"0 tok · \$0\.0000 · elapsed 0:01:40 · ETA 0:0[45]:\d\d · "
        r"http://x failing for 12s \(500\); retrying, next attempt in 4s"
    )
    for line in lines:
        assert re.fullmatch(pattern, line), line


@pytest.mark.parametrize(
    ("model", "base_url", "judge", "judge_base_url", "env", "want"),
    [
        (
            "openai/gpt-4.1",
            None,
            "openai/gpt-4.1",
            None,
            {"OPENAI_BASE_URL": "http://o"},
            ("http://o", "http://o"),
        ),
        ("openai/gpt-4.1", "http://flag", None, None, {"OPENAI_BASE_URL": "http://o"}, ("http://flag", None)),
        ("anthropic/claude", None, None, None, {"ANTHROPIC_BASE_URL": "http://a"}, ("http://a", None)),
        ("anthropic/claude", None, None, None, {"OPENAI_BASE_URL": "http://o"}, (None, None)),
        ("m", "http://local", "j", None, {}, ("http://local", "http://local")),
        ("m", "http://local", "openai/gpt-4.1", None, {}, ("http://local", None)),
        ("m", "http://local", "j", "http://judge", {}, ("http://local", "http://judge")),
        ("local/smollm2", None, None, None, {"OPENAI_BASE_URL": "http://o"}, (None, None)),
    ],
)
def test_base_urls_follow_the_sdk_conventions(
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    base_url: str | None,
    judge: str | None,
    judge_base_url: str | None,
    env: dict[str, str],
    want: tuple[str | None, str | None],
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert base_urls(model, base_url, judge, judge_base_url) == want


def test_a_bare_judge_runs_on_the_candidates_server_and_env_base_url_is_used(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with fake_server_process() as url:
        result = runner.invoke(
            app,
            ["run", "--model", "cand", "--judge", "judge", "--store", str(db), "--limit", "1", "--name", "r"],
            env={"OPENAI_BASE_URL": url},
        )
        stats = fetch_stats(url)
    assert result.exit_code == 0, result.output
    assert stats["candidate"] == 1 and stats["judge"] > 0
    run = Store(db).require_run("r")
    assert run.config["run"]["model"]["base_url"] == run.config["run"]["judge"]["base_url"] == url


def test_regrade_dry_run_counts_every_criterion_and_calls_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with fake_server_process() as url:
        args = ["--judge", "judge", "--judge-base-url", url, "--store", str(db)]
        first = runner.invoke(
            app, ["run", "--model", "cand", "--base-url", url, *args, "--limit", "2", "--name", "r"]
        )
        assert first.exit_code == 0, first.output
        before = fetch_stats(url)["requests"]
        dry = runner.invoke(app, ["regrade", "r", *args, "--dry-run"], env={"COLUMNS": "200"})
        assert fetch_stats(url)["requests"] == before
    assert dry.exit_code == 0, dry.output
    store = Store(db)
    criteria = sum(len(record["rubrics"]) for _, record in store.load_items(store.require_run("r").id))
    judge_row = next(line for line in dry.output.splitlines() if "judge" in line and "│" in line)
    assert f"│ {criteria:>5} │" in judge_row.replace("calls", "") or f" {criteria} " in judge_row
    assert not any(
        line.split("│")[1].strip() == "candidate" for line in dry.output.splitlines() if "│" in line
    )
    assert len(store.list_runs()) == 1  # a dry run stores nothing


def test_meta_eval_dry_run_counts_rows_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = ["meta-eval", "--dry-run", "--judge", "openai/gpt-4.1", "--data", str(META), "--store", str(db)]
    result = runner.invoke(app, args, env={"COLUMNS": "200", "OPENAI_API_KEY": ""})
    assert result.exit_code == 0, result.output
    rows = len(META.read_text().splitlines())
    assert f"dry run: {rows} rows × 1 repeats (no call made)" in result.output
    judge_row = next(line for line in result.output.splitlines() if line.startswith("│ judge"))
    assert judge_row.split("│")[3].strip() == str(rows)
    assert Store(db).list_runs() == []


def _two_runs(folder: Path) -> tuple[str, str]:
    source = Path(__file__).parent / "fixtures" / "small_allresults.json"
    a, b = folder / "a_allresults.json", folder / "b_allresults.json"
    a.write_bytes(source.read_bytes())
    b.write_bytes(source.read_bytes())
    return str(a), str(b)


def test_compare_off_a_terminal_prints_whole_group_names(tmp_path: Path) -> None:
    """No terminal, no COLUMNS: the table at its own width (the group column was folded to 5 letters)."""
    a, b = _two_runs(tmp_path)
    result = runner.invoke(app, ["compare", a, b])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert next(r for r in rows if r and r[0].startswith("axis:cont"))[:2] == ["axis:context_awareness", "1"]


def test_compare_into_a_reader_that_stops_early_keeps_its_exit_code(tmp_path: Path) -> None:
    """`compare ... | head -1` under pipefail: the gate's code (0 here), not 1 for the closed pipe;
    `| true` closes the pipe before the first line, so that the pipe surely breaks."""
    import subprocess
    import sys

    a, b = _two_runs(tmp_path)
    compare = f"{sys.executable} -m healthbench compare {a} {b} --fail-if-worse-by 0.01"
    for reader in ("head -1", "true"):
        done = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {compare} | {reader}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stderr) == (0, ""), reader
        if reader == "head -1":
            assert done.stdout.startswith("B = b/b (0.5833) vs A = a/a (0.5833)")
