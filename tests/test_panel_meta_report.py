"""The report's "Which judge to pay for" of a stored meta-eval run of several judges (docs/meta_eval.md):
`healthbench report META_RUN` (alone or beside an eval run) shows each member's and each panel rule's
F1 (balanced, met, not met), dollars per 1,000 criteria and n, exactly `panel_meta_results`' figures, by
theme beside the physicians' agreement, and a cost-vs-F1 chart with one point per member and rule (an
unpriced one drawn off the dollar axis and named). The console's page of a meta-eval job is that report,
its figures the job's metrics (headless Chromium; screenshots where tests/test_console_browser.py puts
them)."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from panel_meta_runs import stored_panel_meta, write_rows
from support.browser import CHROMIUM, NO_CHROMIUM
from test_panel_meta_results import CACHED, COSTS, PANEL, ROWS
from test_panel_results import MEMBERS, _write_run
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.results.panel_meta_results import judges_table, score_panel_meta_run, theme_table
from healthbench.store.runs import Store

runner = CliRunner()
RULES = ["panel:majority", "panel:unanimous", "panel:any", "panel:calibrated"]


class Elements(HTMLParser):
    """Every element's tag, attributes and own text (enough to read the section's tables and points)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, Any]] = []
        self.open: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [n["tag"] for n in self.open]}
        self.found.append(node)
        if tag not in ("circle", "rect", "line", "meta", "wbr", "br", "input"):
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()["tag"] != tag:
            pass

    def handle_data(self, data: str) -> None:
        for node in self.open:
            node["text"] += data


def _elements(html: str) -> list[dict[str, Any]]:
    parser = Elements()
    parser.feed(html)
    return parser.found


def _number(text: str | None) -> float | None:
    return None if text in (None, "None") else float(text)  # (jinja writes a float as repr: exact)


def _cells(found: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells (``td``) of ``row``."""
    at = found.index(row) + 1
    end = next((i for i in range(at, len(found)) if found[i]["tag"] == "tr"), len(found))
    return [n for n in found[at:end] if n["tag"] == "td"]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store with the meta-eval run ``meta`` of three judges (judge-c and so every rule unpriced) and
    the eval run ``panel`` of a panel."""
    folder = tmp_path_factory.mktemp("panel-meta-report")
    store = Store(folder / "s.db")
    stored_panel_meta(store, write_rows(folder / "m.jsonl", ROWS), PANEL, costs=COSTS, cached=CACHED)
    _write_run(store, "panel", MEMBERS)
    store.close()
    yield folder / "s.db"


def _report(store: Path, out: Path, *names: str) -> str:
    result = runner.invoke(
        app, ["report", *names, "-o", str(out), "--store", str(store), "--n-resamples", "20"]
    )
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_the_section_shows_each_member_and_rule_as_panel_meta_results_measures_them(
    stored: Path, tmp_path: Path
) -> None:
    html = _report(stored, tmp_path / "r.html", "meta")
    store = Store(stored, create=False)
    measured = score_panel_meta_run(store, store.require_run("meta"))
    expected = judges_table(measured)
    assert [row["name"] for row in expected] == [*PANEL, *RULES]
    found = _elements(html)
    rows = [n for n in found if n["tag"] == "tr" and "data-kind" in n["attrs"]]
    assert [r["attrs"]["data-name"] for r in rows] == [row["name"] for row in expected]
    for row, want in zip(rows, expected, strict=True):
        shown = [cell["text"].strip() for cell in _cells(found, row)]
        assert shown[:3] == [f"{want[k]:.3f}" for k in ("f1_balanced", "f1_pos", "f1_neg")]
        dollars = want["dollars_per_1000_criteria"]
        assert shown[3] == ("–" if dollars is None else f"{dollars:.4f}")
        assert shown[4] == f"{want['n_pairs']:,}"
    values = {
        r["attrs"]["data-name"]: [_number(c["attrs"]["data-value"]) for c in _cells(found, r)[:4]]
        for r in rows
    }
    for want in expected:  # exact, not rounded
        figures = [want["f1_balanced"], want["f1_pos"], want["f1_neg"], want["dollars_per_1000_criteria"]]
        assert values[want["name"]] == figures
    assert values["judge-a"][3] == 2.0 and values["judge-c"][3] is None  # judge-c has an unpriced grade
    # the chart: one point per member and rule, at its exact F1 and cost; unpriced ones off the axis, named
    points = [n for n in found if n["tag"] == "g" and "point" in n["attrs"].get("class", "").split()]
    assert [p["attrs"]["data-name"] for p in points] == [row["name"] for row in expected]
    for point, want in zip(points, expected, strict=True):
        assert _number(point["attrs"]["data-f1"]) == want["f1_balanced"]
        assert _number(point["attrs"]["data-dollars"]) == want["dollars_per_1000_criteria"]
        kind = "member" if want["kind"] == "member" else "panel"
        assert f"point-{kind}" in point["attrs"]["class"]
    marks = {n["attrs"].get("cx") for n in found if n["tag"] == "circle"}
    assert len(marks) == 3  # judge-a and judge-b on the axis, judge-c in the "no price" strip
    caption = next(n["text"] for n in found if n["tag"] == "figcaption")
    assert "with no price: judge-c, panel:majority, panel:unanimous, panel:any, panel:calibrated" in caption
    # the cheaper judge is left of the dearer one; the higher F1 is higher up
    where = {
        n["attrs"]["data-name"]: next(c for c in found[found.index(n) :] if c["tag"] == "circle")["attrs"]
        for n in points[:2]
    }
    assert float(where["judge-b"]["cx"]) < float(where["judge-a"]["cx"])
    higher = "judge-a" if values["judge-a"][0] > values["judge-b"][0] else "judge-b"
    lower = "judge-b" if higher == "judge-a" else "judge-a"
    assert float(where[higher]["cy"]) < float(where[lower]["cy"])
    # by theme: every entry beside the physicians, the figures of `theme_table`
    for scope in theme_table(measured):
        line = next(n for n in found if n["tag"] == "tr" and n["attrs"].get("data-scope") == scope["scope"])
        shown = [_number(c["attrs"]["data-value"]) for c in _cells(found, line)]
        assert shown == [scope["physicians"], *(scope[row["name"]] for row in expected)]
    assert "panel:calibrated is cross-fitted" in html
    assert 'id="headline"' not in html and 'id="browser"' not in html  # no eval run: no eval sections


def test_a_report_of_an_eval_run_and_a_meta_eval_run_has_both(stored: Path, tmp_path: Path) -> None:
    html = _report(stored, tmp_path / "both.html", "panel", "meta")
    assert 'id="headline"' in html and 'id="judges"' in html and 'id="judge-choice"' in html
    assert html.count('class="judge-choice"') == 1 and 'href="#judge-choice"' in html
    single = _report(stored, tmp_path / "eval.html", "panel")
    assert 'id="judge-choice"' not in single


# ---------------------------------------------------------------- the console (headless Chromium)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(service URL, its token, the meta-eval job's metrics as the service computes them)."""
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    from support.service_process import service_process

    from healthbench.store.jobs import JobStore

    token = "hb_" + secrets.token_urlsafe(32)
    folder = tmp_path_factory.mktemp("panel-meta-console")
    store = Store(folder / "s.db")
    path = write_rows(folder / "m.jsonl", ROWS)
    stored_panel_meta(store, path, PANEL, costs=COSTS, cached=CACHED, name="default/meta")
    job_id = f"{time.time_ns():020d}{uuid.uuid4().hex[:12]}"
    JobStore(store).create(job_id, "default", "meta", {"kind": "meta-eval"}, "default/meta")
    JobStore(store).set_status(job_id, "completed")
    store.close()
    with service_process(str(folder / "s.db"), env={"HEALTHBENCH_BOOTSTRAP_TOKEN": token}) as running:
        import httpx
        from test_console_browser import API

        api = f"{running.url}{API}/meta/results/metrics/download"
        metrics = httpx.get(api, headers={"Authorization": f"Bearer {token}"}, trust_env=False).json()
        yield running.url, token, metrics


def test_the_consoles_page_of_a_meta_eval_job_shows_which_judge_to_pay_for(
    service: tuple[str, str, dict[str, Any]], tmp_path: Path
) -> None:
    from support.browser import chromium_context
    from test_console_browser import DEFAULT_SCREENSHOTS, SCREENSHOTS_ENV, _open

    shots = Path(os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)
    shots.mkdir(parents=True, exist_ok=True)
    url, token, metrics = service
    assert metrics["panel_rule"] == "majority"
    with chromium_context(tmp_path / "chromium", viewport={"width": 1280, "height": 1400}) as context:
        page, outside, errors = _open(context, url)
        page.fill("#signin-token", token)
        page.press("#signin-token", "Enter")
        page.wait_for_selector('#jobs-table tbody tr[data-job="meta"]')
        page.goto(f"{url}/ui/#/job/meta")
        link = page.locator("#job-report-link")
        link.wait_for(state="visible")
        assert link.text_content() == "Which judge to pay for"
        assert page.locator("#compare-form").is_hidden()  # (a meta-eval job is not compared)
        link.click()
        frame = page.frame_locator("#page-frame")
        frame.locator('body[data-ready="true"]').wait_for(state="attached")
        rows = frame.locator(".judge-choice-table tbody tr")
        names = [*PANEL, *RULES]
        assert rows.locator("th").all_text_contents() == names
        for name in names:
            key = f"judge:{name}:" if name in PANEL else f"{name}:"
            cells = frame.locator(f'.judge-choice-table tr[data-name="{name}"] td')
            shown = [
                float(v) if v != "None" else None
                for v in (c.get_attribute("data-value") for c in cells.all()[:4])
            ]
            want = [metrics[f"{key}pairwise_model_f1_{k}"] for k in ("balanced", "pos", "neg")]
            assert shown == [*want, metrics[f"{key}dollars_per_1000_criteria"]]
            assert cells.nth(0).text_content() == f"{want[0]:.3f}"
        points = frame.locator(".cost-f1 g.point")
        assert points.count() == len(names)
        assert [float(p.get_attribute("data-f1")) for p in points.all()] == [
            metrics[
                f"judge:{n}:pairwise_model_f1_balanced" if n in PANEL else f"{n}:pairwise_model_f1_balanced"
            ]
            for n in names
        ]
        frame.locator("#judge-choice").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "21-meta-eval-judge-choice.png"))
        frame.locator("#judge-choice").screenshot(path=str(shots / "21-meta-eval-judge-choice-section.png"))
        assert outside == [] and errors == []
        page.close()


def test_a_single_judges_meta_eval_shows_its_one_row_and_point(tmp_path: Path) -> None:
    store = Store(tmp_path / "one.db")
    one = {"judge-a": PANEL["judge-a"]}
    stored_panel_meta(store, write_rows(tmp_path / "m.jsonl", ROWS), one, costs=COSTS)
    store.close()
    found = _elements(_report(tmp_path / "one.db", tmp_path / "one.html", "meta"))
    rows = [n for n in found if n["tag"] == "tr" and "data-kind" in n["attrs"]]
    assert [r["attrs"]["data-name"] for r in rows] == ["judge-a"]
    assert [c["text"].strip() for c in _cells(found, rows[0])][3] == "2.0000"
    points = [n for n in found if n["tag"] == "g" and "point" in n["attrs"].get("class", "").split()]
    assert [p["attrs"]["data-name"] for p in points] == ["judge-a"]
    assert not any("cross-fitted" in n["text"] for n in found if n["tag"] == "p")  # no rule to calibrate


def test_a_point_without_an_f1_or_a_price_is_named_not_dropped() -> None:
    from healthbench.analysis.report_judges import cost_f1_chart

    rows = [
        {"name": "a", "kind": "member", "f1_balanced": 0.7, "dollars_per_1000_criteria": 3.0},
        {"name": "b", "kind": "member", "f1_balanced": 0.6, "dollars_per_1000_criteria": None},
        {"name": "c", "kind": "member", "f1_balanced": None, "dollars_per_1000_criteria": 1.0},
    ]
    chart = cost_f1_chart(rows, physicians=0.65)
    assert [p["name"] for p in chart["points"]] == ["a", "b"]
    assert chart["unpriced"] == ["b"] and chart["unplotted"] == ["c"]
    by_name = {p["name"]: p for p in chart["points"]}
    assert by_name["b"]["x"] > chart["plot"]["right"] >= by_name["a"]["x"]  # off the dollar axis
    assert chart["x_ticks"][-1]["value"] >= 3.0 and chart["x_ticks"][0]["value"] == 0
    assert by_name["a"]["y"] < chart["physicians"]["y"] < by_name["b"]["y"]  # up is a higher F1


def test_the_frame_holds_a_long_unpriced_judges_label_in_full() -> None:
    from healthbench.analysis.report_judges import CHART_WIDTH, LABEL_CHAR_WIDTH, cost_f1_chart

    name = "openai-compatible/a-judge-with-a-long-name"
    rows = [{"name": name, "kind": "member", "f1_balanced": 0.7, "dollars_per_1000_criteria": None}]
    chart = cost_f1_chart(rows)
    (point,) = chart["points"]
    assert point["anchor"] == "start"
    assert chart["width"] >= point["lx"] + LABEL_CHAR_WIDTH * len(name) > CHART_WIDTH
    assert cost_f1_chart([{**rows[0], "name": "a"}])["width"] == CHART_WIDTH  # short names: as before
