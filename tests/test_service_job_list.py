"""The job list past one page (issue 32: the console showed the 200 oldest jobs and no more): newest
first on request, paged with the total, searchable by name; a cancelled or completed job names no
provider batch as running."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from service_helpers import token_for

from healthbench.service.operations import JobService
from healthbench.store.jobs import JobStore

API = "/apis/evaluation/v2/workspaces/default/benchmark-jobs"


def add_jobs(store: Any, names: list[str], status: str = "completed", **spec: Any) -> None:
    """Job rows as a worker leaves them (no worker runs): ``names`` in creation order (ids rising too:
    rows made within one millisecond are ordered by id)."""
    jobs = JobStore(store)
    for name in names:
        job_id = f"{time.time_ns():020d}{uuid.uuid4().hex[:12]}"
        jobs.create(job_id, "default", name, {"kind": "import", **spec}, f"default/{name}")
        jobs.set_status(job_id, status)


def test_250_jobs_newest_first_paged_with_the_total(service: JobService, http: Any, tmp_path: Path) -> None:
    names = [f"job-{i:03d}" for i in range(250)]
    add_jobs(service.store, names)
    headers = {"Authorization": f"Bearer {token_for(str(tmp_path / 's.db'), ['default'])}"}
    seen: list[str] = []
    for page in (1, 2, 3, 4, 5):
        params: dict[str, Any] = {"newest_first": "true", "page": page, "page_size": 50}
        answer = http.get(API, params=params, headers=headers).json()
        assert answer["pagination"] == {"offset": 50 * (page - 1), "limit": 50, "total": 250}
        seen += [job["name"] for job in answer["data"]]
    assert seen == names[::-1]  # every job once, the newest first
    oldest = http.get(API, params={"page_size": 2}, headers=headers).json()
    assert [job["name"] for job in oldest["data"]] == ["job-000", "job-001"]  # the default is unchanged
    found = http.get(API, params={"name_contains": "JOB-24", "newest_first": True}, headers=headers).json()
    assert found["pagination"]["total"] == 10
    assert [job["name"] for job in found["data"]] == [f"job-{i}" for i in range(249, 239, -1)]
    literal = http.get(API, params={"name_contains": "%"}, headers=headers).json()
    assert literal["pagination"]["total"] == 0  # a LIKE wildcard is a character like any other


def test_an_ended_job_names_no_batch_running(service: JobService, http: Any, tmp_path: Path) -> None:
    add_jobs(service.store, ["running"], status="active", batch="judge")
    add_jobs(service.store, ["stopped"], status="cancelled", batch="judge")
    jobs = JobStore(service.store)
    for name in ("running", "stopped"):  # the last progress a worker wrote
        record = jobs.get("default", name)
        assert record is not None
        jobs.set_details(record.id, {"batches": "judge batch in_progress 120/500"})
    headers = {"Authorization": f"Bearer {token_for(str(tmp_path / 's.db'), ['default'])}"}
    running = http.get(f"{API}/running", headers=headers).json()["status_details"]
    assert running["batches"] == "judge batch in_progress 120/500"
    for path in ("/stopped", "/stopped/status"):
        assert http.get(f"{API}{path}", headers=headers).json()["status_details"]["batches"] is None


def test_the_sign_in_page_names_the_command_that_makes_a_token(http: Any) -> None:
    from typer.main import get_command

    import healthbench.cli  # noqa: F401  (registers the commands)
    from healthbench.cli.app import app

    page = http.get("/ui/").text
    assert "<code>healthbench new-token --workspace NAME</code>" in page
    assert "healthbench tokens" not in page  # it lists tokens, it makes none
    command = get_command(app).get_command(None, "new-token")  # type: ignore[attr-defined]
    assert command is not None and "--workspace" in [o for p in command.params for o in p.opts]


def test_the_python_client_pages_newest_first_in_process_and_over_http(
    service: JobService, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from healthbench.client import Client, HttpBackend
    from healthbench.service.app import create_app

    add_jobs(service.store, [f"job-{i}" for i in range(5)])
    token = token_for(str(tmp_path / "s.db"), ["default"])
    backend = HttpBackend("http://testserver", None, 10.0)
    backend._http = TestClient(create_app(service), headers={"Authorization": f"Bearer {token}"})
    with Client.local(service.store) as local, Client(backend=backend) as remote:
        for client in (local, remote):
            listed = client.evaluation.benchmark_jobs.list(
                newest_first=True, page_size=2, name_contains="JOB"
            )
            assert [j.name for j in listed.data] == ["job-4", "job-3"] and listed.pagination.total == 5
