"""The cost-vs-F1 chart's labels (docs/meta_eval.md): points at nearly the same (cost, F1) get labels
that do not overlap, each inside the frame and linked to its point (beside it, or by a thin leader line
when it had to move); a chart whose labels do not collide is drawn as before. The boxes are
`label_box`'s, the layout the rendered SVG is drawn from; in headless Chromium the drawn texts'
own boxes are checked too (screenshot where tests/test_console_browser.py puts them)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support.browser import CHROMIUM, NO_CHROMIUM

from healthbench.analysis.report import build_report
from healthbench.analysis.report_judges import (
    CHART_HEIGHT,
    CHART_WIDTH,
    LABEL_BOTTOM,
    LABEL_GAP,
    LABEL_OFFSET,
    PLOT_BOTTOM,
    PLOT_RIGHT,
    UNPRICED_X,
    cost_f1_chart,
    label_box,
)

Box = tuple[float, float, float, float]
MEMBERS = ["openai/gpt-4.1", "openai/gpt-4.1-mini", "anthropic/claude-sonnet-4", "judge-d"]
RULES = ["panel:majority", "panel:unanimous", "panel:any", "panel:calibrated"]


def _row(name: str, f1: float | None, dollars: float | None) -> dict[str, Any]:
    kind = "panel" if name.startswith("panel:") else "member"
    figures = {"f1_pos": f1, "f1_neg": f1, "n_pairs": 100, "graded_rows": 50, "ungraded_rows": 0}
    return {"name": name, "kind": kind, "f1_balanced": f1, "dollars_per_1000_criteria": dollars, **figures}


def _crowded() -> list[dict[str, Any]]:
    """Four members and four rules within 0.002 of F1 0.71 and $0.01 of $2 per 1,000 criteria."""
    names = [*MEMBERS, *RULES]
    return [_row(name, 0.71 + 0.0003 * i, 2.0 + 0.001 * i) for i, name in enumerate(names)]


def _overlapping(boxes: Sequence[Box]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2)
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


def _check_layout(chart: dict[str, Any]) -> None:
    """No two label boxes overlap; each is inside the frame; each label is beside its point or has a
    leader line from the point's centre to the middle of the label's near end."""
    points = chart["points"]
    boxes = [label_box(p) for p in points]
    assert _overlapping(boxes) == []
    for point, (left, top, right, bottom) in zip(points, boxes, strict=True):
        assert left >= 0 and right <= chart["width"] and top >= 0 and bottom <= chart["height"]
        side = 1 if point["anchor"] == "start" else -1
        assert point["lx"] == point["x"] + side * LABEL_OFFSET
        if point["leader"] is None:
            assert point["ly"] == point["y"] + 4
        else:
            near = left if point["anchor"] == "start" else right
            assert point["leader"] == {"x": near - 2 * side, "y": point["ly"] - 4}
            assert top < point["leader"]["y"] < bottom


def test_labels_of_nearly_equal_points_do_not_overlap_and_keep_their_points_order() -> None:
    rows = _crowded()
    chart = cost_f1_chart(rows)
    points = chart["points"]
    assert [p["name"] for p in points] == [r["name"] for r in rows]
    # the eight points are within 4 units of each other: as placed before, every label hit another
    assert max(p["y"] for p in points) - min(p["y"] for p in points) < 4
    assert max(p["x"] for p in points) - min(p["x"] for p in points) < 4
    _check_layout(chart)
    # one label stays beside its point (the top one), each other one moved and has a leader line;
    # the labels are stacked a line apart, in the order of their points from the top down
    by_height = sorted(points, key=lambda p: p["y"])
    assert by_height[0]["leader"] is None and all(p["leader"] is not None for p in by_height[1:])
    assert [p["ly"] for p in by_height] == [by_height[0]["ly"] + LABEL_GAP * i for i in range(len(points))]
    assert chart["width"] == CHART_WIDTH and chart["height"] == CHART_HEIGHT


def test_a_crowd_at_the_bottom_of_the_plot_is_stacked_upwards_inside_the_frame() -> None:
    rows = [_row(f"judge-{i}", 0.7 + 0.0001 * i, 1.0) for i in range(10)] + [_row("top", 0.9, 1.0)]
    chart = cost_f1_chart(rows)
    _check_layout(chart)
    crowd = [p for p in chart["points"] if p["name"] != "top"]
    # ten lines below a point 70 units above the plot's bottom would reach past it: the stack ends there
    assert PLOT_BOTTOM - crowd[0]["y"] < 10 * LABEL_GAP
    assert max(label_box(p)[3] for p in crowd) == LABEL_BOTTOM
    assert sorted(p["ly"] for p in crowd) == [LABEL_BOTTOM - 3 - LABEL_GAP * i for i in range(9, -1, -1)]
    (top,) = (p for p in chart["points"] if p["name"] == "top")
    assert top["leader"] is None  # far away: untouched


def test_more_labels_at_one_place_than_the_plot_holds_make_the_frame_taller() -> None:
    chart = cost_f1_chart([_row(f"judge-{i:02}", 0.5, 1.0) for i in range(30)])
    _check_layout(chart)
    assert chart["height"] > CHART_HEIGHT
    assert max(label_box(p)[3] for p in chart["points"]) + 4 == chart["height"]


def test_labels_left_and_right_of_nearly_equal_points_do_not_overlap() -> None:
    """A priced point near the right end of the axis is labelled left of it; an unpriced one in the
    strip right of it; and two labels either side of two points close together."""
    rows = [
        _row("judge-right-end", 0.7, 9.9),
        _row("judge-unpriced-a", 0.7, None),
        _row("judge-unpriced-b", 0.7001, None),
        _row("judge-just-left", 0.7002, 9.0),
    ]
    chart = cost_f1_chart(rows)
    _check_layout(chart)
    anchors = {p["name"]: p["anchor"] for p in chart["points"]}
    assert anchors == {
        "judge-right-end": "end",
        "judge-unpriced-a": "start",
        "judge-unpriced-b": "start",
        "judge-just-left": "end",
    }
    x = {p["name"]: p["x"] for p in chart["points"]}
    assert x["judge-unpriced-a"] == UNPRICED_X and x["judge-right-end"] > PLOT_RIGHT - 110


def test_charts_without_colliding_labels_are_as_before() -> None:
    """One point; and points far enough apart: each label beside its point, no leader line, the frame
    of before."""
    (point,) = cost_f1_chart([_row("judge-a", 0.7, 2.0)])["points"]
    # (alone, a priced point is at the right end of the dollar axis: labelled left of it)
    assert (point["lx"], point["ly"], point["anchor"], point["leader"]) == (
        point["x"] - 9,
        point["y"] + 4,
        "end",
        None,
    )
    chart = cost_f1_chart([_row("a", 0.6, 1.0), _row("b", 0.8, 1.0), _row("panel:any", 0.7, 3.0)])
    assert [p["leader"] for p in chart["points"]] == [None, None, None]
    assert [p["ly"] - p["y"] for p in chart["points"]] == [4, 4, 4]
    assert chart["width"] == CHART_WIDTH and chart["height"] == CHART_HEIGHT


class _Svg(HTMLParser):
    """The chart's points as drawn: each ``g.point``'s name, marker centre, text and leader line."""

    def __init__(self) -> None:
        super().__init__()
        self.points: list[dict[str, Any]] = []
        self.in_text = False
        self.viewbox: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and "cost-f1" in (a.get("aria-labelledby") or ""):
            self.viewbox = a["viewbox"]
        if tag == "g" and "point" in a.get("class", "").split():
            self.points.append({"name": a["data-name"], "leader": None})
        elif self.points and tag == "line" and a.get("class") == "leader":
            self.points[-1]["leader"] = tuple(float(a[k]) for k in ("x1", "y1", "x2", "y2"))
        elif self.points and tag == "circle":
            self.points[-1]["centre"] = (float(a["cx"]), float(a["cy"]))
        elif self.points and tag == "text":
            self.points[-1]["text"] = (float(a["x"]), float(a["y"]), a["text-anchor"])
            self.in_text = True

    def handle_endtag(self, tag: str) -> None:
        self.in_text = self.in_text and tag != "text"

    def handle_data(self, data: str) -> None:
        if self.in_text:
            self.points[-1]["label"] = self.points[-1].get("label", "") + data


def _report(rows: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    chart = cost_f1_chart(rows)
    choice = {
        "name": "meta",
        "rule": "majority",
        "calibration": None,
        "rows": rows,
        "entries": [],
        "themes": [],
        "chart": chart,
    }
    return build_report([], judge_choices=[choice], title="labels").html(), chart


def test_the_rendered_svg_draws_the_layout_each_label_in_its_points_group() -> None:
    rows = [_row(name, 0.71 + 0.0003 * i, 2.0 + 0.001 * i) for i, name in enumerate(MEMBERS)]
    html, chart = _report(rows)
    svg = _Svg()
    svg.feed(html)
    assert svg.viewbox == f"0 0 {chart['width']} {chart['height']}"
    assert [p["name"] for p in svg.points] == MEMBERS
    for drawn, point in zip(svg.points, chart["points"], strict=True):
        assert drawn["label"] == point["name"]
        assert drawn["centre"] == (point["x"], point["y"])
        assert drawn["text"] == (point["lx"], point["ly"], point["anchor"])
        leader = point["leader"]
        expected = None if leader is None else (point["x"], point["y"], leader["x"], leader["y"])
        assert drawn["leader"] == expected
    assert sum(p["leader"] is not None for p in svg.points) == len(MEMBERS) - 1


def test_in_chromium_the_drawn_labels_do_not_overlap(tmp_path: Path) -> None:
    """The browser's own text boxes (getBBox) of the crowded chart: none overlaps another, each is
    inside the chart's frame and no wider than `label_box` assumed."""
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    from support.browser import chromium_context
    from test_console_browser import DEFAULT_SCREENSHOTS, SCREENSHOTS_ENV

    html, chart = _report(_crowded())
    page_path = tmp_path / "report.html"
    page_path.write_text(html, encoding="utf-8")
    shots = Path(os.environ.get(SCREENSHOTS_ENV) or DEFAULT_SCREENSHOTS)
    shots.mkdir(parents=True, exist_ok=True)
    with chromium_context(tmp_path / "chromium", viewport={"width": 1100, "height": 900}) as context:
        page = context.new_page()
        page.goto(page_path.as_uri())
        figure = page.locator("figure.cost-f1")
        figure.scroll_into_view_if_needed()
        drawn = page.evaluate(
            "() => [...document.querySelectorAll('figure.cost-f1 g.point text')].map(t => {"
            " const b = t.getBBox(); return [t.textContent, b.x, b.y, b.x + b.width, b.y + b.height]; })"
        )
        figure.screenshot(path=str(shots / "22-cost-f1-crowded-labels.png"))
        page.close()
    assert [d[0] for d in drawn] == [p["name"] for p in chart["points"]]
    boxes = [tuple(d[1:]) for d in drawn]
    assert _overlapping(boxes) == []
    for (left, top, right, bottom), point in zip(boxes, chart["points"], strict=True):
        assumed = label_box(point)
        assert assumed[0] <= left + 1 and right <= assumed[2]  # within the assumed box (a glyph's
        assert assumed[1] <= top and bottom <= assumed[3]  # side bearing may start it 1 unit left)
        assert top >= 0 and bottom <= chart["height"] and right <= chart["width"]
