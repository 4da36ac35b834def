"""The HTML report as a person sees it: headless Chromium (Debian's, driven by Playwright), offline.

Checks that the charts draw, that the page's numbers are `score_run`'s, that the conversation filters
and the conversation view work, that hostile text stays text, and that nothing is fetched from the
network. The screenshot is kept in the test's tmp dir and copied to /tmp/healthbench-report.png.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_fixtures import AXES, THEMES, comparison_of, two_runs
from support.browser import CHROMIUM, NO_CHROMIUM, chromium_context

from healthbench.analysis.report import build_report
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import ScoringOptions, score_run

OPTIONS = ScoringOptions(n_resamples=200, seed=5)
N = 60
SCREENSHOT_COPY = Path("/tmp/healthbench-report.png")

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
if CHROMIUM is None:
    pytest.skip(NO_CHROMIUM, allow_module_level=True)


@pytest.fixture(scope="module")
def runs() -> list[Any]:
    return two_runs(N)


@pytest.fixture(scope="module")
def report_file(runs: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_report(
        runs, options=OPTIONS, title="Report under test", comparison=comparison_of(runs)
    ).write(tmp_path_factory.mktemp("report") / "report.html")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with chromium_context(profile, viewport={"width": 1280, "height": 900}) as context:
        yield context


@pytest.fixture
def page(browser: Any, report_file: Path) -> Iterator[Any]:
    """The report opened from disk; every request other than file: and data: is refused and recorded."""
    page = browser.new_page()
    outside: list[str] = []
    errors: list[str] = []

    def route(route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(report_file.as_uri())
    page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
    yield page
    assert page.evaluate("document.body.dataset.ready") == "true"
    assert outside == [], f"the report fetched {outside}"
    assert errors == []
    page.close()


def test_charts_draw_one_bar_per_run_and_key(page: Any) -> None:
    assert page.locator("#chart-themes rect.bar").count() == len(THEMES) * 2
    assert page.locator("#chart-themes path.err").count() == len(THEMES) * 2
    assert page.locator("#chart-axes rect.bar").count() == len(AXES) * 2
    assert page.locator("#chart-distribution rect.hbar").count() == 11 * 2


def test_the_worst_at_k_curve_draws_one_line_per_model(page: Any) -> None:
    assert page.locator("#chart-worst polyline.curve").count() == 2  # one answer each: k = 1 only
    assert page.locator("#chart-worst polyline.curve").first.get_attribute("data-model") == "model-a"
    assert page.locator("#table-worst tbody tr").count() == 2


def test_numbers_on_the_page_are_the_librarys(page: Any, runs: list[Any]) -> None:
    for index, run in enumerate(runs):
        expected = score_run(run.samples, OPTIONS)
        overall = expected.stats[OVERALL]
        card = page.locator(f'.card[data-run="{index}"]')
        assert card.locator(".big").text_content() == f"{overall.mean:.3f}"
        assert float(card.locator(".big").get_attribute("data-value")) == overall.mean
        assert card.locator("[data-lo]").text_content() == f"{overall.ci_lower:.3f}"
        assert card.locator("[data-hi]").text_content() == f"{overall.ci_upper:.3f}"
        for theme in THEMES:
            bar = page.locator(f'#chart-themes rect.bar[data-run="{index}"][data-key="{theme}"]')
            assert float(bar.get_attribute("data-mean")) == expected.stats[f"theme:{theme}"].mean
        counts = page.locator("#table-distribution tbody tr").all_text_contents()
        assert len(counts) == 11
    usage = page.locator("#table-usage tbody tr").first.locator("td").all_text_contents()
    assert usage[:4] == [str(N), str(N - 1), "1", "1"]  # conversations, graded, ungraded, criteria


def _row_ids(page: Any) -> list[str]:
    return [r.get_attribute("data-id") for r in page.locator(".conv-row").all()]


def test_rows_render_lazily_and_filters_work(page: Any, runs: list[Any]) -> None:
    status = page.locator("#browser-status")
    assert status.text_content() == f"Showing {N} of {N} conversations"
    assert 0 < page.locator(".conv-row").count() < N  # only the visible rows exist

    page.select_option("#f-theme", "hedging")
    hedging = [s.conversation.prompt_id for s in runs[0].samples if "hedging" in s.conversation.themes]
    assert status.text_content() == f"Showing {len(hedging)} of {N} conversations"
    assert set(_row_ids(page)) <= set(hedging)

    page.select_option("#f-theme", "")
    page.fill("#f-min", "0.5")
    per_sample = score_run(runs[1].samples, OPTIONS).per_sample
    high = [m for m in per_sample if m is not None and m[OVERALL] >= 0.5]
    page.select_option("#f-run", "1")
    assert status.text_content() == f"Showing {len(high)} of {N} conversations"
    page.select_option("#f-sort", "asc")
    first = page.locator(".conv-row").first.get_attribute("data-id")
    lowest = min(
        (m[OVERALL], s.conversation.prompt_id)
        for s, m in zip(runs[1].samples, per_sample, strict=True)
        if m is not None and m[OVERALL] >= 0.5
    )
    assert first == lowest[1]

    page.fill("#f-min", "")
    page.check("#f-ungraded")
    assert _row_ids(page) == ["conv-002"]


def test_opening_a_conversation_shows_criteria_and_keeps_text_as_text(
    page: Any, runs: list[Any], tmp_path: Path
) -> None:
    page.locator('.conv-row[data-id="conv-001"]').click()
    detail = page.locator("#conv-detail")
    assert detail.locator("h3").text_content() == "Conversation conv-001"
    assert "Question 1: what should I do about symptom 1?" in detail.text_content()
    rows = detail.locator("tr.criterion")
    assert rows.count() == 4
    sample = runs[0].samples[1]
    expected_verdicts = ["met" if v.criteria_met else "not_met" for v in sample.verdicts]
    assert [r.get_attribute("data-verdict") for r in rows.all()] == expected_verdicts
    assert rows.nth(2).locator(".explanation").text_content() == sample.explanations[2]
    assert rows.nth(0).locator(".points").text_content() == str(sample.conversation.rubrics[0].points)
    answer = detail.locator(".answer .text").text_content()
    assert answer == sample.completion  # the <script> is shown, not run
    assert page.evaluate("window.__pwned") is None
    assert detail.locator("script, img").count() == 0

    detail.locator('[role="tab"]').nth(1).click()
    assert detail.locator(".answer .text").text_content() == runs[1].samples[1].completion

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    shutil.copyfile(shot, SCREENSHOT_COPY)


def test_sorting_by_change_and_linking_a_conversation(page: Any, runs: list[Any], report_file: Path) -> None:
    a, b = (score_run(r.samples, OPTIONS).per_sample for r in runs)
    gains = sorted(
        (-(mb[OVERALL] - ma[OVERALL]), s.conversation.prompt_id)
        for s, ma, mb in zip(runs[0].samples, a, b, strict=True)
        if ma is not None and mb is not None
    )
    page.select_option("#f-run", "1")
    page.select_option("#f-sort", "gain")
    assert _row_ids(page)[:3] == [pid for _, pid in gains[:3]]

    page.goto(report_file.as_uri() + "#conversation=conv-007")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    assert page.locator("#conv-detail h3").text_content() == "Conversation conv-007"


def test_a_flipped_conversation_link_opens_it(page: Any, runs: list[Any]) -> None:
    comparison = comparison_of(runs)
    rows = page.locator("#table-comparison tbody tr")
    assert rows.count() == len(comparison.rows)
    assert float(rows.first.locator("[data-value]").get_attribute("data-value")) == (
        comparison.overall.result.difference
    )
    assert page.locator("#comparison-verdict").text_content() == comparison.verdict
    flip = comparison.flips[0]
    page.locator(f'#flips a[href="#conversation={flip.prompt_id}"]').click()
    assert page.locator("#conv-detail h3").text_content() == f"Conversation {flip.prompt_id}"


def test_a_report_without_conversations_draws_its_charts(
    browser: Any, runs: list[Any], tmp_path: Path
) -> None:
    path = build_report(runs, options=OPTIONS, comparison=comparison_of(runs), conversations=False).write(
        tmp_path / "small.html"
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(path.as_uri())
    page.wait_for_selector('body[data-ready="true"]', state="attached")
    assert page.locator("#chart-axes rect.bar").count() == len(AXES) * 2
    assert page.locator(".conv-row, #flips a").count() == 0
    assert "--no-conversations" in page.locator("#browser").text_content()
    assert errors == []
    page.close()


def test_chart_rows_show_n_and_mark_small_or_missing_rows(browser: Any, tmp_path: Path) -> None:
    """Every bar's label gives its n; rows with n < 10 are drawn hollow with a dashed interval; a run
    without a theme row says "not in this run" in the chart."""
    from report_fixtures import repeated_and_partial_runs

    path = build_report(repeated_and_partial_runs(), options=OPTIONS, conversations=False).write(
        tmp_path / "small.html"
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(path.as_uri())
    page.wait_for_selector('body[data-ready="true"]', state="attached")
    bars = page.locator("#chart-themes rect.bar")
    assert bars.count() == len(THEMES) + len(THEMES) - 1  # B lacks one theme
    assert page.locator("#chart-themes rect.bar.uncertain").count() == bars.count()  # all n < 10
    assert (
        page.locator("#chart-themes path.err.uncertain").count()
        == page.locator("#chart-themes path.err").count()
    )
    labels = page.locator("#chart-themes text.value").all_text_contents()
    assert len(labels) == bars.count() and all(re.search(r"n=\d+ †$", t) for t in labels), labels
    missing = page.locator("#chart-themes text.missing")
    assert missing.count() == 1 and missing.text_content() == "not in this run"
    assert missing.get_attribute("data-key") == THEMES[2] and missing.get_attribute("data-run") == "1"
    assert (
        page.locator("#chart-axes rect.bar.uncertain").count() < page.locator("#chart-axes rect.bar").count()
    )
    assert errors == []
    page.close()
