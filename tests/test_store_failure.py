"""A store that fails under a running run (issue #32 items 15 and 16): a failed commit repeats no more
calls on resume than the resume says (counted by the fake server), a PostgreSQL server stopped
mid-run ends with the command that continues the run (which runs once it is back), and a SQLite file
deleted mid-run stops the run with a clear error instead of "metrics written"."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_fixtures import pg_bindir, running_server, unavailable
from support.fake_runs import fake_run_config

from healthbench.errors import StoreError, StoreGoneError
from healthbench.runner.run import resume_run, run_eval
from healthbench.store import Store
from healthbench.store.lease import RunLease
from healthbench.store.runs import Store as StoreClass
from healthbench.testing.fake_server import FakeServerConfig, fetch_stats, reset_stats, running_fake_server

DEMO_CALLS = 8 + 36  # the demo run's calls: 8 answers, 36 criteria
SLOW = FakeServerConfig(latency=0.05, latency_jitter=0.05)


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    with running_fake_server(SLOW) as url:
        yield url


@pytest.mark.parametrize("failing_commit", [2, 4, 6, 8, 10])
def test_a_failed_commit_repeats_at_most_the_calls_the_resume_says(
    slow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_commit: int
) -> None:
    """The store fails (as a full disk does) at its n-th group commit: no call starts after that, so
    the resume asks again at most --max-connections calls, as it says."""
    reset_stats(slow_server)
    put_rows = StoreClass.put_rows
    commits = {"n": 0, "failing": True}

    def failing(self: StoreClass, run_id: int, rows: object) -> None:
        commits["n"] += 1
        if commits["failing"] and commits["n"] >= failing_commit:
            raise StoreError("cannot use the store: database or disk is full (injected)")
        put_rows(self, run_id, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(StoreClass, "put_rows", failing)
    store = Store(tmp_path / "s.db")
    config = fake_run_config(slow_server, max_connections=4)
    with pytest.raises(StoreError, match="disk is full"):
        run_eval(config, store=store, name="full")
    commits["failing"] = False
    outcome = resume_run("full", store=store)
    assert outcome.run.status == "finished"
    repeated = fetch_stats(slow_server)["requests"] - DEMO_CALLS
    assert outcome.counters.repeat_bound == 4
    assert 0 <= repeated <= outcome.counters.repeat_bound


# -- a real PostgreSQL server stopped mid-run -------------------------------------------------------
def _pg_ctl(root: Path, *args: str) -> None:
    bindir = pg_bindir()
    assert bindir is not None
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(root / "data"), *args], check=True,
                   capture_output=True, timeout=60)  # fmt: skip


def _run_command(url: str, store: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "healthbench", "run", "--model", "fake-candidate", "--base-url", url,
        "--judge", "fake-judge", "--judge-base-url", url, "--store", store, "--max-connections", "4",
        *extra,
    ]  # fmt: skip


def _wait_for_requests(url: str, process: subprocess.Popen[str], n: int) -> None:
    deadline = time.monotonic() + 60
    while fetch_stats(url)["requests"] < n:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.slow
def test_a_postgresql_server_stopped_mid_run_ends_with_a_continue_line_that_runs(tmp_path: Path) -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with running_server() as pg, running_fake_server(FakeServerConfig(latency=0.1)) as url:
        pg.admin("CREATE DATABASE stopped")
        target = pg.url("stopped")
        first = subprocess.Popen(
            _run_command(url, target, "--name", "pg"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for_requests(url, first, 12)
        _pg_ctl(pg.socket_dir, "-m", "immediate", "-w", "stop")
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 1
        last = stderr.strip().splitlines()[-1]
        assert "cannot use the store" in last
        found = re.search(r"continue with: (.+)$", last)
        assert found is not None, stderr
        words = shlex.split(found.group(1))
        assert words[:4] == ["healthbench", "run", "--resume", "pg"]
        options = f"-k {pg.socket_dir} -p 5432 -c listen_addresses='' -c fsync=off"
        _pg_ctl(pg.socket_dir, "-l", str(pg.socket_dir / "log"), "-o", options, "-w", "start")
        again = subprocess.run(
            [sys.executable, "-m", "healthbench", *words[1:]], capture_output=True, text=True, timeout=120
        )
        assert again.returncode == 0, again.stderr
        bound = re.search(r"at most (\d+) calls repeated", again.stdout)
        assert bound is not None, again.stdout
        repeated = fetch_stats(url)["requests"] - DEMO_CALLS
        assert 0 <= repeated <= int(bound.group(1)) == 4


# -- a SQLite file deleted mid-run --------------------------------------------------------------------
def test_a_store_file_deleted_mid_run_stops_the_run_without_writing_metrics(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    metrics = tmp_path / "m.json"
    with running_fake_server(FakeServerConfig(latency=0.1)) as url:
        process = subprocess.Popen(
            _run_command(url, str(db), "--name", "gone", "--metrics-out", str(metrics)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for_requests(url, process, 6)
        db.unlink()
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stdout
    assert "metrics written" not in stdout and not metrics.exists()
    line = stderr.strip().splitlines()[-1]
    assert f"error: the store file {db} was deleted or replaced while run 'gone' was using it" in line
    assert "continue with" not in line  # nothing is left to continue


def test_the_lease_holder_stops_a_run_at_the_next_heartbeat_once_its_store_file_is_gone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    with running_fake_server() as url:
        store = Store(db)
        run = run_eval(fake_run_config(url, limit=1), store=store, name="r").run

    async def hold() -> None:
        async with RunLease(store, run.id, run.name, ttl=0.3).held():
            db.rename(tmp_path / "moved.db")  # replaced (moved away): as good as deleted for the run
            await asyncio.sleep(30)  # cancelled by the heartbeat

    started = time.monotonic()
    with pytest.raises(StoreGoneError, match="was deleted or replaced while run 'r' was using it"):
        asyncio.run(hold())
    assert time.monotonic() - started < 10


# -- a real full disk (a small tmpfs) ------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 8 MB tmpfs (needs the right to mount one: root in a container that allows it)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Fill the disk of ``folder`` to its last byte; the file that does."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_mid_run_repeats_at_most_the_calls_the_resume_says(small_disk: Path) -> None:
    db = small_disk / "s.db"
    with running_fake_server(FakeServerConfig(latency=0.1)) as url:
        first = subprocess.Popen(
            _run_command(url, str(db), "--name", "full"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for_requests(url, first, 12)
        filler = _fill(small_disk)
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 1, stderr
        last = stderr.strip().splitlines()[-1]
        assert "cannot use the store" in last and "full" in last, last
        found = re.search(r"continue with: (.+)$", last)
        assert found is not None, stderr
        filler.unlink()  # space again
        again = subprocess.run(
            [sys.executable, "-m", "healthbench", *shlex.split(found.group(1))[1:]],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0, again.stderr
        bound = re.search(r"at most (\d+) calls repeated", again.stdout)
        assert bound is not None, again.stdout
        repeated = fetch_stats(url)["requests"] - DEMO_CALLS
        assert 0 <= repeated <= int(bound.group(1)) == 4
