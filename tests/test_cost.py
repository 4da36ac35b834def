"""Cost everywhere tells the truth (issues #32 items 5-6, #33): the report's usage table of a stored run,
a service job's status, the cost line, `serve --prices`, `--dry-run`'s caching note."""

from __future__ import annotations

import json
from pathlib import Path

from support.process import fake_server_process
from test_cli_report import embedded, invoke

from healthbench.cli.run_flow import calls_line
from healthbench.executors.progress import RunCounters
from healthbench.models.base import Usage
from healthbench.models.pricing import PriceTable
from healthbench.results.views import RunView
from healthbench.service.jobs import details_of
from healthbench.store import Store


def test_the_report_shows_a_stored_runs_cost_and_judge_tokens(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    with fake_server_process("--prompt-cache", "--reply-words", "450") as url:
        code, _, stderr = invoke(
            "run", "--model", "openai/gpt-4.1", "--base-url", url, "--judge", "openai/gpt-4.1",
            "--judge-base-url", url, "--store", store, "--name", "priced", "--limit", "3",
            "--n-resamples", "20", env={"OPENAI_API_KEY": "k"},
        )  # fmt: skip
    assert code == 0, stderr
    out = tmp_path / "r.html"
    code, _, stderr = invoke("report", "priced", "--store", store, "-o", out)
    assert code == 0, stderr
    html = out.read_text(encoding="utf-8")
    run = embedded(html)[0]["runs"][0]
    usage = RunView.open(Store(str(store)), "priced").usage_totals()
    assert run["cost"] == usage.cost > 0  # the stored cost, not "–"
    assert run["judge_tokens"]["input"] == usage.judge.input_tokens > 0
    assert run["judge_tokens"]["cached_input"] == usage.judge.cached_input_tokens > 0
    assert f"{usage.cost:.4f}" in html


def test_a_job_status_says_unknown_for_an_unpriced_model_never_zero() -> None:
    counters = RunCounters()
    counters.count_call(Usage(100, 10), None, judge=True)  # a model with no price
    details = details_of(counters)
    assert details["cost"] is None and details["judge_cost"] is None
    priced = RunCounters()
    usage = Usage(2000, 20, cached_input_tokens=1024)
    cost = PriceTable().cost("openai", "gpt-4.1", usage)
    priced.count_call(usage, cost, judge=True)
    details = details_of(priced)
    assert details["cost"] == cost and details["judge_cost"] == cost
    assert details["cached_input_tokens"] == 1024 and details["judge_cached_share"] == 1024 / 2000


def test_the_cost_line_shows_the_judges_cached_share_and_output_dollars() -> None:
    counters = RunCounters()
    usage = Usage(2000, 20, cached_input_tokens=1024)
    parts = PriceTable().cost_parts("openai", "gpt-4.1", usage)
    assert parts is not None
    counters.count_call(usage, sum(parts.values()), judge=True, parts=parts)
    line = calls_line(counters)
    assert "judge: 51% of 2,000 input tokens cached" in line
    assert f"${parts['output']:.4f} output" in line


def test_serve_refuses_a_bad_price_file_in_one_line(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/m": {"input": "cheap"}}))
    code, _, stderr = invoke("serve", "--store", tmp_path / "s.db", "--prices", prices)
    assert code != 0 and "price file" in stderr and str(prices) in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_dry_run_says_what_its_cached_share_assumes(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(
        "run", "--model", "openai/gpt-4.1", "--judge", "openai/gpt-4.1", "--dataset", "demo",
        "--store", tmp_path / "s.db", "--dry-run", env={"OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert code == 0, stderr
    text = " ".join((stdout + stderr).split())
    assert "assumes its provider caches prompt prefixes" in text and "warm-first" in text
    # a judge whose provider caches nothing: no share, no note
    code, stdout, stderr = invoke(
        "run", "--model", "openai/gpt-4.1", "--judge", "local/smollm2", "--dataset", "demo",
        "--store", tmp_path / "s.db", "--dry-run", env={"OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert code == 0, stderr
    assert "assumes its provider caches" not in " ".join((stdout + stderr).split())
