"""Resuming a --batch run whose batches the provider forgot (404), with another --batch than it was
started with, and after the kill window between a batch's creation and its id being stored (issue
#32 items 3, 4 and 13); all against the fake server's batch APIs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_runs import fake_run_config
from test_batch import DEMO_CRITERIA, DEMO_SAMPLES, _command, _resume

from healthbench.config import build_config, validate_config
from healthbench.errors import ConfigError
from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import resume_run, run_eval
from healthbench.store import Store
from healthbench.store.batches import BatchLedger, BatchRequestRow
from healthbench.testing.fake_server import FakeServerConfig, fetch_stats, running_fake_server


def _killed_in_first_batch(url: str, db: Path, config: Path, *extra: str) -> None:
    """Start run ``killed`` and SIGKILL it once its first provider batch exists (it is polling it)."""
    process = subprocess.Popen(
        _command(url, db, config, "--name", "killed", *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while fetch_stats(url)["batches_created"] < 1:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)  # its id is stored (a few polls)
    process.send_signal(signal.SIGKILL)
    process.wait()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.mark.parametrize("fallback", ["retry", "online"])
def test_a_batch_the_provider_forgot_is_asked_again_once_not_resumed_forever(
    tmp_path: Path, online_metrics: dict[str, float], fallback: str
) -> None:
    """The provider restarted without its batches (as after expiry, deletion or another account's key):
    the resume says the batch is lost in one line and asks its requests again, in a new batch or
    online, instead of failing on the 404 with the same command each time."""
    config = tmp_path / "batch.toml"
    # (one round of judge batches: without warm-first's first round, docs/cost.md)
    config.write_text("batch_linger = 0.3\nbatch_poll_interval = 0.05\nwarm_first = false\n")
    db = tmp_path / "s.db"
    flags = ["--batch", "judge", "--batch-fallback", fallback]
    with running_fake_server(FakeServerConfig(batch_delay=60)) as url:
        _killed_in_first_batch(url, db, config, *flags)
    store = Store(db)
    (recorded,) = BatchLedger(store, store.require_run("killed").id).batches()
    assert recorded.batch_id is not None and recorded.total == DEMO_CRITERIA
    with running_fake_server(FakeServerConfig(batch_delay=0.2), port=_port(url)) as again:
        assert again == url  # the same provider, which no longer knows the batch
        final = subprocess.run(_resume(db, "killed"), capture_output=True, text=True, timeout=120)
        stats = fetch_stats(url)
    assert final.returncode == 0, final.stderr
    output = " ".join(final.stdout.split())
    how = "asked online" if fallback == "online" else "submitted in a new batch"
    assert f"judge batch {recorded.batch_id} is lost" in output
    assert f"its {DEMO_CRITERIA} unanswered request(s) are {how}" in output
    if fallback == "online":
        assert stats["judge"] == DEMO_CRITERIA and stats["batches_created"] == 0
    else:
        assert stats["batch_requests"] == DEMO_CRITERIA and stats["judge"] == 0
    run = store.require_run("killed")
    assert run.status == "finished"
    assert score_stored_run(store, run).metrics() == online_metrics
    states = [b.state for b in BatchLedger(store, run.id).batches()]
    assert states[0] == "lost"
    # and nothing is asked again by a further resume
    with running_fake_server(port=_port(url)):
        assert subprocess.run(_resume(db, "killed"), capture_output=True, timeout=120).returncode == 0
        assert fetch_stats(url)["requests"] == 0


def test_resuming_with_batch_none_uses_the_pending_batches_and_says_so(
    tmp_path: Path, online_metrics: dict[str, float]
) -> None:
    """--batch none on resume while the candidates' batch still runs: its answers are used when they
    come (no candidate call is made online, the batch is not left running unused), the judge calls
    go online, and the line says which. A batch recorded whose id was never stored (the kill window)
    is said to possibly exist at the provider, with how to find it."""
    config = tmp_path / "batch.toml"
    config.write_text("batch_linger = 0.3\nbatch_poll_interval = 0.05\n")
    db = tmp_path / "s.db"
    with running_fake_server(FakeServerConfig(batch_delay=1.5)) as url:
        _killed_in_first_batch(url, db, config, "--batch", "all")
        store = Store(db)
        run = store.require_run("killed")
        ledger = BatchLedger(store, run.id)
        ledger.add("judge", "openai", [BatchRequestRow("0" * 64, "x", 0, 0, 0)])  # id never stored
        final = subprocess.run(
            [*_resume(db, "killed"), "--batch", "none"], capture_output=True, text=True, timeout=120
        )
        stats = fetch_stats(url)
    assert final.returncode == 0, final.stderr
    output = " ".join(final.stdout.split())
    assert stats["batches_created"] == 1 and stats["batch_requests"] == DEMO_SAMPLES
    assert stats["chat_completions"] == DEMO_CRITERIA  # only the judge's calls, online
    assert stats["candidate"] == 0
    assert (
        f"{DEMO_SAMPLES} candidate request(s) wait in provider batches of an earlier session: their "
        "answers are used when they come" in output
    )
    assert "never created by the provider" not in output
    assert "the provider may have created them, and then bills them" in output
    assert "GET /v1/batches" in output
    run = store.require_run("killed")
    assert run.status == "finished"
    assert score_stored_run(store, run).metrics() == online_metrics
    states = [b.state for b in BatchLedger(store, run.id).batches()]
    assert states == ["completed", "abandoned"]


def test_batch_fallback_without_batch_is_refused_in_one_line(tmp_path: Path) -> None:
    message = r"--batch-fallback\) only applies with --batch judge or all; add --batch, or drop it"
    with pytest.raises(ConfigError, match=message):  # CLI flags and config files: layers of build_config
        build_config({"batch_fallback": "online"})
    with pytest.raises(ConfigError, match=message):
        validate_config({"batch_fallback": "online", "batch": "none"})
    assert build_config({"batch_fallback": "online", "batch": "judge"}).batch_fallback == "online"
    with running_fake_server() as url:
        store = Store(tmp_path / "s.db")
        run_eval(fake_run_config(url, limit=1), store=store, name="plain")
        with pytest.raises(ConfigError, match=message):  # on resume too
            resume_run("plain", store=store, overrides={"batch_fallback": "online"})
    result = subprocess.run(
        [sys.executable, "-m", "healthbench", "run", "--batch-fallback", "online", "--dry-run",
         "--store", str(tmp_path / "s.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith("add --batch, or drop it")
