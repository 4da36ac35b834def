"""``--batch``: provider batch APIs answer the same requests as the online path, with the same metrics
at the batch price, survive ``kill -9`` while they are polled, and finish exactly through errored and
expired requests and a batch that fails as a whole (all against the fake server's batch APIs)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import roles
from support.fake_runs import fake_run_config
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.client import Client
from healthbench.config import validate_config
from healthbench.errors import ConfigError, FatalModelError
from healthbench.models.base import Usage
from healthbench.models.batch_api import line_bytes
from healthbench.models.pricing import PriceTable
from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import RunOutcome, run_eval
from healthbench.store import Store
from healthbench.store.batches import BatchLedger
from healthbench.testing.fake_server import (
    FakeServerConfig,
    fetch_requests,
    fetch_stats,
    reset_stats,
    running_fake_server,
)

DEMO_SAMPLES, DEMO_CRITERIA = 8, 36  # the demo dataset: conversations, rubric criteria
FAST = {"batch_poll_interval": 0.02, "batch_linger": 0.3}
PRICES = {
    "fake-candidate": {"input": 1.0, "output": 4.0},
    "fake-judge": {"input": 2.0, "output": 8.0},
}


@pytest.fixture
def prices(tmp_path: Path) -> str:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(PRICES))
    return str(path)


def _run(url: str, store: Store, name: str, **extra: Any) -> RunOutcome:
    return run_eval(fake_run_config(url, **extra), store=store, name=name)


def _costs(store: Store, outcome: RunOutcome) -> dict[str, float]:
    costs = {"candidate": 0.0, "judge": 0.0}
    for row in store.iter_usage(outcome.run.id):
        costs[row.role] += row.cost or 0.0
    return costs


@pytest.fixture
def recording() -> Iterator[str]:
    with running_fake_server(FakeServerConfig(record_requests=1000, batch_delay=0.05)) as url:
        yield url


def test_batch_judge_gives_the_online_metrics_at_half_the_judge_cost(
    recording: str, tmp_path: Path, prices: str, online_metrics: dict[str, float]
) -> None:
    url = recording
    online_store, batch_store = Store(tmp_path / "online.db"), Store(tmp_path / "batch.db")
    online = _run(url, online_store, "online", prices=prices)
    online_bodies = sorted(json.dumps(r["body"], sort_keys=True) for r in fetch_requests(url))
    reset_stats(url)

    batched = _run(url, batch_store, "batched", batch="judge", prices=prices, **FAST)
    stats = fetch_stats(url)
    sent = fetch_requests(url)

    assert score_stored_run(batch_store, batched.run).metrics() == online_metrics
    assert batched.run.status == "finished"
    # candidates online, every judge call in a batch (one, unless the answers came further apart than
    # batch_linger on a loaded machine), nothing asked twice
    assert stats["chat_completions"] == DEMO_SAMPLES
    assert stats["batches_created"] == batched.counters.batches_submitted >= 1
    assert stats["batch_requests"] == DEMO_CRITERIA
    assert stats["repeated_batch_requests"] == 0
    # the same request bodies, byte for byte (as JSON), online and in the batch file
    assert sorted(json.dumps(r["body"], sort_keys=True) for r in sent) == online_bodies
    assert {r["path"] for r in sent} == {"/v1/chat/completions", "/v1/batches"}
    # the judge calls cost half, the candidate calls the same
    online_cost, batch_cost = _costs(online_store, online), _costs(batch_store, batched)
    assert online_cost["judge"] > 0
    assert batch_cost["judge"] == pytest.approx(online_cost["judge"] / 2, rel=1e-12)
    assert batch_cost["candidate"] == pytest.approx(online_cost["candidate"], rel=1e-12)
    assert batched.counters.batch_requests == DEMO_CRITERIA

    # a batch answer fills the call cache: the same run online in the same store calls nothing
    reset_stats(url)
    again = _run(url, batch_store, "again", prices=prices)
    assert fetch_stats(url)["requests"] == 0
    assert again.counters.tally.cached_calls == DEMO_SAMPLES + DEMO_CRITERIA
    assert score_stored_run(batch_store, again.run).metrics() == online_metrics


def test_batch_all_is_split_by_the_request_limit_and_recorded_in_the_store(
    recording: str, tmp_path: Path, online_metrics: dict[str, float]
) -> None:
    store = Store(tmp_path / "s.db")
    # (one round of judge batches: without warm-first's first round, docs/cost.md)
    outcome = _run(recording, store, "split", batch="all", batch_max_requests=10, warm_first=False, **FAST)
    stats = fetch_stats(recording)
    assert score_stored_run(store, outcome.run).metrics() == online_metrics
    assert stats["chat_completions"] == 0
    assert stats["batches_created"] == 1 + 4  # 8 answers in one batch, 36 judge calls in 10+10+10+6
    assert stats["batch_requests"] == DEMO_SAMPLES + DEMO_CRITERIA
    ledger = BatchLedger(store, outcome.run.id)
    batches = ledger.batches()
    assert [b.total for b in batches] == [8, 10, 10, 10, 6]
    assert {b.state for b in batches} == {"completed"}
    assert all(b.batch_id is not None for b in batches)
    # every custom_id maps back to (conversation, repeat, criterion) through the store
    rows = [r for b in batches for r in ledger.requests(b.id)]
    assert sorted(r.criterion for r in rows if r.criterion < 0) == [-1] * DEMO_SAMPLES
    assert len({(r.item_id, r.repeat, r.criterion) for r in rows}) == DEMO_SAMPLES + DEMO_CRITERIA


def test_errored_expired_and_a_failed_batch_finish_exact_with_every_retry_counted(
    tmp_path: Path, online_metrics: dict[str, float]
) -> None:
    faults = FakeServerConfig(batch_error_rate=0.2, batch_expired_rate=0.1, batch_fail_first=1, seed=3)
    with running_fake_server(faults) as url:
        store = Store(tmp_path / "s.db")
        outcome = _run(url, store, "faults", batch="all", **FAST)
        stats = fetch_stats(url)
    c = outcome.counters
    assert outcome.run.status == "finished"
    assert score_stored_run(store, outcome.run).metrics() == online_metrics
    failed = stats["batch_errored"] + stats["batch_expired"]
    assert failed > 0
    assert c.batch_failed_requests == failed
    assert c.batch_retried == failed  # each went into a later batch
    assert c.batches_resubmitted == 1  # the failed batch, once
    assert len(c.batch_events) == 1 and "failed" in c.batch_events[0]
    # every request put in a batch is counted: the answered ones, the retried ones, the failed batch's
    first_batch = stats["batch_requests"] - (DEMO_SAMPLES + DEMO_CRITERIA) - failed
    assert first_batch == DEMO_SAMPLES  # the candidate batch that failed as a whole, submitted again
    assert c.batch_requests == stats["batch_requests"]
    assert stats["repeated_batch_requests"] == 0
    assert stats["chat_completions"] == 0


def test_fallback_online_asks_the_failed_requests_online_at_the_online_price(
    tmp_path: Path, prices: str, online_metrics: dict[str, float]
) -> None:
    with running_fake_server(FakeServerConfig(batch_error_rate=0.3, seed=1)) as url:
        store = Store(tmp_path / "s.db")
        outcome = _run(url, store, "fallback", batch="judge", batch_fallback="online", prices=prices, **FAST)
        stats = fetch_stats(url)
    assert score_stored_run(store, outcome.run).metrics() == online_metrics
    assert stats["batch_errored"] > 0
    assert outcome.counters.batch_online == stats["batch_errored"]
    assert stats["judge"] == stats["batch_errored"]  # online judge calls: exactly the failed ones
    assert stats["batch_requests"] == DEMO_CRITERIA  # none went into a batch twice


def test_a_judge_answer_without_a_verdict_is_asked_again_in_a_batch(tmp_path: Path) -> None:
    """An unparseable answer is re-asked (a new attempt, a new key) through a batch, as online: a
    template without the fake judge's marker gets prose back, never a verdict."""
    template = tmp_path / "t.txt"
    template.write_text("Grade <<conversation>> on <<rubric_item>>.")
    with running_fake_server() as url:
        store = Store(tmp_path / "s.db")
        outcome = _run(
            url, store, "reask", batch="judge", grader_template=str(template), judge_retries=1, **FAST
        )
        stats = fetch_stats(url)
    assert outcome.run.status == "incomplete"
    assert outcome.counters.ungraded == DEMO_CRITERIA
    assert stats["batch_requests"] == 2 * DEMO_CRITERIA  # attempt 0, then the re-ask
    assert stats["batches_created"] >= 2
    grades = store.load_grades(outcome.run.id)
    assert {g.attempts for g in grades.values()} == {2}


def test_batch_settings_are_checked_in_one_line() -> None:
    with pytest.raises(ConfigError, match="drop --executor ray"):
        validate_config({"batch": "judge", "executor": "ray"})
    with pytest.raises(ConfigError, match="batch: Input should be 'none', 'judge' or 'all'"):
        validate_config({"batch": "some"})


def test_batch_prices_are_discounted_per_provider() -> None:
    table = PriceTable()
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    online = table.cost("openai", "gpt-4.1", usage)
    assert online == pytest.approx(10.0)
    assert table.cost("openai", "gpt-4.1", usage, batch=True) == pytest.approx(5.0)
    assert table.cost("anthropic", "claude-haiku-4-5", usage, batch=True) == pytest.approx(3.0)
    assert line_bytes({"a": "é"}) == len(json.dumps({"a": "é"}, ensure_ascii=False).encode()) + 1


def test_anthropic_message_batches_give_the_online_metrics(
    tmp_path: Path, prices: str, online_metrics: dict[str, float]
) -> None:
    faults = FakeServerConfig(batch_delay=0.05, batch_expired_rate=0.1, batch_fail_first=1, seed=2)
    with running_fake_server(faults) as url:
        judge = {"spec": "anthropic/fake-judge", "base_url": url}
        online_store, batch_store = Store(tmp_path / "o.db"), Store(tmp_path / "b.db")
        online = _run(url, online_store, "online", judge=judge, prices=prices)
        reset_stats(url)
        batched = _run(url, batch_store, "batched", judge=judge, batch="judge", prices=prices, **FAST)
        stats = fetch_stats(url)
    online_m = score_stored_run(online_store, online.run).metrics()
    assert score_stored_run(batch_store, batched.run).metrics() == online_m
    assert stats["messages"] == 0 and stats["batch_expired"] > 0
    assert batched.counters.batch_retried == stats["batch_expired"]
    # the first batch ended with every request canceled: reported once, submitted again once
    assert batched.counters.batches_resubmitted == 1
    assert len(batched.counters.batch_events) == 1 and "cancelled" in batched.counters.batch_events[0]
    assert _costs(batch_store, batched)["judge"] == pytest.approx(_costs(online_store, online)["judge"] / 2)


# -- kill -9 while batches are polled -------------------------------------------------------------
def _command(url: str, store: Path, config: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "healthbench", "run", "--model", "fake-candidate", "--base-url", url,
        "--judge", "fake-judge", "--judge-base-url", url, "--store", str(store), "--config", str(config),
        *extra,
    ]  # fmt: skip


def _resume(store: Path, name: str) -> list[str]:
    """Continue ``name`` with its stored settings (--batch and its timing included)."""
    return [sys.executable, "-m", "healthbench", "run", "--resume", name, "--store", str(store)]


def _kill_when(process: subprocess.Popen[bytes], url: str, batches: int) -> None:
    """SIGKILL ``process`` once the fake server has ``batches`` batches (it is then polling)."""
    deadline = time.monotonic() + 60
    while fetch_stats(url)["batches_created"] < batches:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)  # a few polls
    assert process.poll() is None  # still polling: the batch takes batch_delay seconds
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_kill_9_while_polling_then_resume_submits_nothing_twice(
    tmp_path: Path, online_metrics: dict[str, float]
) -> None:
    config = tmp_path / "batch.toml"  # (one round of judge batches: no warm-first, docs/cost.md)
    config.write_text("batch_linger = 0.3\nbatch_poll_interval = 0.05\nwarm_first = false\n")
    db = tmp_path / "s.db"
    with running_fake_server(FakeServerConfig(batch_delay=1.2)) as url:
        first = subprocess.Popen(
            _command(url, db, config, "--batch", "all", "--name", "killed"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _kill_when(first, url, 1)  # during the candidates' batch
        second = subprocess.Popen(_resume(db, "killed"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _kill_when(second, url, 2)  # during the judge's batch (the candidates' answered and committed)
        final = subprocess.run(_resume(db, "killed"), capture_output=True, text=True, timeout=120)
        stats = fetch_stats(url)
    assert final.returncode == 0, final.stderr
    assert stats["batches_created"] == 2  # zero duplicate batch submissions
    assert stats["batch_requests"] == DEMO_SAMPLES + DEMO_CRITERIA  # zero repeated requests
    assert stats["repeated_batch_requests"] == 0
    assert stats["chat_completions"] == 0
    store = Store(db)
    run = store.require_run("killed")
    assert run.status == "finished"
    assert score_stored_run(store, run).metrics() == online_metrics


def test_dry_run_prints_the_cost_online_and_with_batch_pricing(tmp_path: Path) -> None:
    args = ["run", "--model", "openai/gpt-4.1", "--judge", "openai/gpt-4.1", "--n-repeats", "50", "--dry-run"]
    result = CliRunner().invoke(app, [*args, "--store", str(tmp_path / "s.db")], env={"OPENAI_API_KEY": ""})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    online = float(re.search(r"estimated total: \$([\d.,]+)", text).group(1))  # type: ignore[union-attr]
    found = re.search(
        r"with batch pricing: \$([\d.,]+) with --batch judge, \$([\d.,]+) with --batch all", text
    )
    assert found is not None, text
    judge_only, every = float(found.group(1)), float(found.group(2))
    assert online > judge_only > every > 0
    assert every == pytest.approx(online / 2, abs=0.011)  # both OpenAI: every call at half price


def test_a_service_job_is_active_while_its_batches_run_and_cancel_cancels_them(tmp_path: Path) -> None:
    with (
        running_fake_server(FakeServerConfig(batch_delay=60)) as url,
        Client.local(tmp_path / "s.db") as client,
    ):
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="b", batch="all", **roles(url))
        deadline = time.monotonic() + 30
        while jobs.get_status(name="b").status_details.batches is None:
            assert time.monotonic() < deadline, jobs.get_logs(name="b")
            time.sleep(0.05)
        status = jobs.get_status(name="b")
        assert status.status == "active"
        assert status.status_details.batches == "candidate batch validating 0/8"
        jobs.cancel(name="b")
        final = client.wait_until_done("b", interval=0.1, timeout=60)
        assert final.status == "cancelled"
        assert fetch_stats(url)["batches_cancelled"] == 1
        messages = [e.message for e in jobs.get_logs(name="b").data]
        assert "1 provider batch(es) cancelled" in messages


def test_a_wrong_key_stops_a_batch_run_at_its_first_upload_in_one_line(tmp_path: Path) -> None:
    with running_fake_server(FakeServerConfig(require_api_key="sk-right")) as url:
        store = Store(tmp_path / "s.db")
        with pytest.raises(FatalModelError) as caught:
            _run(url, store, "keyless", batch="all", **FAST)
        stats = fetch_stats(url)
    assert "401" in str(caught.value) or "key" in str(caught.value).lower()
    assert "\n" not in str(caught.value)
    assert stats["batches_created"] == 0
    run = store.require_run("keyless")
    assert run.status == "failed"
    # the batch recorded before its upload is kept as failed, not left "submitting"
    assert [b.state for b in BatchLedger(store, run.id).batches()] == ["failed"]


def test_a_service_job_survives_a_restart_while_its_batches_run(tmp_path: Path) -> None:
    with running_fake_server(FakeServerConfig(batch_delay=2.0)) as url:
        with Client.local(tmp_path / "s.db") as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="r", batch="all", **roles(url))
            deadline = time.monotonic() + 30
            while fetch_stats(url)["batches_created"] < 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        # the service stopped with the candidates' batch running; a new one picks the job up
        with Client.local(tmp_path / "s.db") as client:
            final = client.wait_until_done("r", interval=0.1, timeout=120)
        stats = fetch_stats(url)
    assert final.status == "completed"
    # the candidates' batch polled again, then the judge's two (warm-first: the first criterion of each
    # conversation, then the others; docs/cost.md)
    assert stats["batches_created"] == 3
    assert stats["batch_requests"] == DEMO_SAMPLES + DEMO_CRITERIA
    assert stats["repeated_batch_requests"] == 0 and stats["chat_completions"] == 0
