"""The web console's page of a panel of judges' job (headless Chromium, as tests/test_console_browser.py
drives it): the members' own scores and their agreement are the service's metrics. The job row is
written as a worker leaves it, on a panel run written straight into the store (no model call).
Screenshots go where tests/test_console_browser.py puts them."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import CHROMIUM, NO_CHROMIUM, chromium_context
from support.service_process import service_process
from test_panel_results import MEMBERS, _write_run

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
if CHROMIUM is None:
    pytest.skip(NO_CHROMIUM, allow_module_level=True)

from test_console_browser import API, DEFAULT_SCREENSHOTS, SCREENSHOTS_ENV, _open


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(service URL, its token, the panel job's metrics as the service computes them)."""
    from healthbench.service.operations import JobService  # noqa: F401  (the service's own path)
    from healthbench.store.jobs import JobStore
    from healthbench.store.runs import Store

    token = "hb_" + secrets.token_urlsafe(32)
    db = str(tmp_path_factory.mktemp("panel-console") / "s.db")
    store = Store(db)
    jobs = JobStore(store)
    for name, judges in (("panel", MEMBERS), ("single", MEMBERS[:1])):
        _write_run(store, f"default/{name}", judges)
        job_id = f"{time.time_ns():020d}{uuid.uuid4().hex[:12]}"
        jobs.create(job_id, "default", name, {"kind": "eval"}, f"default/{name}")
        jobs.set_status(job_id, "completed")
    store.close()
    with service_process(db, env={"HEALTHBENCH_BOOTSTRAP_TOKEN": token}) as running:
        import httpx

        api = f"{running.url}{API}/panel/results/metrics/download"
        metrics = httpx.get(api, headers={"Authorization": f"Bearer {token}"}, trust_env=False).json()
        yield running.url, token, metrics


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium_context(
        tmp_path_factory.mktemp("chromium"), viewport={"width": 1280, "height": 900}
    ) as ctx:
        yield ctx


def test_a_panel_jobs_page_shows_its_members_and_their_agreement(
    service: tuple[str, str, dict[str, Any]], context: Any, shots: Path
) -> None:
    url, token, metrics = service
    assert metrics["panel_rule"] == "majority"
    page, outside, errors = _open(context, url)
    page.fill("#signin-token", token)
    page.press("#signin-token", "Enter")
    page.wait_for_selector('#jobs-table tbody tr[data-job="panel"]')
    page.goto(f"{url}/ui/#/job/panel")
    page.wait_for_selector("#job-judges:not([hidden])")
    rows = page.locator("#judges-table tbody tr")
    assert rows.count() == len(MEMBERS)
    assert rows.locator("th").all_text_contents() == MEMBERS
    shown = rows.locator("td").all_text_contents()
    assert shown == [f"{metrics[f'judge:{label}:overall_score']:.3f}" for label in MEMBERS]
    line = page.locator("#judges-line").text_content() or ""
    assert f"judge_agreement {metrics['judge_agreement']:.3f}" in line and "rule majority" in line
    page.locator("#view-job").screenshot(path=str(shots / "20-panel-job.png"))
    page.goto(f"{url}/ui/#/job/single")
    page.wait_for_selector('#job-name:text-is("single")')
    page.wait_for_selector("#c-count:not(:empty)")  # (filled once the judges' block is decided)
    assert page.locator("#job-judges").is_hidden()  # a single judge: no such block
    assert outside == [] and errors == []
    page.close()
