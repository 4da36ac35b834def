"""The web console (`healthbench serve` at /ui) end to end in headless Chromium (Debian's, driven by
Playwright): a wrong token is refused with a clear message; sign in; a form error is the API's own
message; create a job against the fake server from the form and watch it complete; open its report
(the numbers are the service's); compare two jobs with a gate; cancel a running job. Nothing is fetched
from outside the service, and no page logs an error (a CSP refusal included).

Screenshots of each page are written to $HEALTHBENCH_SCREENSHOTS, else test-artifacts/console/ (not
committed); the folder is printed.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.browser import CHROMIUM, NO_CHROMIUM, chromium_context
from support.process import fake_server_process
from support.service_process import service_process

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
if CHROMIUM is None:
    pytest.skip(NO_CHROMIUM, allow_module_level=True)

SCREENSHOTS_ENV = "HEALTHBENCH_SCREENSHOTS"
DEFAULT_SCREENSHOTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "console"
API = "/apis/evaluation/v2/workspaces/default/benchmark-jobs"
TIMEOUT = 60_000  # ms


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(service URL, its token, the fake model server's URL)."""
    token = "hb_" + secrets.token_urlsafe(32)
    store = str(tmp_path_factory.mktemp("console") / "s.db")
    with (
        fake_server_process("--latency", "0.05") as fake,
        service_process(
            store, "--allow-base-url", f"{fake}*", env={"HEALTHBENCH_BOOTSTRAP_TOKEN": token}
        ) as service,
    ):
        yield service.url, token, fake


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with chromium_context(profile, viewport={"width": 1280, "height": 900}) as context:
        yield context


def _guarded_page(context: Any, url: str) -> tuple[Any, list[str], list[str]]:
    """A new page whose requests outside the service are refused and recorded, as are page errors
    and console errors (CSP refusals are console errors)."""
    page = context.new_page()
    outside: list[str] = []
    errors: list[str] = []

    def route(route: Any) -> None:
        if route.request.url.startswith((url, "blob:", "data:")):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, outside, errors


def _open(context: Any, url: str) -> tuple[Any, list[str], list[str]]:
    """A new guarded page (`_guarded_page`) on the console."""
    page, outside, errors = _guarded_page(context, url)
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{url}/ui/")
    page.wait_for_selector('body[data-ready="true"]', state="attached")
    return page, outside, errors


def _fill_job(page: Any, fake: str, name: str, *, temperature: str = "", limit: str = "3") -> None:
    page.goto(page.url.split("#")[0] + "#/new")
    page.fill("#f-name", name)
    page.fill("#f-limit", limit)
    page.fill("#f-model-spec", "cand")
    page.fill("#f-model-url", fake)
    page.fill("#f-model-temperature", temperature)
    page.fill("#f-judge-spec", "judge")
    page.fill("#f-judge-url", fake)


def _wait_completed(page: Any, name: str) -> None:
    try:
        page.wait_for_selector(f'#job-name:text-is("{name}")', timeout=TIMEOUT / 2)
    except sync_api.TimeoutError:
        shown = page.locator("#new-error, #flash").all_text_contents()
        raise AssertionError(f"job {name} was not created: {shown}") from None
    page.wait_for_selector('#job-status:text-is("completed")', timeout=TIMEOUT)


def test_console_end_to_end(servers: tuple[str, str, str], context: Any, shots: Path) -> None:
    url, token, fake = servers
    headers = {"Authorization": f"Bearer {token}"}
    ui = httpx.get(f"{url}/ui/", trust_env=False)
    csp = ui.headers["content-security-policy"]
    assert (
        "script-src 'self' 'sha256-" in csp
        and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp

    page, outside, errors = _open(context, url)
    # a wrong token: a clear message, nothing kept
    page.fill("#signin-token", "hb_" + "x" * 43)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:has-text('not accepted')")
    assert page.locator("#signin-error").text_content() == (
        "That token was not accepted (401 unauthorized: invalid token). Check that it was pasted whole."
    )
    assert page.evaluate("window.sessionStorage.length") == 0
    page.screenshot(path=str(shots / "01-wrong-token.png"), full_page=True)
    errors.clear()  # the browser logs the refused request (401) itself

    # sign in with the keyboard
    page.fill("#signin-token", token)
    page.press("#signin-token", "Enter")
    page.wait_for_selector("#view-jobs:not([hidden])")
    assert page.evaluate("window.sessionStorage.getItem('hb.token')") == token
    assert page.evaluate("document.cookie") == ""
    page.wait_for_selector("#jobs-empty:not([hidden])")  # the list loads after the view shows

    # a form error is the API's message for the same body
    _fill_job(page, fake, "first")
    page.fill("#f-model-spec", "")
    page.fill("#f-model-url", "")
    page.click("#f-submit")
    page.wait_for_selector("#new-error:not(:empty)")
    body = {"kind": "eval", "name": "first", "judge": {"spec": "judge", "base_url": fake}, "dataset": "demo"}
    api = httpx.post(f"{url}{API}", json={**body, "limit": 3, "repeats": 1}, headers=headers, trust_env=False)
    assert api.status_code == 422
    error = api.json()["error"]
    assert page.locator("#new-error").text_content() == f"422 invalid_request: {error['message']}"
    page.screenshot(path=str(shots / "02-new-job-error.png"), full_page=True)
    errors.clear()  # the refused request (422) is logged by the browser

    # create a job from the form and watch it complete
    _fill_job(page, fake, "first")
    page.click("#f-submit")
    _wait_completed(page, "first")
    assert page.locator("#job-results").is_visible()
    assert page.locator("#job-logs").text_content().rstrip().endswith("job completed")
    samples = page.locator('dd[data-field="samples"]').text_content()
    assert samples == "3 / 3"
    page.screenshot(path=str(shots / "03-job-completed.png"), full_page=True)

    # its report: the service's stored report, its score the aggregate's
    page.click("#job-report-link")
    frame = page.frame_locator("#page-frame")
    frame.locator('body[data-ready="true"]').wait_for(state="attached", timeout=TIMEOUT)
    aggregate = httpx.get(
        f"{url}{API}/first/results/aggregate-scores/download", headers=headers, trust_env=False
    ).json()
    overall = next(m for m in aggregate["metrics"] if m["metric_ref"] == "healthbench/overall_score")
    shown = float(frame.locator('.card[data-run="0"] .big').get_attribute("data-value"))
    assert shown == pytest.approx(overall["aggregation"]["scores"][0]["score"], abs=1e-12)
    assert frame.locator("#chart-themes rect.bar").count() > 0
    page.screenshot(path=str(shots / "04-report.png"))

    # a second job, then the comparison with a gate
    _fill_job(page, fake, "second", temperature="0.7")
    page.click("#f-submit")
    _wait_completed(page, "second")
    page.select_option("#c-baseline", "first")
    page.fill("#c-worse", "0.5")
    page.click("#c-submit")
    frame.locator('body[data-ready="true"]').wait_for(state="attached", timeout=TIMEOUT)
    verdict = frame.locator("#comparison-verdict").text_content()
    assert verdict in ("better", "worse", "no difference", "n too small")
    gate = frame.locator("#comparison-gates li")
    assert gate.count() == 1 and gate.get_attribute("data-passed") == "true"
    assert "gate --fail-if-worse-by 0.5: passed" in gate.text_content()
    page.screenshot(path=str(shots / "05-comparison.png"))
    frame.locator("#comparison").screenshot(path=str(shots / "05-comparison-section.png"))

    # a long job, cancelled from the job list
    slow = {
        **body,
        "name": "slow",
        "repeats": 40,
        "concurrency": 1,
        "model": {"spec": "cand", "base_url": fake},
    }
    assert httpx.post(f"{url}{API}", json=slow, headers=headers, trust_env=False).status_code == 201
    page.goto(f"{url}/ui/#/jobs")
    row = page.locator('tr[data-job="slow"]')
    row.locator('button[data-action="cancel"]').click()
    page.wait_for_selector('tr[data-job="slow"][data-status="cancelled"]', timeout=TIMEOUT)
    assert page.locator('tr[data-job="first"] .status').text_content() == "completed"
    page.screenshot(path=str(shots / "06-jobs.png"), full_page=True)

    # the same list at phone width
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(shots / "07-jobs-phone.png"), full_page=True)
    page.goto(f"{url}/ui/#/job/first")
    page.wait_for_selector('#job-status:text-is("completed")')
    page.screenshot(path=str(shots / "08-job-phone.png"), full_page=True)

    # delete the cancelled job; sign out clears the token
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/ui/#/jobs")
    page.locator('tr[data-job="slow"] button[data-action="delete"]').click()
    page.wait_for_selector('tr[data-job="slow"]', state="detached")
    page.click("#sign-out")
    page.wait_for_selector("#view-signin:not([hidden])")
    assert page.evaluate("window.sessionStorage.length") == 0

    assert outside == [], f"the console fetched {outside}"
    assert errors == []
    page.close()


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(service URL, its token) on a store with 250 completed import jobs (rows as a worker leaves
    them), then a batch job still running and a cancelled one whose last progress named its batch as
    running, then one real completed import job ``fresh`` (the newest)."""
    from test_service_job_list import add_jobs
    from test_service_offline import demo_samples

    from healthbench.results.simple_evals import write_allresults
    from healthbench.scoring.run_score import score_run
    from healthbench.store.jobs import JobStore
    from healthbench.store.runs import Store

    token = "hb_" + secrets.token_urlsafe(32)
    folder = tmp_path_factory.mktemp("crowded")
    db = str(folder / "s.db")
    store = Store(db)
    add_jobs(store, [f"old-{i:03d}" for i in range(250)])
    add_jobs(store, ["batching"], status="active", batch="judge")
    add_jobs(store, ["batch-cancelled"], status="cancelled", batch="judge")
    jobs = JobStore(store)
    for name in ("batching", "batch-cancelled"):
        record = jobs.get("default", name)
        assert record is not None
        jobs.set_details(record.id, {"progress": 40.0, "batches": "judge batch in_progress 120/500"})
    store.close()
    samples = demo_samples()
    text = write_allresults(folder / "x_allresults.json", samples, score_run(samples)).read_text("utf-8")
    with service_process(db, env={"HEALTHBENCH_BOOTSTRAP_TOKEN": token}) as service:
        headers = {"Authorization": f"Bearer {token}"}
        body = {"name": "fresh", "kind": "import", "dataset": "demo", "allresults_json": text}
        assert (
            httpx.post(f"{service.url}{API}", json=body, headers=headers, trust_env=False).status_code == 201
        )
        for _ in range(600):  # the worker imports it
            status = httpx.get(f"{service.url}{API}/fresh/status", headers=headers, trust_env=False).json()
            if status["status"] in ("completed", "error"):
                break
            time.sleep(0.1)
        assert status["status"] == "completed", status
        yield service.url, token


def test_console_reaches_every_one_of_252_jobs(crowded: tuple[str, str], context: Any, shots: Path) -> None:
    url, token = crowded
    page, outside, errors = _open(context, url)
    page.fill("#signin-token", token)
    page.press("#signin-token", "Enter")
    page.wait_for_selector('#jobs-table tbody tr[data-job="fresh"]')
    rows = page.locator("#jobs-table tbody tr")
    assert rows.count() == 50 and rows.first.get_attribute("data-job") == "fresh"  # the newest first
    assert page.locator("#jobs-count").text_content() == "Jobs 1–50 of 253, newest first."
    assert page.locator("#jobs-caption").text_content() == "Jobs 1–50 of 253, newest first"
    batch = page.locator('tr[data-job="batching"] td[data-label="batch"]')
    assert batch.text_content() == "judge batch in_progress 120/500"
    cancelled = page.locator('tr[data-job="batch-cancelled"] td[data-label="batch"]')
    assert cancelled.text_content() == "judge: cancelled"  # not "in_progress"
    assert page.locator('tr[data-job="fresh"] td[data-label="batch"]').text_content() == "online"
    assert page.locator("#jobs-prev").is_disabled()
    page.screenshot(path=str(shots / "10-jobs-253-first-page.png"), full_page=True)
    # older pages, to the oldest job
    for first, last in ((51, 100), (101, 150), (151, 200), (201, 250), (251, 253)):
        page.click("#jobs-next")  # each page shown before the next click (a click during a load may be lost)
        page.wait_for_selector(f"#jobs-count:has-text('Jobs {first}–{last} of 253')")
    assert page.locator("#jobs-table tbody tr").last.get_attribute("data-job") == "old-000"
    assert page.locator("#jobs-next").is_disabled()
    assert page.locator("#jobs-page").text_content() == "page 6 of 6"
    page.screenshot(path=str(shots / "11-jobs-253-last-page.png"), full_page=True)
    # find by name
    page.fill("#jobs-search", "OLD-00")
    page.press("#jobs-search", "Enter")
    page.wait_for_selector("#jobs-count:has-text('of 10 whose name holds')")
    names = page.locator("#jobs-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.job)")
    assert names == [f"old-{i:03d}" for i in range(9, -1, -1)]
    page.screenshot(path=str(shots / "12-jobs-search.png"), full_page=True)
    # the compare picker of the newest job offers every other completed job, the oldest included
    page.goto(f"{url}/ui/#/job/fresh")
    page.wait_for_selector("#c-count:not(:empty)")
    options = page.locator("#c-baseline option").evaluate_all("os => os.map(o => o.value)")
    assert len(options) == 250 and options[0] == "old-249" and options[-1] == "old-000"
    assert page.locator("#c-count").text_content() == "250 completed jobs, newest first"
    assert "batch online" in page.locator("#job-kind").text_content()
    page.screenshot(path=str(shots / "13-compare-picker.png"), full_page=True)
    page.goto(f"{url}/ui/#/job/batching")
    page.wait_for_selector('#job-status:text-is("active")')
    assert page.locator("#job-kind").text_content() == "· import · batch judge batch in_progress 120/500"
    page.screenshot(path=str(shots / "14-batch-job.png"), full_page=True)
    page.goto(f"{url}/ui/#/job/batch-cancelled")
    page.wait_for_selector('#job-status:text-is("cancelled")')
    assert page.locator("#job-kind").text_content() == "· import · batch judge: cancelled"
    assert outside == [], f"the console fetched {outside}"
    assert errors == []
    page.close()


def test_swagger_ui_renders_offline_under_its_csp(
    servers: tuple[str, str, str], context: Any, shots: Path
) -> None:
    """/docs draws the API from the service's own files: every request outside it is refused here,
    and no script or style is refused by the page's policy (those are console errors)."""
    url, _, _ = servers
    page, outside, errors = _guarded_page(context, url)
    page.goto(f"{url}/docs")
    page.wait_for_selector(".swagger-ui .info .title:has-text('healthbench job service')", timeout=TIMEOUT)
    page.wait_for_selector(".opblock-summary-path:has-text('/benchmark-jobs')", timeout=TIMEOUT)
    page.screenshot(path=str(shots / "15-docs-offline.png"))
    assert outside == [] and errors == [], (outside, errors)
    page.close()
