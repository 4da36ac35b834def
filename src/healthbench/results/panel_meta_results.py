"""The meta-eval of a panel read from a stored meta-eval run: each member's and each rule's agreement
with physicians side by side (`healthbench.scoring.panel_meta.panel_meta_metrics`, which measures each
through the one `meta_metrics`), each member's dollars per 1,000 criteria from its stored grades, and
every output shape of it: the ``--metrics-out`` keys, the ``--judges-out`` CSV, the rows of the
terminal table, the report's section and the console's page (docs/meta_eval.md, "Which judge to pay for").

The calibrated rule: cross-fitted on the run's own rows by default (no row is combined with rates measured
on itself, so its F1 is an out-of-sample figure, comparable with the other rules', and needs no other
run), or weighed by the rates of other meta-eval runs (``--calibrate-with``: `load_calibration`), which
is how an eval run of the panel applies it; it is left out, and said so, when the run has fewer rows than
cross-fitting folds.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from healthbench.atomic import atomic_writer
from healthbench.defaults import DEFAULT_MIN_PHYSICIAN_RATINGS, PANEL_RULES
from healthbench.results.calibration import load_calibration
from healthbench.results.meta_results import score_meta_run, stored_verdicts
from healthbench.results.views import RunView
from healthbench.scoring.meta import MetaEvalResult, MetricValue
from healthbench.scoring.panel import Calibration, PanelRule
from healthbench.scoring.panel_meta import (
    DEFAULT_FOLDS,
    PANEL_PREFIX,
    PanelMetaEntry,
    PanelMetaResult,
    panel_meta_metrics,
)
from healthbench.store.runs import RunRecord, Store

MEMBER_PREFIX = "judge:"  # metrics-out: judge:<label>:<key> (a member), panel:<rule>:<key> (a rule)
DOLLARS_KEY = "dollars_per_1000_criteria"
# the meta-eval keys that depend on the judge measured (the physician baseline and the rows do not)
JUDGE_KEYS = ("pairwise_model_", "graded_rows", "ungraded_rows", "model_predicted_positive", "model_f1_")
JUDGES_COLUMNS = (
    "name",
    "kind",
    "f1_balanced",
    "f1_pos",
    "f1_neg",
    "precision_pos",
    "recall_pos",
    "precision_neg",
    "recall_neg",
    DOLLARS_KEY,
    "n_pairs",
    "graded_rows",
    "ungraded_rows",
)


@dataclass(frozen=True)
class PanelMetaRun:
    """A stored meta-eval run of several judges, measured: ``result`` has the members (panel order) then
    the rules; ``rule`` is the run's own (its usual metric keys are the panel's under it)."""

    result: PanelMetaResult
    rule: PanelRule
    calibration: str | None  # how the calibrated rule was weighed ("cross-fitted", "given"); None: left out
    calibrate_with: tuple[str, ...]  # the meta-eval runs of a given calibration

    @property
    def members(self) -> list[PanelMetaEntry]:
        return [entry for entry in self.result.entries if entry.kind == "member"]

    @property
    def rules(self) -> list[PanelMetaEntry]:
        return [entry for entry in self.result.entries if entry.kind == "panel"]

    @property
    def headline(self) -> MetaEvalResult:
        """The panel under the run's rule (the majority's when that rule was left out)."""
        names = [entry.name for entry in self.rules]
        wanted = f"{PANEL_PREFIX}{self.rule}"
        return self.result.entry(wanted if wanted in names else f"{PANEL_PREFIX}majority").result

    def calibration_line(self) -> str:
        """What the output says about the calibrated rule's rates."""
        if self.calibration == "given":
            runs = ", ".join(self.calibrate_with)
            return f"panel:calibrated weighs the members by the rates of meta-eval run(s) {runs}"
        if self.calibration == "cross-fitted":
            return (
                f"panel:calibrated is cross-fitted: each of {DEFAULT_FOLDS} folds of rows is combined with "
                "the rates measured on the others (give --calibrate-with META_RUN to use another run's)"
            )
        return f"panel:calibrated left out: cross-fitting needs at least {DEFAULT_FOLDS} rows"


def is_panel_run(store: Store, run: RunRecord) -> bool:
    """Whether a stored meta-eval run has several judges."""
    return len(RunView.of(store, run).config.panel) > 1


def score_panel_meta_run(
    store: Store,
    run: RunRecord,
    *,
    calibration: Calibration | None = None,
    calibrate_with: Sequence[str] = (),
    min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS,
) -> PanelMetaRun:
    """Each member and the panel under each rule, measured against physicians, with dollars per 1,000
    criteria (`member_costs`). ``calibration`` (from ``calibrate_with``): the calibrated rule's rates;
    None: cross-fitted on the run's rows."""
    view = RunView.of(store, run).require_kind("meta_eval")
    rows, verdicts = stored_verdicts(store, run)
    rules: tuple[PanelRule, ...] = PANEL_RULES if len(verdicts) > 1 else ()  # one judge: no panel
    if calibration is None and len(rows) < DEFAULT_FOLDS:
        rules = tuple(rule for rule in rules if rule != "calibrated")
    result = panel_meta_metrics(
        rows,
        verdicts,
        rules=rules,
        calibration=calibration,
        costs=member_costs(store, run, len(rows)),
        min_physician_ratings=min_physician_ratings,
    )
    return PanelMetaRun(result, view.config.scoring.panel, result.calibration, tuple(calibrate_with))


def member_costs(store: Store, run: RunRecord, criteria: int) -> dict[str, float | None]:
    """What grading ``criteria`` rows costs each member at the price it paid per criterion asked: the
    stored cost of its grades that were asked of the model (answers from the call cache cost nothing
    and are left out, so a re-run or resumed run prices the same), over their number, times
    ``criteria``. None when no grade was asked or one of them has no price (a model without one)."""
    paid: dict[str, list[float | None]] = {}
    for grade in store.load_grades(run.id).values():
        if not grade.cached:
            paid.setdefault(grade.judge, []).append(grade.cost)
    out: dict[str, float | None] = {}
    for member in RunView.of(store, run).config.panel:
        costs = paid.get(member.label, [])
        known = [cost for cost in costs if cost is not None]
        whole = costs and len(known) == len(costs)
        out[member.label] = math.fsum(known) * criteria / len(costs) if whole else None
    return out


# ---------------------------------------------------------------- output shapes


def entry_figures(entry: PanelMetaEntry) -> dict[str, Any]:
    """One line of the side-by-side table (`JUDGES_COLUMNS`): the overall pairwise figures, the dollars
    per 1,000 criteria, the pairs behind the balanced F1 and the rows graded / ungraded."""
    metrics = entry.result.metrics
    figures: dict[str, Any] = {"name": entry.name, "kind": entry.kind}
    for column in JUDGES_COLUMNS[2:9]:
        figures[column] = metrics.get(f"pairwise_model_{column}")
    figures[DOLLARS_KEY] = entry.dollars_per_1000
    figures["n_pairs"] = metrics.get("pairwise_model_f1_balanced:n_samples")
    figures["graded_rows"] = metrics.get("graded_rows")
    figures["ungraded_rows"] = metrics.get("ungraded_rows")
    return figures


def judges_table(measured: PanelMetaRun) -> list[dict[str, Any]]:
    """`entry_figures` of every member (panel order) then every rule."""
    return [entry_figures(entry) for entry in measured.result.entries]


def judges_csv(measured: PanelMetaRun) -> str:
    """The ``--judges-out`` file: `JUDGES_COLUMNS`, one row per member and per rule; an undefined figure
    is an empty cell, numbers as Python prints them (full precision)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=JUDGES_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in judges_table(measured):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def theme_table(measured: PanelMetaRun) -> list[dict[str, Any]]:
    """The paper's Table 5: for each scope (overall, then each theme), every member's and rule's pairwise
    balanced F1 (by entry name) beside the physicians' own agreement (``physicians``: their n-weighted
    mean, the qualifying ones'; the same for every entry)."""
    entries = measured.result.entries
    first = entries[0].result
    scopes = [("overall", first.overall)] + [(theme.name, theme) for theme in first.themes]
    rows = []
    for k, (name, summary) in enumerate(scopes):
        row: dict[str, Any] = {"scope": name, "physicians": summary.physician_f1_balanced_mean}
        for entry in entries:
            groups = [entry.result.overall, *entry.result.themes]
            row[entry.name] = groups[k].judge_f1_balanced
        rows.append(row)
    return rows


def panel_meta_keys(measured: PanelMetaRun) -> dict[str, MetricValue | str]:
    """The ``--metrics-out`` of a meta-eval of several judges: the usual keys are the panel's under the
    run's rule (`headline`), then ``judge:<label>:<key>`` for each member and ``panel:<rule>:<key>`` for
    each rule (the keys that depend on the judge: pairwise figures, graded and ungraded rows,
    ``model_predicted_positive``, the percentile among physicians; the physician baseline is once, in
    the usual keys), each with ``<prefix>dollars_per_1000_criteria``; ``panel_rule`` and
    ``panel_calibration`` (how the calibrated rule was weighed)."""
    out: dict[str, MetricValue | str] = dict(measured.headline.metrics)
    out["panel_rule"] = measured.rule
    out["panel_calibration"] = measured.calibration or "left out"
    for entry in measured.result.entries:
        prefix = f"{MEMBER_PREFIX}{entry.name}:" if entry.kind == "member" else f"{entry.name}:"
        out.update(_judge_keys(entry.result.metrics, prefix))
        out[f"{prefix}{DOLLARS_KEY}"] = entry.dollars_per_1000
    return out


def _judge_keys(metrics: Mapping[str, MetricValue], prefix: str) -> dict[str, MetricValue]:
    """The keys of ``metrics`` that depend on the judge, each under ``prefix``."""
    return {
        f"{prefix}{key}": value
        for key, value in metrics.items()
        if key.rsplit(": ", 1)[-1].startswith(JUDGE_KEYS)
    }


def write_judges_csv(path: str | PathLike[str], measured: PanelMetaRun) -> Path:
    """Write `judges_csv` atomically (``--judges-out``)."""
    with atomic_writer(path) as out:
        out.write(judges_csv(measured).encode("utf-8"))
    return Path(path)


def meta_run_metrics(
    store: Store, run: RunRecord, *, min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS
) -> dict[str, MetricValue | str]:
    """The metrics of a stored meta-eval run as ``--metrics-out`` writes them (the service's too): a
    single judge's `meta_metrics`, a panel's `panel_meta_keys` (its calibrated rule cross-fitted, or
    weighed by the run's stored ``calibrate_with`` runs)."""
    view = RunView.of(store, run).require_kind("meta_eval")
    if len(view.config.panel) == 1:
        return dict(score_meta_run(store, run, min_physician_ratings=min_physician_ratings).metrics)
    return panel_meta_keys(stored_panel_meta_run(store, run, min_physician_ratings=min_physician_ratings))


def stored_panel_meta_run(
    store: Store, run: RunRecord, *, min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS
) -> PanelMetaRun:
    """`score_panel_meta_run` of a stored meta-eval run as it was made: its calibrated rule weighed by
    the run's stored ``calibrate_with`` runs, else cross-fitted (the service's metrics, the report)."""
    names = RunView.of(store, run).require_kind("meta_eval").config.scoring.calibrate_with
    calibration = load_calibration(store, names) if names else None
    return score_panel_meta_run(
        store, run, calibration=calibration, calibrate_with=names, min_physician_ratings=min_physician_ratings
    )
