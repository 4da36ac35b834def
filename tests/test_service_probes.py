"""Kubernetes' probes (`/health/live`, `/health/ready`), the 503 of a request that meets a store
outage, and the service's log lines (text or JSON, the job on a job's lines, no secret in any)."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_helpers import token_for

from healthbench.errors import StoreError
from healthbench.service.app import create_app
from healthbench.service.health import WorkerHealth
from healthbench.service.jobs import JobWorkers, WorkerSettings
from healthbench.service.logs import JsonFormatter, Redactor, TextFormatter, job_context, secrets_of
from healthbench.service.operations import JobService
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store


class Workers:
    def __init__(self, health: WorkerHealth) -> None:
        self.state = health

    def health(self) -> WorkerHealth:
        return self.state


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "s.db")
    yield store
    store.close()


def client(store: Store, workers: Any = None) -> TestClient:
    return TestClient(create_app(JobService(store), workers), raise_server_exceptions=False)


def test_probes_answer_without_a_token(store: Store) -> None:
    with JobWorkers(store, WorkerSettings()) as workers:
        http = client(store, workers)
        deadline = time.monotonic() + 30
        while (ready := http.get("/health/ready")).status_code != 200:
            assert time.monotonic() < deadline, ready.text
            time.sleep(0.05)
        assert ready.json() == {"status": "ready", "store": "ok", "workers": "running"}
        assert http.get("/health/live").json() == {"status": "ok"}
    stopped = http.get("/health/ready")
    assert stopped.status_code == 503
    assert stopped.json()["error"]["message"] == "not ready: job workers: stopped"
    assert http.get("/health/live").status_code == 200


def test_readiness_reflects_the_workers_and_the_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    workers = Workers(WorkerHealth(True, "cannot use the store /srv/secret/s.db: disk I/O error", 1.0))
    http = client(store, workers)
    answer = http.get("/health/ready")
    assert answer.status_code == 503
    assert answer.json() == {
        "error": {
            "status": 503,
            "type": "unavailable",
            "message": "not ready: job workers: waiting for the store",
        }
    }
    workers.state = WorkerHealth(True)
    assert http.get("/health/ready").status_code == 200

    def down(self: JobStore) -> None:
        raise StoreError("cannot use the store /srv/secret/s.db: connection refused")

    monkeypatch.setattr(JobStore, "ping", down)
    answer = http.get("/health/ready")
    assert answer.status_code == 503
    assert answer.json()["error"]["message"] == "not ready: the store does not answer"
    assert "/srv/secret" not in answer.text  # public: no store location or error text
    assert client(store).get("/health/ready").json()["error"]["message"] == (
        "not ready: the store does not answer; job workers: none"
    )


def test_a_request_meeting_a_store_outage_answers_503(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = token_for(str(tmp_path / "s.db"), ["*"])
    http = client(store)
    auth = {"Authorization": f"Bearer {token}"}
    assert http.get("/apis/evaluation/v2/workspaces/default/benchmark-jobs", headers=auth).status_code == 200

    def down(self: JobStore, *args: Any, **kwargs: Any) -> None:
        raise StoreError("cannot use the store /srv/secret/s.db: server closed the connection")

    monkeypatch.setattr(JobStore, "list", down)  # in a route (the token is known: cached)
    answer = http.get("/apis/evaluation/v2/workspaces/default/benchmark-jobs", headers=auth)
    expected = {
        "error": {
            "status": 503,
            "type": "unavailable",
            "message": "the store does not answer; try again shortly",
        }
    }
    assert (answer.status_code, answer.json(), answer.headers["retry-after"]) == (503, expected, "5")
    monkeypatch.setattr(JobStore, "token_workspaces", down)  # in the token check (a token not cached)
    other = {"Authorization": "Bearer hb_not-cached-0123456789"}
    answer = http.get("/apis/evaluation/v2/workspaces/default/benchmark-jobs", headers=other)
    assert (answer.status_code, answer.json()) == (503, expected)


def record(message: str, *args: Any, exc_info: Any = None) -> logging.LogRecord:
    return logging.LogRecord("healthbench.service", logging.WARNING, __file__, 1, message, args, exc_info)


def test_log_lines_carry_the_job_and_no_secret() -> None:
    key, token = "sk-proj-abcdefghijklmnopqrstuvwxyz", "hb_Zz9-secret-token-value-0123456789"
    custom = "custom-endpoint-password-4242"
    redact = Redactor(secrets_of({"OPENAI_API_KEY": key, "VLLM_TOKEN": custom, "HOME": "/root"}))
    json_lines, text_lines = JsonFormatter(redact), TextFormatter(redact)
    try:
        raise RuntimeError(f"endpoint said: bad key {key} for Authorization: Bearer {token}")
    except RuntimeError:
        import sys

        failure = record("call failed with %s (%s)", token, custom, exc_info=sys.exc_info())
    outside = json.loads(json_lines.format(failure))
    assert {"workspace", "job"}.isdisjoint(outside)
    with job_context("team-a", "nightly"):
        line = json_lines.format(failure)
        text = text_lines.format(record("job completed"))
    for secret in (key, token, token.removeprefix("hb_"), custom):
        assert secret not in line and secret not in text
    parsed = json.loads(line)
    assert (parsed["workspace"], parsed["job"], parsed["level"]) == ("team-a", "nightly", "warning")
    assert parsed["message"] == "call failed with hb_*** (***)"
    assert "Bearer ***" in parsed["exception"] and "RuntimeError" in parsed["exception"]
    assert text.endswith(" WARNING [team-a/nightly] job completed")


def test_configured_logging_writes_json_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from healthbench.service import logs

    stream = io.StringIO()
    monkeypatch.setattr(logs.sys, "stderr", stream)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("healthbench").level)
    psycopg = logging.getLogger("psycopg")
    try:
        logs.configure_logging("json", {"ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef"})
        with job_context("default", "j1"):
            logging.getLogger("healthbench.service").info("key sk-ant-0123456789abcdef refused")
        logging.getLogger("healthbench.service").debug("not shown")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger("healthbench").setLevel(saved[2])
        psycopg.propagate = True
    (line,) = stream.getvalue().splitlines()
    parsed = json.loads(line)
    assert (parsed["message"], parsed["job"], parsed["level"]) == ("key *** refused", "j1", "info")


def test_the_worker_process_health_as_the_http_process_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from healthbench.service import jobs

    shared = SimpleNamespace(value=b"")
    assert jobs.read_health(shared).state == "starting"  # alive, nothing published yet
    jobs.publish_health(shared, WorkerHealth(True, "cannot use the store x: " + "e" * 2000, 12.5))
    read = jobs.read_health(shared)
    assert (read.state, read.since, len(read.store_error or "")) == ("waiting for the store", 12.5, 300)
    jobs.publish_health(shared, WorkerHealth(True))
    assert jobs.read_health(shared).healthy
    later = time.time() + jobs.HEALTH_STALE + 1
    monkeypatch.setattr(jobs.time, "time", lambda: later)  # no word for longer than HEALTH_STALE
    assert jobs.read_health(shared).state == "stopped"
