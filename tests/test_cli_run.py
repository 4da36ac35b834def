"""`healthbench run` and friends through the CLI: outputs written, and one clear line for bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import judged_run_args, one_line_error
from support.process import GARBAGE_JUDGE, fake_server_process, free_port
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.testing.fake_server import fetch_stats, reset_stats

runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env)


def fake_args(url: str, store: Path, *extra: str) -> list[str]:
    return judged_run_args(url, store, "--model", "cand", "--base-url", url, *extra)


def test_run_writes_metrics_allresults_and_summary(server: str, tmp_path: Path) -> None:
    metrics, allresults = tmp_path / "m.json", tmp_path / "x_allresults.json"
    outputs = ["--metrics-out", str(metrics), "--allresults-out", str(allresults)]
    result = invoke(*fake_args(server, tmp_path / "s.db", "--name", "cli", *outputs))
    assert result.exit_code == 0, result.output
    written = json.loads(metrics.read_text())
    assert written["ungraded_criteria"] == 0 and written["overall_score:n_samples"] == 8
    exported = json.loads(allresults.read_text())
    assert exported["metrics"]["overall_score"] == written["overall_score"]
    assert "overall_score" in result.output
    # `results` re-reads the store and gives the same numbers without a call
    reset_stats(server)
    again = tmp_path / "m2.json"
    assert (
        invoke("results", "cli", "--store", str(tmp_path / "s.db"), "--metrics-out", str(again)).exit_code
        == 0
    )
    assert json.loads(again.read_text()) == written
    assert fetch_stats(server)["requests"] == 0


def test_dry_run_makes_no_call(server: str, tmp_path: Path) -> None:
    reset_stats(server)
    result = invoke(*fake_args(server, tmp_path / "s.db", "--dry-run"))
    assert result.exit_code == 0, result.output
    assert "no call made" in result.output and "judge" in result.output
    assert fetch_stats(server)["requests"] == 0


def test_dry_run_prices_known_models(tmp_path: Path) -> None:
    result = invoke(
        "run",
        "--model",
        "openai/gpt-4.1-mini",
        "--judge",
        "openai/gpt-4.1",
        "--store",
        str(tmp_path / "s.db"),
        "--dry-run",
        env={"OPENAI_API_KEY": ""},
    )
    assert result.exit_code == 0, result.output
    assert "estimated total: $" in result.output


def test_unknown_model_spec(tmp_path: Path) -> None:
    text = one_line_error(invoke("run", "--model", "nosuch/model", "--store", str(tmp_path / "s.db")))
    assert "nosuch" in text


def test_missing_api_key_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = one_line_error(
        invoke(
            "run", "--model", "openai/gpt-4.1", "--judge", "openai/gpt-4.1", "--store", str(tmp_path / "s.db")
        )
    )
    assert "OPENAI_API_KEY" in text


def test_wrong_key_fails_fast_without_leaking_it(tmp_path: Path) -> None:
    with fake_server_process("--require-api-key", "right-key") as url:
        secret = "sk-wrong-secret-value"
        result = invoke(
            *fake_args(
                url, tmp_path / "s.db", "--api-key-env", "HB_TEST_KEY", "--judge-api-key-env", "HB_TEST_KEY"
            ),
            env={"HB_TEST_KEY": secret},
        )
        text = one_line_error(result)
        assert "401" in text and secret not in result.output + result.stderr
        stats = fetch_stats(url)
        # fatal: no call is retried, and the run stops (only the calls already in flight were sent)
        assert stats["requests"] == stats["unauthorized"] <= 8
    assert secret not in (tmp_path / "s.db").read_bytes().decode("latin-1")


def test_unreachable_server_fails_in_seconds(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    args = [a for a in fake_args(url, tmp_path / "s.db") if a not in ("--max-retries", "0")]
    started = time.monotonic()
    text = one_line_error(invoke(*args))  # the default retry policy
    assert time.monotonic() - started < 15
    assert "cannot connect" in text.lower() and "--base-url" in text


def test_bad_template(server: str, tmp_path: Path) -> None:
    missing = one_line_error(
        invoke(*fake_args(server, tmp_path / "s.db", "--grader-template", str(tmp_path / "nope.txt")))
    )
    assert "nope.txt" in missing
    bad = tmp_path / "bad.txt"
    bad.write_text("grade this: <<conversation>>")
    text = one_line_error(invoke(*fake_args(server, tmp_path / "s.db", "--grader-template", str(bad))))
    assert "<<rubric_item>>" in text


def test_malformed_dataset_names_file_and_line(server: str, tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"prompt": [{"role": "user", "content": "hi"}], "prompt_id": "a", "rubrics": []}\n')
    text = one_line_error(invoke(*fake_args(server, tmp_path / "s.db", "--data", str(data))))
    assert f"{data}:1" in text and "rubric" in text


def test_strict_fails_when_criteria_are_ungraded(tmp_path: Path) -> None:
    with fake_server_process(*GARBAGE_JUDGE) as url:
        result = invoke(
            *fake_args(url, tmp_path / "s.db", "--judge-retries", "0", "--strict", "--limit", "2")
        )
    text = one_line_error(result)
    assert "ungraded" in text and "--resume" in text


def test_existing_name_with_other_settings(server: str, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert invoke(*fake_args(server, store, "--name", "n", "--limit", "2")).exit_code == 0
    text = one_line_error(invoke(*fake_args(server, store, "--name", "n", "--limit", "3")))
    assert "different settings" in text and "limit" in text


def test_config_file_with_flags_on_top(server: str, tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        f'limit = 2\nn_repeats = 2\n[judge]\nspec = "judge"\nbase_url = "{server}"\n'
        f'[model]\nspec = "cand"\nbase_url = "{server}"\n'
    )
    metrics = tmp_path / "m.json"
    result = invoke(
        "run",
        "--config",
        str(config),
        "--limit",
        "3",
        "--store",
        str(tmp_path / "s.db"),
        "--metrics-out",
        str(metrics),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(metrics.read_text())["overall_score:n_samples"] == 6  # flag wins: 3 x 2 repeats
    bad = tmp_path / "bad.toml"
    bad.write_text("limmit = 2\n")
    text = one_line_error(invoke("run", "--config", str(bad), "--store", str(tmp_path / "s.db")))
    assert "limmit" in text and "unknown setting" in text


def test_regrade_and_runs_listing(server: str, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert invoke(*fake_args(server, store, "--name", "base", "--limit", "2")).exit_code == 0
    reset_stats(server)
    result = invoke(
        "regrade",
        "base",
        "--judge",
        "judge-2",
        "--judge-base-url",
        server,
        "--name",
        "re",
        "--store",
        str(store),
    )
    assert result.exit_code == 0, result.output
    stats = fetch_stats(server)
    assert stats["candidate"] == 0 and stats["judge"] > 0
    listing = invoke("runs", "--store", str(store))
    assert listing.exit_code == 0 and "base" in listing.output and "re" in listing.output
    missing = one_line_error(invoke("results", "nope", "--store", str(store)))
    assert "no run named 'nope'" in missing


def test_dry_run_of_an_existing_run_counts_only_what_is_left(server: str, tmp_path: Path) -> None:
    from healthbench.results.views import RunView
    from healthbench.runner.run import dry_run
    from healthbench.store import Store

    store = tmp_path / "s.db"
    before = Store(store)
    assert invoke(*fake_args(server, store, "--name", "d", "--limit", "2", "--dry-run")).exit_code == 0
    assert before.get_run("d") is None  # a dry run creates nothing
    assert invoke(*fake_args(server, store, "--name", "d", "--limit", "2")).exit_code == 0
    n, rows = dry_run(Store(store), RunView.open(Store(store), "d").config, "d")
    assert n == 2 and [(r.role, r.calls) for r in rows] == [("candidate", 0), ("judge", 0)]
