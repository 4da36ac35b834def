"""The console's server side without a browser: /ui files with their strict CSP, and the API's job
report (built once, then served from where it was kept) and job-vs-job comparison pages, with their
refusals. The pages in a browser: tests/test_console_browser.py."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_helpers import token_for
from test_service_offline import demo_samples

import healthbench.service.operations as operations
from healthbench.analysis.report import REPORT_CSP, script_hash
from healthbench.client import Client
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.run_score import score_run
from healthbench.service.app import create_app
from healthbench.service.errors import ServiceError
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.runs import Store

API = "/apis/evaluation/v2/workspaces/default/benchmark-jobs"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str], JobService]]:
    """An HTTP client on a store with two completed import jobs (``a``, ``b``) and a token."""
    from fastapi.testclient import TestClient

    folder = tmp_path_factory.mktemp("console")
    db = str(folder / "s.db")
    samples = demo_samples()
    text = write_allresults(folder / "x_allresults.json", samples, score_run(samples)).read_text("utf-8")
    with Client.local(db) as client:
        for name in ("a", "b"):
            client.evaluation.benchmark_jobs.create(
                name=name, kind="import", dataset="demo", allresults_json=text
            )
            assert client.wait_until_done(name, interval=0.05, timeout=60).status == "completed"
    headers = {"Authorization": f"Bearer {token_for(db, ['default'])}"}
    store = Store(db)
    service = JobService(store)
    yield TestClient(create_app(service), raise_server_exceptions=False), headers, service
    store.close()


def test_console_files_are_served_with_a_strict_csp(console: Any) -> None:
    http, _, _ = console
    page = http.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert f"script-src 'self' {script_hash()};" in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script src="console.js" defer></script>' in page.text and "<script>" not in page.text
    script = http.get("/ui/console.js")
    assert script.headers["content-type"].startswith("text/javascript") and "sessionStorage" in script.text
    assert "localStorage" not in script.text and "document.cookie" not in script.text
    assert http.get("/ui/console.css").headers["content-security-policy"] == csp
    missing = http.get("/ui/secrets.txt")
    assert (
        missing.status_code == 404 and missing.json()["error"]["message"] == "no console file 'secrets.txt'"
    )
    moved = http.get("/ui", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/ui/"
    assert not any(p.startswith("/ui") for p in http.get("/openapi.json").json()["paths"])


def test_job_report_is_built_once_and_is_the_reports_page(
    console: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    http, headers, _ = console
    first = http.get(f"{API}/a/report", headers=headers)
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
    assert first.headers["content-security-policy"] == REPORT_CSP
    assert "<title>HealthBench report: job a</title>" in first.text
    # the console's CSP allows exactly the report's one executable script
    (script,) = re.findall(r"<script>(.*?)</script>", first.text, flags=re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    assert script_hash() == f"'sha256-{digest}'"

    def no_rebuild(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the report was built again")

    monkeypatch.setattr(operations, "build_report", no_rebuild)
    again = http.get(f"{API}/a/report", headers=headers)
    assert again.status_code == 200 and again.content == first.content


def test_job_comparison_page_has_the_gate_verdicts(console: Any) -> None:
    http, headers, _ = console
    page = http.get(
        f"{API}/b/compare",
        params={"baseline": "a", "fail_if_worse_by": 0.02, "require_non_inferiority": 0.01},
        headers=headers,
    )
    assert page.status_code == 200, page.text
    assert page.headers["content-security-policy"] == REPORT_CSP
    assert "HealthBench comparison: job b against job a" in page.text
    assert 'id="comparison-verdict"' in page.text
    assert "gate --fail-if-worse-by 0.02: passed" in page.text  # the same answers: B - A = 0
    assert "gate --require-non-inferiority 0.01: passed" in page.text
    assert page.text.count('<li data-passed="true">') == 2


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/nope/report", 404, "no job named 'nope' in workspace 'default'"),
        ("/b/compare?baseline=nope", 404, "baseline: no job named 'nope' in workspace 'default'"),
        ("/b/compare", 422, "query.baseline: Field required"),
        (
            "/b/compare?baseline=a&fail_if_worse_by=-1",
            422,
            "query.fail_if_worse_by: Input should be greater than or equal to 0",
        ),
        (
            "/b/compare?baseline=a&fail_if_worse_by=5",
            422,
            "query.fail_if_worse_by: Input should be less than 1",  # the schema states compare's rule
        ),
        (
            "/b/compare?baseline=a&require_non_inferiority=1",
            422,
            "query.require_non_inferiority: Input should be less than 1",
        ),
        ("/pending/report", 409, "job 'pending' is pending; it has a report once completed"),
        (
            "/b/compare?baseline=pending",
            409,
            "baseline: job 'pending' is pending; it has a report once completed",
        ),
    ],
)
def test_report_and_comparison_refusals(console: Any, path: str, status: int, message: str) -> None:
    http, headers, service = console
    if service.jobs.get("default", "pending") is None:  # no worker runs here: it stays pending
        service.create("default", JobCreate.model_validate({"name": "pending", **_roles()}))
    answer = http.get(f"{API}{path}", headers=headers)
    assert (answer.status_code, answer.json()["error"]["message"]) == (status, message)


def test_the_service_checks_a_threshold_as_compare_does(console: Any) -> None:
    """In-process callers (the Python client's `Client.local`) meet `compare`'s own rule and words."""
    _, _, service = console
    with pytest.raises(ServiceError) as caught:
        service.comparison_html("default", "b", "a", fail_if_worse_by=5.0)
    assert (caught.value.status, caught.value.message) == (
        422,
        "query.fail_if_worse_by: 5.0 is not a score difference; give a number from 0 up to (not incl.) 1",
    )


def test_a_job_compared_with_itself_is_warned_of_as_compare_warns(console: Any) -> None:
    http, headers, _ = console
    page = http.get(f"{API}/b/compare", params={"baseline": "b"}, headers=headers)
    assert page.status_code == 200, page.text
    warning = "A and B are the same input (store:default/b): every difference is 0 by construction"
    assert f'<p class="note warn">{warning}</p>' in page.text
    other = http.get(f"{API}/b/compare", params={"baseline": "a"}, headers=headers)
    assert "the same input" not in other.text


def test_report_needs_a_token(console: Any) -> None:
    http, _, _ = console
    assert http.get(f"{API}/a/report").status_code == 401
    assert (
        http.get(f"{API}/a/compare?baseline=b", headers={"Authorization": "Bearer hb_x"}).status_code == 401
    )


def _roles() -> dict[str, Any]:
    return {
        "model": {"spec": "cand", "base_url": "http://127.0.0.1:9/v1"},
        "judge": {"spec": "judge", "base_url": "http://127.0.0.1:9/v1"},
    }


def test_deleting_a_job_drops_its_kept_report(console: Any, tmp_path: Path) -> None:
    http, headers, service = console
    assert http.get(f"{API}/b/report", headers=headers).status_code == 200
    assert http.delete(f"{API}/a", headers=headers).status_code == 204  # its report goes, b's stays
    record = service.jobs.get("default", "b")
    assert record is not None
    kept = operations.report_path(service.folder, record.id, record.updated_at)
    assert kept.exists()
    assert http.delete(f"{API}/b", headers=headers).status_code == 204
    assert not kept.exists() and not kept.parent.exists()  # b's was the last report kept
