"""One run name, one process: a second process is refused with the holder's name; a holder killed with
`kill -9` (or one on another host that stopped renewing) does not block the run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import update
from support.process import fake_server_process
from test_crash_resume import command, write_dataset

from healthbench.errors import RunError
from healthbench.store import Store
from healthbench.store.db import runs
from healthbench.store.lease import RunLease
from healthbench.testing.fake_server import fetch_stats, reset_stats

CONVERSATIONS = 40
ALL_CALLS = CONVERSATIONS * 11  # one sample and 10 criteria each


def _run(store: Store, name: str = "r") -> int:
    return store.create_run(name, "eval", {"run": {}}, []).id


def test_a_second_holder_is_refused_with_the_holders_name(store_target: str) -> None:
    store = Store(store_target)
    run_id = _run(store)
    first = RunLease(store, run_id, "r", host="box-a", pid=4242)
    first.acquire()
    with pytest.raises(RunError, match=r"run 'r' is being executed by pid 4242 on box-a since 20\d\d-"):
        RunLease(store, run_id, "r", host="box-b", pid=1).acquire()
    first.release()
    RunLease(store, run_id, "r", host="box-b", pid=1).acquire()  # released: free to take


def test_an_expired_lease_is_taken_over_and_the_old_holder_knows(store_target: str) -> None:
    store = Store(store_target)
    run_id = _run(store)
    old = RunLease(store, run_id, "r", ttl=0.2, host="other-host", pid=1)
    old.acquire()
    assert old.renew()
    time.sleep(0.3)  # no renewal for longer than the ttl: the holder is presumed gone
    new = RunLease(store, run_id, "r", host="box", pid=2)
    new.acquire()
    holder = new.holder()
    assert holder is not None and (holder.host, holder.pid) == ("box", 2)
    assert not old.renew()
    old.release()  # releasing a lease that is no longer ours leaves the new holder's alone
    assert new.holder() == holder


def test_a_dead_pid_on_this_host_releases_the_run_at_once(store_target: str) -> None:
    store = Store(store_target)
    run_id = _run(store)
    process = subprocess.Popen(["sleep", "0"])
    process.wait()  # a pid that existed and is gone
    RunLease(store, run_id, "r", host=socket.gethostname(), pid=process.pid).acquire()
    RunLease(store, run_id, "r").acquire()  # the default ttl has not passed: liveness decides


def test_held_releases_on_exit_and_stops_the_run_when_taken_over(store_target: str) -> None:
    store = Store(store_target)
    run_id = _run(store)

    async def hold(lease: RunLease, seconds: float) -> None:
        async with lease.held():
            await asyncio.sleep(seconds)

    asyncio.run(hold(RunLease(store, run_id, "r"), 0.01))
    assert RunLease(store, run_id, "r").holder() is None

    slow = RunLease(store, run_id, "r", ttl=0.3)

    async def taken_over() -> None:
        async def thief() -> None:
            await asyncio.sleep(0.05)
            with store.engine.begin() as conn:  # another process's takeover, as the table sees it
                conn.execute(update(runs).where(runs.c.id == run_id).values(lease_token="someone-else"))

        await asyncio.gather(hold(slow, 5.0), thief())

    with pytest.raises(RunError, match="taken over by another process"):
        asyncio.run(taken_over())


# -- real processes --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slow_server():
    with fake_server_process("--latency", "0.3") as url:
        yield url


@pytest.fixture
def args(slow_server: str, store_target: str, tmp_path: Path) -> list[str]:
    """The command of a run named 'crash' of CONVERSATIONS conversations, the server's counters at zero."""
    data = tmp_path / "data.jsonl"
    write_dataset(data, CONVERSATIONS)
    reset_stats(slow_server)
    return command(slow_server, data, store_target)


def _wait_for_calls(url: str, at_least: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while fetch_stats(url)["requests"] < at_least:
        assert process.poll() is None, "the first process ended before the test could interfere"
        assert time.monotonic() < deadline, "the first process made no calls"
        time.sleep(0.02)


def test_two_processes_on_one_run_name_do_not_double_the_calls(
    slow_server: str, store_target: str, args: list[str]
) -> None:
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for_calls(slow_server, 20, first)
    second = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"is being executed by pid {first.pid} on {socket.gethostname()} since" in lines[0]
    assert first.wait(timeout=180) == 0
    assert fetch_stats(slow_server)["requests"] == ALL_CALLS  # nothing done twice
    assert Store(store_target).require_run("crash").status == "finished"


def test_a_holder_killed_with_kill_9_does_not_block_the_run(
    slow_server: str, store_target: str, args: list[str]
) -> None:
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_calls(slow_server, 20, first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    started = time.monotonic()
    second = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    assert time.monotonic() - started < 60  # not blocked until some long expiry
    assert Store(store_target).require_run("crash").status == "finished"


def test_two_processes_started_together_on_a_new_name_run_it_once(
    slow_server: str, store_target: str, args: list[str]
) -> None:
    started = [
        subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in "ab"
    ]
    outcomes = [(p.wait(timeout=180), p.stderr.read() if p.stderr else "") for p in started]
    for code, stderr in outcomes:  # the run is created once; whoever comes second is refused or finds it done
        assert code == 0 or (code == 1 and "is being executed by pid" in stderr), stderr
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) <= 1, stderr
    assert sorted(code for code, _ in outcomes)[0] == 0
    assert fetch_stats(slow_server)["requests"] == ALL_CALLS
    assert Store(store_target).require_run("crash").status == "finished"
