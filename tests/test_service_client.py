"""The client as NeMo users expect it: every refusal is a `ServiceError` (422, the server's type and
message) over HTTP and in-process alike; a job that left criteria ungraded is resumed through the
API; job logs carry progress lines; status details count the tokens of cached calls."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_helpers import completed_job, roles
from support.process import GARBAGE_JUDGE, fake_server_process

from healthbench.client import Client, HttpBackend, ServiceError
from healthbench.results.views import RunView
from healthbench.service.app import PREFIX, create_app
from healthbench.service.auth import create_token
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.runs import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats

JOBS = PREFIX.format(workspace="default")
URL = "http://127.0.0.1:9/v1"
ROLE = {"spec": "cand", "base_url": URL}
BODY: dict[str, Any] = {"model": ROLE, "judge": ROLE}
NAME_RULE = "String should match pattern '^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$'"
# (what the client is asked, the 422 message) — the message the server gives for the same request
REFUSALS: list[tuple[Callable[[Any], Any], str]] = [
    (lambda jobs: jobs.create(name="bad/name", **BODY), f"body.name: {NAME_RULE}"),
    (lambda jobs: jobs.create(colour="red", **BODY), "body.colour: Extra inputs are not permitted"),
    (lambda jobs: jobs.create(limit=-1, **BODY), "body.limit: Input should be greater than or equal to 1"),
    (lambda jobs: jobs.create(judge=BODY["judge"]), "body.model: a job of kind 'eval' needs model"),
    (lambda jobs: jobs.retrieve(name="../x"), f"path.name: {NAME_RULE}"),
    (lambda jobs: jobs.get_status(job="a b"), f"path.name: {NAME_RULE}"),
    (lambda jobs: jobs.resume(name=".x"), f"path.name: {NAME_RULE}"),
    (lambda jobs: jobs.list(workspace="a/b"), f"path.workspace: {NAME_RULE}"),
    (lambda jobs: jobs.list(page=0), "query.page: Input should be greater than or equal to 1"),
    (lambda jobs: jobs.list(page_size=501), "query.page_size: Input should be less than or equal to 500"),
    (
        lambda jobs: jobs.list(status="done"),
        "query.status: Input should be 'created', 'pending', 'active', 'completed', 'error', "
        "'cancelling' or 'cancelled'",
    ),
]


@pytest.fixture(params=["http", "local"])
def client(request: pytest.FixtureRequest, service: JobService) -> Iterator[Client]:
    """A client over HTTP (ASGI, in-process) or `Client.local`, on the same store."""
    if request.param == "local":
        with Client.local(service.store) as local:
            yield local
        return
    backend = HttpBackend("http://testserver", None, 10.0)
    backend._http = TestClient(
        create_app(service), headers={"Authorization": f"Bearer {create_token(service.jobs, ['*'])}"}
    )
    with Client(backend=backend) as remote:
        yield remote


@pytest.mark.parametrize(("call", "message"), REFUSALS)
def test_every_refusal_is_a_422_service_error(client: Client, call: Callable, message: str) -> None:
    with pytest.raises(ServiceError) as refused:
        call(client.evaluation.benchmark_jobs)
    error = refused.value
    assert (error.status, error.type, error.message) == (422, "invalid_request", message)


def test_the_client_says_what_the_server_says(http: TestClient, service: JobService) -> None:
    headers = {"Authorization": f"Bearer {create_token(service.jobs, ['*'])}"}
    bodies = [{**BODY, "name": "bad/name"}, {**BODY, "colour": "red"}, {**BODY, "limit": -1}, {"judge": URL}]
    said = [http.post(JOBS, json=body, headers=headers).json()["error"] for body in bodies]
    assert [e["message"] for e in said[:3]] == [m for _, m in REFUSALS[:3]]
    assert said[3]["message"].startswith("body.")
    assert http.get(f"{JOBS}?page=0", headers=headers).json()["error"]["message"] == REFUSALS[8][1]
    assert http.get(f"{JOBS}/.x", headers=headers).json()["error"]["message"] == REFUSALS[6][1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_resume_grades_only_what_is_missing(tmp_path: Path) -> None:
    port = _free_port()
    with Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        with fake_server_process(*GARBAGE_JUDGE, port=port) as url:
            jobs.create(name="j", limit=2, concurrency=4, max_retries=0, **roles(url))
            first = completed_job(client, "j").status_details
            answered = fetch_stats(url)["candidate"]
        assert first.criteria_total > 0 and first.ungraded == first.criteria_total
        assert first.samples_done == first.samples_total == answered == 2
        with fake_server_process(port=port) as url:  # the same endpoint, now answering well
            reset_stats(url)
            assert jobs.resume(name="j").status == "pending"
            second = completed_job(client, "j").status_details
            stats = fetch_stats(url)
            with pytest.raises(ServiceError) as done:
                jobs.resume(name="j")
            metrics = jobs.results.metrics.download(name="j")
            logs = [e.message for e in jobs.get_logs(name="j").data]
    assert stats["candidate"] == 0 and stats["judge"] == first.criteria_total  # only what was missing
    assert second.ungraded == 0 and second.criteria_done == second.criteria_total == first.criteria_total
    assert (done.value.status, done.value.message) == (409, "job 'j' is completed with nothing left to do")
    assert metrics["overall_score"] is not None and metrics["grader_template_sha256"]
    assert "resume requested (was completed)" in logs
    assert logs.count("job completed") == 2
    progress = [m for m in logs if m.startswith("conversations sampled ")]
    assert progress and progress[-1].startswith("conversations sampled 2/2 · criteria graded")


def test_resume_refuses_jobs_that_are_not_finished_or_call_no_model(service: JobService) -> None:
    service.create("default", JobCreate.model_validate({**BODY, "name": "queued"}))
    with pytest.raises(ServiceError) as queued:
        service.resume("default", "queued")
    assert (queued.value.status, queued.value.message) == (
        409,
        "job 'queued' is pending; only a completed, error or cancelled job resumes",
    )
    with pytest.raises(ServiceError) as missing:
        service.resume("default", "nope")
    assert missing.value.status == 404


def test_cached_calls_count_their_tokens(tmp_path: Path) -> None:
    """One definition of status_details tokens: every answered call's, the cached ones included (as
    in the stored run's usage); cost counts only calls a model answered."""
    with fake_server_process() as url, Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="first", limit=2, max_retries=0, **roles(url))
        first = completed_job(client, "first").status_details
        reset_stats(url)
        jobs.create(name="again", limit=2, max_retries=0, **roles(url))  # every call is in the cache
        again = completed_job(client, "again").status_details
        assert fetch_stats(url)["requests"] == 0
    assert first.input_tokens > 0 and first.output_tokens > 0
    assert (again.input_tokens, again.output_tokens) == (first.input_tokens, first.output_tokens)
    store = Store(tmp_path / "s.db")
    try:
        usage = RunView.open(store, "default/again").usage_totals()
    finally:
        store.close()
    assert usage.candidate.input_tokens + usage.judge.input_tokens == again.input_tokens
