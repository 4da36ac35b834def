"""A store outage under a running service: a real PostgreSQL restarted (``pg_ctl restart -m fast``)
or stopped mid-job and while idle, and store errors injected on SQLite. The workers survive it, the
running job is handed back and finishes with the numbers of an uninterrupted run, new jobs run,
requests during the outage answer 503 (never 500), and the probes say what is going on."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from pg_fixtures import PgServer, running_server, unavailable
from service_helpers import roles, token_for
from support.process import fake_server_process
from support.service_process import LOOPBACK, ServiceProcess, service_process

from healthbench.client import Client, ServiceError
from healthbench.errors import StoreError
from healthbench.results.aggregate import aggregate_scores
from healthbench.runner.run import run_eval
from healthbench.service.jobs import JobWorkers, WorkerSettings
from healthbench.service.operations import job_config
from healthbench.service.uploads import uploads_folder
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store

TOKEN = "hb_" + "outage-test-token-0123456789abcdefghijkl"
SECRET = "sk-outage-secret-0123456789"
LEASE = ("--lease", "10")  # seconds: the job, and its run, let go of after an outage (default 15)
T = TypeVar("T")


# the two tests of a real PostgreSQL outage run one after the other on one server of their own
OUTAGE = pytest.mark.xdist_group("postgresql-outage")


@pytest.fixture(scope="module")
def outage_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of this module alone (its tests stop and restart it)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with running_server() as server:
        yield server


@pytest.fixture
def own_pg(outage_pg: PgServer) -> PgServer:
    """`outage_pg`, answering, with a new empty database `hb`."""
    try:
        outage_pg.admin("SELECT 1")
    except Exception:  # an earlier test failed while its server was stopped
        outage_pg.start()
    outage_pg.admin("DROP DATABASE IF EXISTS hb WITH (FORCE)")
    outage_pg.admin("CREATE DATABASE hb")
    return outage_pg


def in_background(function: Callable[..., T], *args: Any) -> Future[T]:
    """``function(*args)`` in a thread: the reference run is made while the job waits for its run."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(function, *args)
    finally:
        pool.shutdown(wait=False)


def reference_metrics(tmp_path: Path, spec: dict[str, Any], name: str) -> Any:
    """The metrics of the job's run made in one go, without an outage, on a fresh SQLite store."""
    reference = Store(tmp_path / f"reference-{name}.db")
    try:
        run_eval(
            job_config(spec | {"name": name}, None, uploads_folder(reference)),
            store=reference,
            name=f"default/{name}",
        )
        return aggregate_scores(reference, f"default/{name}")["metrics"]
    finally:
        reference.close()


def wait_mid_job(client: Client, name: str, samples: int = 5) -> None:
    deadline = time.monotonic() + 60
    while client.evaluation.benchmark_jobs.get_status(name=name).status_details.samples_done < samples:
        assert time.monotonic() < deadline, "the job made no progress"
        time.sleep(0.05)


def probe(service: ServiceProcess, path: str) -> httpx.Response:
    return httpx.get(f"{service.url}{path}", timeout=15, trust_env=False)


def wait_ready(service: ServiceProcess, want: int, contains: str = "", timeout: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        answer = probe(service, "/health/ready")
        if answer.status_code == want and contains in answer.text:
            return answer
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.1)


@pytest.mark.slow
@OUTAGE
def test_postgresql_restarted_mid_job_and_idle(own_pg: PgServer, tmp_path: Path) -> None:
    url = own_pg.url("hb")
    token = token_for(url, ["*"])
    with (
        fake_server_process("--latency", "0.1") as fake,
        service_process(url, *LEASE, *LOOPBACK) as service,
        Client(service.url, token=token) as client,
    ):
        jobs = client.evaluation.benchmark_jobs
        job = jobs.create(name="mid", repeats=4, concurrency=4, max_retries=0, **roles(fake))
        reference = in_background(reference_metrics, tmp_path, job.spec, "mid")
        wait_mid_job(client, "mid")
        own_pg.restart()
        # the first request after the restart is answered (raises on any non-2xx)
        assert jobs.get_status(name="mid").status in ("active", "pending")
        final = client.wait_until_done("mid", interval=0.1, timeout=180)
        assert final.status == "completed", jobs.get_logs(name="mid")
        document = jobs.results.aggregate_scores.download(name="mid")

        own_pg.restart()  # idle: no job runs
        assert jobs.list().pagination.total == 1  # the first request after the restart
        assert wait_ready(service, 200).json() == {"status": "ready", "store": "ok", "workers": "running"}
        jobs.create(name="after", limit=2, max_retries=0, **roles(fake))
        assert client.wait_until_done("after", interval=0.1, timeout=120).status == "completed"
        assert document["metrics"] == reference.result(timeout=120)


@pytest.mark.slow
@OUTAGE
def test_postgresql_stopped_mid_job(own_pg: PgServer, tmp_path: Path) -> None:
    url = own_pg.url("hb")
    env = {"HEALTHBENCH_BOOTSTRAP_TOKEN": TOKEN, "OPENAI_API_KEY": SECRET}
    with (
        fake_server_process("--latency", "0.1") as fake,
        service_process(url, "--log-format", "json", *LEASE, *LOOPBACK, env=env) as service,
        Client(service.url, token=TOKEN) as client,
    ):
        jobs = client.evaluation.benchmark_jobs
        job = jobs.create(name="mid", repeats=4, concurrency=4, max_retries=0, **roles(fake))
        reference = in_background(reference_metrics, tmp_path, job.spec, "mid")
        wait_mid_job(client, "mid")
        own_pg.stop()
        down = wait_ready(service, 503, "waiting for the store")
        assert down.json()["error"] == {
            "status": 503,
            "type": "unavailable",
            "message": "not ready: the store does not answer; job workers: waiting for the store",
        }
        assert probe(service, "/health/live").status_code == 200
        assert probe(service, "/health").json() == {"status": "ok"}
        with pytest.raises(ServiceError) as caught:  # a request meeting the outage: one clear 503
            jobs.get_status(name="mid")
        assert (caught.value.status, caught.value.type) == (503, "unavailable")
        assert caught.value.message == "the store does not answer; try again shortly"
        time.sleep(1.0)  # a short outage (the job's store calls fail meanwhile)
        own_pg.start()
        wait_ready(service, 200)
        final = client.wait_until_done("mid", interval=0.1, timeout=180)
        assert final.status == "completed", jobs.get_logs(name="mid")
        events = [e.message for e in jobs.get_logs(name="mid").data]
        document = jobs.results.aggregate_scores.download(name="mid")
        jobs.create(name="after", limit=2, max_retries=0, **roles(fake))
        assert client.wait_until_done("after", interval=0.1, timeout=120).status == "completed"
        assert document["metrics"] == reference.result(timeout=120)
    assert "the store did not answer; job handed back" in events
    assert events.count("job completed") == 1
    check_json_log(service)


def check_json_log(service: ServiceProcess) -> None:
    """Every stderr line of the service is one JSON object; the outage is one line of the workers at
    its start and one at its end; a job's lines carry it; no token or key anywhere."""
    assert service.process.stderr is not None
    text = service.process.stderr.read().decode()
    assert TOKEN not in text and TOKEN.removeprefix("hb_") not in text and SECRET not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    workers = [r for r in lines if r["message"].endswith("running jobs are handed back, new jobs wait")]
    assert len(workers) == 1, lines  # the workers' first failure; retries are not logged
    http = [r for r in lines if r["message"].endswith("requests answer 503 meanwhile")]
    assert len(http) == 1, lines  # the first refused request or probe; the rest within 30 s are not
    assert len([r for r in lines if r["message"].startswith("the store answers again after")]) == 1
    started = [r for r in lines if r["message"].startswith("job started by")]
    assert [(r["workspace"], r["job"]) for r in started] == [("default", "mid")] * 2 + [("default", "after")]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in lines)


def test_store_errors_do_not_stop_the_workers_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: the claim fails three times, then a job's status update once: the workers say they
    wait for the store, hand the job back, and run it to completion."""
    store = Store(tmp_path / "s.db")
    claim, set_details = JobStore.claim, JobStore.set_details
    failures = {"claim": 3, "set_details": 1}

    def failing(name: str, real: Any) -> Any:
        def call(self: JobStore, *args: Any, **kwargs: Any) -> Any:
            if failures[name] > 0:
                failures[name] -= 1
                raise StoreError("cannot use the store s.db: disk I/O error")
            return real(self, *args, **kwargs)

        return call

    monkeypatch.setattr(JobStore, "claim", failing("claim", claim))
    monkeypatch.setattr(JobStore, "set_details", failing("set_details", set_details))
    with fake_server_process() as fake, Client.local(store) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="j", limit=2, max_retries=0, **roles(fake))
        final = client.wait_until_done("j", interval=0.1, timeout=120)
        events = [e.message for e in jobs.get_logs(name="j").data]
    assert final.status == "completed", events
    assert failures == {"claim": 0, "set_details": 0}
    assert "the store did not answer; job handed back" in events
    assert len([m for m in events if m.startswith("job started by")]) == 2
    store.close()


def test_worker_health_during_a_store_outage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "s.db")
    down = True

    def claim(self: JobStore, *args: Any) -> None:
        if down:
            raise StoreError("cannot use the store s.db: database is locked")

    monkeypatch.setattr(JobStore, "claim", claim)
    with JobWorkers(store, WorkerSettings()) as workers:
        deadline = time.monotonic() + 30
        while workers.health().store_error is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        health = workers.health()
        assert health.running and not health.healthy and health.state == "waiting for the store"
        assert health.store_error == "cannot use the store s.db: database is locked"
        down = False
        while not workers.healthy:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert workers.health().state == "running"
    assert workers.health().state == "stopped"
    store.close()
