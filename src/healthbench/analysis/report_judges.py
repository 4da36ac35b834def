"""The report's "Judges" section of a run graded by a panel of judges (docs/panels.md, docs/report.md),
as plain JSON-able data: each member's own scores, how much the members agree (``judge_agreement``,
Fleiss' kappa, pairwise Cohen's kappa) and where they disagree most: by theme, by axis, and the
criteria with the most split votes. Pure: the members' samples in, figures out (`scoring.panel`).

And the "Which judge to pay for" section of a stored meta-eval run of several judges (docs/meta_eval.md):
each member's and each panel rule's agreement with physicians and dollars per 1,000 criteria, by theme,
and on a cost-vs-F1 chart, all from `healthbench.results.panel_meta_results` (`stored_meta_evals` is the
one part that reads the store, through it)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from healthbench.analysis.report_data import stat_entry
from healthbench.data.shapes import themes_of
from healthbench.results.panel_meta_results import (
    DOLLARS_KEY,
    PanelMetaRun,
    judges_table,
    stored_panel_meta_run,
    theme_table,
)
from healthbench.scoring.panel import agreement, fleiss_kappa, pairwise_cohen_kappa
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run
from healthbench.scoring.verdict import Verdict

if TYPE_CHECKING:
    from healthbench.store.runs import RunRecord, Store

MAX_SPLITS_SHOWN = 200  # the criteria with the most split votes listed in the report
_CODES = {Verdict.MET: "m", Verdict.NOT_MET: "n", Verdict.UNGRADED: "u"}


def judges_summary(
    samples: Sequence[GradedSample],
    members: Sequence[Mapping[str, GradedSample]],
    *,
    rule: str,
    options: ScoringOptions | None = None,
) -> dict[str, Any]:
    """The section's data: ``samples`` are the panel's (its verdicts by ``rule``), ``members[i]`` the
    members' own samples of ``samples[i]`` (by label, the chair first)."""
    labels = list(members[0]) if members else []
    votes: list[tuple[Verdict, ...]] = []
    themes: dict[str, list[tuple[Verdict, ...]]] = defaultdict(list)
    axes: dict[str, list[tuple[Verdict, ...]]] = defaultdict(list)
    splits: list[dict[str, Any]] = []
    for sample, own in zip(samples, members, strict=True):
        conversation = sample.conversation
        for index, item in enumerate(conversation.rubrics):
            criterion = tuple(own[label].verdicts[index] for label in labels)
            votes.append(criterion)
            for theme in themes_of(conversation.example_tags):
                themes[theme].append(criterion)
            for tag in item.tags:
                if tag.startswith("axis:"):
                    axes[tag[5:]].append(criterion)
            met, not_met = criterion.count(Verdict.MET), criterion.count(Verdict.NOT_MET)
            if met and not_met:
                splits.append(
                    {
                        "id": conversation.prompt_id,
                        "r": sample.repeat,
                        "criterion": item.criterion,
                        "points": item.points,
                        "votes": "".join(_CODES[v] for v in criterion),
                        "panel": _CODES[sample.verdicts[index]],
                        "minority": min(met, not_met),
                    }
                )
    splits.sort(key=lambda s: (-s["minority"], -abs(s["points"]), s["id"], s["r"]))
    kappas = pairwise_cohen_kappa(labels, votes)
    return {
        "rule": rule,
        "members": [_member(label, [own[label] for own in members], options) for label in labels],
        "agreement": agreement(votes),
        "fleiss_kappa": fleiss_kappa(votes),
        "graded_by_all": sum(Verdict.UNGRADED not in criterion for criterion in votes),
        "pairwise": [
            [None if a == b else kappas.get((a, b), kappas.get((b, a))) for b in labels] for a in labels
        ],
        "by_theme": _disagreement(themes),
        "by_axis": _disagreement(axes),
        "splits": splits[:MAX_SPLITS_SHOWN],
        "n_splits": len(splits),
    }


def _member(label: str, samples: Sequence[GradedSample], options: ScoringOptions | None) -> dict[str, Any]:
    score = score_run(samples, options)
    return {
        "label": label,
        "overall": stat_entry(score.stats.get(OVERALL)),
        "axes": {
            key[5:]: stats.mean
            for key, stats in sorted(score.stats.items())
            if key.startswith("axis:") and key.count(":") == 1
        },
    }


def _disagreement(groups: Mapping[str, Sequence[tuple[Verdict, ...]]]) -> list[dict[str, Any]]:
    """Per group: the share of its criteria graded by every member on which they did not all agree
    (1 − ``judge_agreement`` within the group) and how many such criteria; most disagreement first."""
    rows: list[tuple[float, str, int]] = []
    for name, votes in groups.items():
        share = agreement(votes)
        graded = sum(Verdict.UNGRADED not in criterion for criterion in votes)
        rows.append((-1.0 if share is None else 1 - share, name, graded))
    rows.sort(key=lambda row: (-row[0], row[1]))
    return [
        {"name": name, "disagreement": None if share < 0 else share, "n": graded}
        for share, name, graded in rows
    ]


# ---------------------------------------------------------------- which judge to pay for (a meta-eval)

# the cost-vs-F1 chart's frame (SVG user units): the plot, then a strip right of it for the points
# whose cost is unknown (drawn at their F1, not on the dollar axis)
CHART_WIDTH, CHART_HEIGHT = 760, 340
PLOT_LEFT, PLOT_TOP, PLOT_BOTTOM, PLOT_RIGHT = 56, 16, 292, 530
UNPRICED_X = 640
# a label's box: from LABEL_ASCENT above its baseline to LABEL_GAP - LABEL_ASCENT below, its line height
# (12px text's box is 14.1 high in Chromium, 11.2 of it above the baseline: checked by a browser test)
LABEL_GAP = 15
LABEL_ASCENT = 12
LABEL_CHAR_WIDTH = 7  # a label character's width at the chart's 12px font, at most (user units)
LABEL_OFFSET = 9  # from a point's centre to its label's near end
LABEL_BOTTOM = PLOT_BOTTOM + 3  # labels' boxes end above the dollar axis' tick labels


def judge_choice_summary(name: str, measured: PanelMetaRun) -> dict[str, Any]:
    """The report's "Which judge to pay for" of one stored meta-eval run (``name``): the side-by-side
    rows (`judges_table`), the by-theme rows beside the physicians' agreement (`theme_table`), what
    the calibrated rule was weighed with, and the cost-vs-F1 chart (`cost_f1_chart`)."""
    rows = judges_table(measured)
    return {
        "name": name,
        "rule": measured.rule,
        "calibration": measured.calibration_line() if measured.rules else None,
        "rows": rows,
        "entries": [row["name"] for row in rows],
        "themes": theme_table(measured),
        "chart": cost_f1_chart(rows, physicians=theme_table(measured)[0]["physicians"]),
    }


def cost_f1_chart(rows: Sequence[Mapping[str, Any]], *, physicians: float | None = None) -> dict[str, Any]:
    """Where each member and rule goes on the chart: x its dollars per 1,000 criteria, y its balanced
    F1 (the physicians' own agreement as a dashed line). A point whose cost is unknown is drawn in a
    strip right of the axis, at its F1 ("no price"); one without an F1 cannot be drawn and is listed
    (``unplotted``). Plain numbers in SVG user units, laid out by the template."""
    scores = [row["f1_balanced"] for row in rows if row["f1_balanced"] is not None]
    lo, hi = _f1_range([*scores, *([physicians] if physicians is not None else [])])
    dollars = [row[DOLLARS_KEY] for row in rows if row[DOLLARS_KEY] is not None]
    x_ticks = _dollar_ticks(max(dollars, default=0.0))
    x_max = x_ticks[-1]

    def y_of(f1: float) -> float:
        return PLOT_BOTTOM - (f1 - lo) / (hi - lo) * (PLOT_BOTTOM - PLOT_TOP)

    def x_of(cost: float) -> float:
        return PLOT_LEFT + cost / x_max * (PLOT_RIGHT - PLOT_LEFT)

    points = [
        {
            "name": row["name"],
            "kind": row["kind"],
            "f1": row["f1_balanced"],
            "dollars": row[DOLLARS_KEY],
            "x": UNPRICED_X if row[DOLLARS_KEY] is None else x_of(row[DOLLARS_KEY]),
            "y": y_of(row["f1_balanced"]),
        }
        for row in rows
        if row["f1_balanced"] is not None
    ]
    _place_labels(points)
    # the frame is widened to hold the longest label right of its point (a judge's spec, in full), and
    # made taller only when more labels are stacked at one place than the plot's height holds
    boxes = [label_box(p) for p in points]
    return {
        "width": max([CHART_WIDTH, *(right + 10 for _, _, right, _ in boxes)]),
        "height": max([CHART_HEIGHT, *(bottom + 4 for _, _, _, bottom in boxes)]),
        "plot": {"left": PLOT_LEFT, "right": PLOT_RIGHT, "top": PLOT_TOP, "bottom": PLOT_BOTTOM},
        "unpriced_x": UNPRICED_X,
        "x_ticks": [{"value": t, "x": x_of(t)} for t in x_ticks],
        "y_ticks": [{"value": t, "y": y_of(t)} for t in _f1_ticks(lo, hi)],
        "physicians": None if physicians is None else {"value": physicians, "y": y_of(physicians)},
        "points": points,
        "unpriced": [p["name"] for p in points if p["dollars"] is None],
        "unplotted": [row["name"] for row in rows if row["f1_balanced"] is None],
    }


def _f1_range(values: Sequence[float]) -> tuple[float, float]:
    """The y axis: the tenths around ``values`` (0 to 1 when there are none)."""
    if not values:
        return 0.0, 1.0
    lo = max(0.0, math.floor(min(values) * 10 - 0.5) / 10)
    hi = min(1.0, math.ceil(max(values) * 10 + 0.5) / 10)
    return lo, hi if hi > lo else lo + 0.1


def _f1_ticks(lo: float, hi: float) -> list[float]:
    return [round(lo + 0.1 * i, 1) for i in range(round((hi - lo) * 10) + 1)]


def _dollar_ticks(most: float) -> list[float]:
    """0 and round steps (1, 2 or 5 × a power of ten) up to at least ``most``; 0 to 1 when it is 0."""
    if most <= 0:
        return [0.0, 1.0]
    raw = most / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [round(step * i, 10) for i in range(math.ceil(most / step - 1e-9) + 1)]


def label_box(point: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a point's label where `cost_f1_chart` put it (``lx``, ``ly``,
    ``anchor``), in SVG user units: `LABEL_CHAR_WIDTH` a character, one line of `LABEL_GAP`."""
    width = LABEL_CHAR_WIDTH * len(point["name"])
    left = point["lx"] if point["anchor"] == "start" else point["lx"] - width
    top = point["ly"] - LABEL_ASCENT
    return left, top, left + width, top + LABEL_GAP


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _place_labels(points: list[dict[str, Any]]) -> None:
    """Each point's label (``lx``, ``ly``, ``anchor``, ``leader``), no two labels' boxes (`label_box`)
    overlapping. A label goes beside its point, its baseline 4 below the point's centre: right of it,
    or left of a priced point near the right end of the axis (the unpriced strip is there). Then,
    taking the points from the top of the chart down, a label whose box overlaps one already placed
    is moved down just below it (so labels keep their points' order); if that pushes some below
    `LABEL_BOTTOM`, they are brought back up the same way from the bottom (when the plot's height
    cannot hold them all, they stay pushed down and the frame grows). A label that was moved gets
    a ``leader``: a thin line from its point's centre to the middle of the label's near end."""
    for point in points:
        left = point["dollars"] is not None and point["x"] > PLOT_RIGHT - 110
        offset = -LABEL_OFFSET if left else LABEL_OFFSET
        point["anchor"], point["lx"], point["ly"] = (
            "end" if left else "start",
            point["x"] + offset,
            point["y"] + 4,
        )
    order = sorted(points, key=lambda p: (p["y"], p["x"], p["name"]))
    _push(order, down=True)
    pushed = [p["ly"] for p in order]
    if max((label_box(p)[3] for p in order), default=0.0) > LABEL_BOTTOM:
        lowest = LABEL_BOTTOM - (LABEL_GAP - LABEL_ASCENT)
        for point in order:
            point["ly"] = min(point["ly"], lowest)
        _push(order[::-1], down=False)
        if min(label_box(p)[1] for p in order) < 0:  # more than the plot's height holds
            for point, ly in zip(order, pushed, strict=True):
                point["ly"] = ly
    for point in points:
        moved = abs(point["ly"] - (point["y"] + 4)) > 0.5
        end = point["lx"] + (-2 if point["anchor"] == "start" else 2)
        point["leader"] = {"x": end, "y": point["ly"] - 4} if moved else None


def _push(order: Sequence[dict[str, Any]], *, down: bool) -> None:
    """Place the labels of ``order`` one after the other, each moved (down, or up) just past the boxes
    of the labels placed before it that it overlaps, until it overlaps none."""
    placed: list[tuple[float, float, float, float]] = []
    for point in order:
        while hits := [box for box in placed if _overlap(label_box(point), box)]:
            if down:
                point["ly"] = max(box[3] for box in hits) + LABEL_ASCENT
            else:
                point["ly"] = min(box[1] for box in hits) - (LABEL_GAP - LABEL_ASCENT)
        placed.append(label_box(point))


def stored_judge_choice(store: Store, run: RunRecord) -> dict[str, Any]:
    """`judge_choice_summary` of a stored meta-eval run, measured as it was made (`stored_panel_meta_run`)."""
    return judge_choice_summary(run.name, stored_panel_meta_run(store, run))


def stored_meta_evals(specs: Sequence[str], store: Store | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Split a report's inputs: the specs that name a stored meta-eval run become its "Which judge to pay
    for" (`judge_choice_summary`, measured by `stored_panel_meta_run`), the rest are left for
    `healthbench.analysis.inputs.load_inputs` (files, eval runs, patterns) in their order."""
    rest: list[str] = []
    choices: list[dict[str, Any]] = []
    for spec in specs:
        run = None if store is None or Path(spec).exists() else store.get_run(spec)
        if store is not None and run is not None and run.kind == "meta_eval":
            choices.append(stored_judge_choice(store, run))
        else:
            rest.append(spec)
    return rest, choices
