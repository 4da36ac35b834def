"""A real Prometheus (Debian's ``prometheus``) scrapes `healthbench serve` with a bearer token while a
job runs, and its query API returns the calls counter: the scrape config of docs/service.md works."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from service_helpers import completed_job, roles, token_for
from support.process import fake_server_process, free_port
from support.service_process import LOOPBACK, service_process

from healthbench.client import Client
from healthbench.testing.fake_server import fetch_stats, reset_stats

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="the prometheus binary is not installed (Debian package prometheus)"
)

CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: healthbench
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {token_file}
    static_configs:
      - targets: ["{target}"]
"""


@contextmanager
def prometheus(tmp_path: Path, target: str, token: str) -> Iterator[str]:
    """Prometheus on a free loopback port scraping ``target`` every second with ``token``; its URL.
    Stopped (SIGTERM, then killed) at the end."""
    assert PROMETHEUS is not None
    token_file = tmp_path / "token"
    token_file.write_text(token)
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(token_file=token_file, target=target))
    url = f"http://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={url.removeprefix('http://')}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready(url):
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "prometheus did not become ready"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def query(url: str, promql: str) -> float | None:
    """The value of an instant query with one result (None: no result yet)."""
    response = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10, trust_env=False)
    response.raise_for_status()
    result = response.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def wait_for(
    url: str, promql: str, done: Callable[[float | None], bool], timeout: float = 60
) -> float | None:
    """Query until ``done(value)`` holds (or the timeout); the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = query(url, promql)
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def test_prometheus_scrapes_the_calls_counter_with_a_bearer_token(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    token = token_for(store, ["default"])
    calls = 'sum(healthbench_model_calls_total{outcome="ok"})'
    with (
        fake_server_process("--latency", "0.1") as fake,
        service_process(store, *LOOPBACK) as service,
        prometheus(tmp_path, service.url.removeprefix("http://"), token) as prom,
        Client(service.url, token=token) as client,
    ):
        assert wait_for(prom, 'up{job="healthbench"}', lambda v: v == 1) == 1  # the token was accepted
        reset_stats(fake)
        client.evaluation.benchmark_jobs.create(
            name="p1", limit=6, concurrency=2, max_retries=0, **roles(fake)
        )
        during = wait_for(prom, calls, lambda v: v is not None and v > 0)
        completed_job(client, "p1")
        made = fetch_stats(fake)["requests"]
        assert during is not None and 0 < during < made  # scraped while the job ran
        assert wait_for(prom, calls, lambda v: v == made) == made
        assert wait_for(prom, 'healthbench_jobs{state="completed"}', lambda v: v == 1) == 1
