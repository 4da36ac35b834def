"""`GET /metrics` of `healthbench serve`: the figures of a job equal what the fake server answered
and billed, a second job answered from the call cache counts as cached (no model call), the token
is required unless `--metrics-public`, and promtool accepts the text."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_helpers import completed_job, roles, token_for
from support.process import fake_server_process
from support.service_process import LOOPBACK, service_process

from healthbench.client import Client
from healthbench.service.app import create_app
from healthbench.service.operations import JobService
from healthbench.testing.fake_server import fetch_stats, reset_stats

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Samples:
    """Every sample of the exposition by its name (``..._total``, ``..._count``)."""
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value for have, value in samples.get(name, []) if all(have.get(k) == v for k, v in labels.items())
    )


def scrape(url: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{url}/metrics", headers=headers, timeout=30, trust_env=False)


def test_job_figures_equal_what_the_fake_server_billed(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    token = token_for(store, ["default"])
    with fake_server_process() as fake, service_process(store, *LOOPBACK) as service:
        reset_stats(fake)
        with Client(service.url, token=token) as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="m1", limit=3, concurrency=4, max_retries=0, **roles(fake))
            completed_job(client, "m1")
            billed = fetch_stats(fake)
            # the same calls again: every answer comes from the call cache, no model is asked
            jobs.create(name="m2", limit=3, concurrency=4, max_retries=0, **roles(fake))
            completed_job(client, "m2")
        assert fetch_stats(fake)["requests"] == billed["requests"]
        assert scrape(service.url, None).status_code == 401
        assert scrape(service.url, "hb_not_a_token").status_code == 401
        response = scrape(service.url, token)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    m = parse(text)
    calls = "healthbench_model_calls_total"
    for role in ("candidate", "judge"):
        assert billed[role] > 0
        assert total(m, calls, role=role, outcome="ok", provider="openai") == billed[role]
        assert total(m, calls, role=role, outcome="cached") == billed[role]  # job m2
        assert total(m, "healthbench_model_call_duration_seconds_count", role=role) == billed[role]
    assert total(m, calls, outcome="failed") == total(m, calls, outcome="retried") == 0
    tokens = "healthbench_model_tokens_total"
    assert sum(r["input_tokens"] for r in billed["billed"].values()) > 0
    for kind, billed_kind in (
        ("input", "input_tokens"),
        ("cached_input", "cached_input_tokens"),
        ("cache_write_input", "cache_write_input_tokens"),
        ("output", "output_tokens"),
    ):
        assert total(m, tokens, type=kind) == sum(r[billed_kind] for r in billed["billed"].values()), kind
    # the fake models have no price: no dollars counted
    assert total(m, "healthbench_model_cost_usd_total") == 0
    assert total(m, "healthbench_jobs", state="completed") == 2
    assert total(m, "healthbench_jobs", state="error") == 0
    assert total(m, "healthbench_job_duration_seconds_count", kind="eval", status="completed") == 2
    route = "/apis/evaluation/v2/workspaces/{workspace}/benchmark-jobs/{name}/status"
    assert total(m, "healthbench_http_requests_total", route=route, status="200") > 0
    assert total(m, "healthbench_http_requests_total", route="/metrics", status="401") == 2
    assert "m1" not in text and "prompt" not in text and token not in text  # no names, no secrets
    promtool_accepts(text)


def promtool_accepts(text: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    assert check.returncode == 0, (check.stdout + check.stderr).decode()


def test_metrics_public_answers_without_a_token(service: JobService) -> None:
    from fastapi.testclient import TestClient

    public = TestClient(create_app(service, metrics_public=True))
    response = public.get("/metrics")
    assert response.status_code == 200
    assert "healthbench_jobs" in response.text
    assert TestClient(create_app(service)).get("/metrics").status_code == 401
