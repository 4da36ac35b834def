"""`healthbench meta-eval`: how well a judge agrees with physicians (thin wrapper)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from healthbench.atomic import refuse_overwriting_inputs
from healthbench.cli.app import app, console, handles_errors, say
from healthbench.cli.option_groups import CallOptions, JudgeOptions, RunControl, TraceOptions, takes_groups
from healthbench.cli.options import CacheDir, ConfigFile, MetricsOutOpt, StoreOpt, split_list
from healthbench.defaults import DEFAULT_META_EVAL_VARIANT, DEFAULT_MIN_PHYSICIAN_RATINGS, OFFLINE_MODEL
from healthbench.errors import ConfigError, RunError

if TYPE_CHECKING:  # the rest is imported when the command runs (`meta-eval --help` stays light)
    from healthbench.models.tally import CallTally
    from healthbench.results.panel_meta_results import PanelMetaRun
    from healthbench.results.views import RunView
    from healthbench.scoring.meta import GroupSummary, MetaEvalResult
    from healthbench.scoring.panel import Calibration
    from healthbench.store.runs import RunRecord, Store


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def render_meta(result: MetaEvalResult, *, title: str, min_physician_ratings: int) -> None:
    table = Table(title=Text(title))
    for column in (
        "scope",
        "judge F1 balanced",
        "physician mean",
        "percentile",
        "physicians",
        "n pairs",
        "rows",
    ):
        # numbers keep their width; long category names fold at 80 columns instead of being cut
        if column == "scope":
            table.add_column(column, overflow="fold", ratio=1)
        else:
            header = {"judge F1 balanced": "judge F1\nbalanced", "physician mean": "physician\nmean"}
            table.add_column(header.get(column, column), justify="right", no_wrap=True)

    def add(row: GroupSummary) -> None:
        table.add_row(
            Text(row.name),
            _fmt(row.judge_f1_balanced),
            _fmt(row.physician_f1_balanced_mean),
            _fmt(row.percentile, 1),
            str(row.physician_count),
            str(row.judge_n),
            str(row.graded_rows),
        )

    add(result.overall)
    for row in result.categories:
        add(row)
    console.print(table)
    if any(row.physician_f1_balanced_mean is None for row in [result.overall, *result.categories]):
        console.print(  # prose: wrapped at the terminal's width
            Text(
                f"— in physician mean: no physician in that scope has more than {min_physician_ratings} "
                "rating pairs to compare (see --min-physician-ratings), so there is no baseline"
            )
        )
    ungraded = result.metrics.get("ungraded_rows") or 0
    if ungraded:
        say(
            f"warning: {ungraded} rows ungraded (left out of the judge's numbers)",
            style="yellow",
            stderr=True,
        )


# what --labels works with: the data, its selection and the output (every other flag is refused)
LABEL_FLAGS = frozenset(
    {"labels", "dataset", "data", "limit", "category", "min_physician_ratings", "cache_dir", "metrics_out"}
)


@app.command("meta-eval")
@handles_errors
@takes_groups
def meta_eval_command(
    ctx: typer.Context,
    *,
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            show_default=False,
            help=f"Judge model spec. Default {OFFLINE_MODEL}. Repeat it for a panel: every judge grades "
            "every row.",
        ),
    ] = None,
    judging: JudgeOptions,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "-d",
            show_default=False,
            help="meta_eval (official, 29,511 rows) or demo_meta_eval (default, offline).",
        ),
    ] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="A local meta-eval JSONL file instead of the download.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Grade N rows, chosen as simple-evals does (random.Random(0).sample)."),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option(
            "--category",
            help="Only rows of this category (repeatable), e.g. cluster:hedging_no-uncertainty_hedges.",
        ),
    ] = None,
    n_repeats: Annotated[
        int | None,
        typer.Option(
            "--n-repeats",
            show_default=False,
            help="Grade each row K times (default 1); all repeats count in the metrics.",
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="Judge labels made elsewhere (JSONL of completion_id, rubric, criteria_met): compute the metrics without calling a judge.",
        ),
    ] = None,
    min_physician_ratings: Annotated[
        int,
        typer.Option(
            "--min-physician-ratings",
            help="Physicians need more than this many rating pairs to count in the baseline.",
        ),
    ] = DEFAULT_MIN_PHYSICIAN_RATINGS,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Run name (default generated). An existing name is continued."),
    ] = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Continue meta-eval run NAME with its stored settings.")
    ] = None,
    config: ConfigFile = None,
    store: StoreOpt = None,
    calls: CallOptions,
    cache_dir: CacheDir = None,
    control: RunControl,
    metrics_out: MetricsOutOpt = None,
    traces: TraceOptions,
    judges_out: Annotated[
        Path | None,
        typer.Option(
            "--judges-out",
            help="Write a CSV with one row per judge and per panel rule: F1s, $ per 1,000 criteria, n.",
        ),
    ] = None,
    calibrate_with: Annotated[
        list[str] | None,
        typer.Option(
            "--calibrate-with",
            help="Meta-eval run(s) whose judges' error rates weigh the calibrated panel rule (repeatable; default: cross-fitted on this run's rows).",
        ),
    ] = None,
) -> None:
    """Grade the meta-eval rows with a judge (or several) and measure their agreement with physicians."""
    from healthbench.cli.config_flags import config_layer, given_flags, refuse_with_resume
    from healthbench.cli.continuable import resume_command
    from healthbench.cli.dry_run import print_estimate
    from healthbench.cli.run_flow import calls_line, resume_to_end, start_to_end
    from healthbench.config import build_config, check_one_data_source, load_config_file
    from healthbench.results.meta_results import score_label_file, score_meta_run
    from healthbench.results.panel_meta_results import score_panel_meta_run
    from healthbench.results.views import RunView
    from healthbench.runner.meta_eval import META_EVAL, meta_dry_run
    from healthbench.store import Store
    from healthbench.store.location import store_file

    if min_physician_ratings < 0:
        raise ConfigError(f"--min-physician-ratings must be 0 or more, not {min_physician_ratings}")
    check_one_data_source(dataset, data)
    variant = dataset or DEFAULT_META_EVAL_VARIANT
    refuse_overwriting_inputs(
        {"--metrics-out": metrics_out, "--judges-out": judges_out}, [labels, data, config, store_file(store)]
    )
    if labels is not None:
        # nothing is graded, stored or resumed: any other flag would be silently ignored
        given = given_flags(ctx, lambda param: param not in LABEL_FLAGS)
        if given:
            raise ConfigError(
                f"--labels scores labels made elsewhere, no judge is called; drop {', '.join(given)}"
            )
        result = score_label_file(
            labels,
            variant,
            data=data,
            cache=cache_dir,
            limit=limit,
            categories=split_list(category),
            min_physician_ratings=min_physician_ratings,
        )
        _output(result, f"meta-eval of labels in {labels.name}", metrics_out, min_physician_ratings)
        return
    s = Store(store, create=resume is None)  # a run is resumed from a store that exists
    reports = JudgeReports.of(s, judges_out, split_list(calibrate_with) or [])  # checked before any call
    if resume is not None:
        refuse_with_resume(ctx, also=("dry_run",))
        with traces.tracing() as tracing:
            outcome = resume_to_end(ctx, s, resume, META_EVAL, store_flag=store, tracing=tracing)
    else:
        cfg = build_config(
            load_config_file(config) if config else {},
            config_layer(ctx.params, candidate=False),
            defaults={"judge": {"spec": OFFLINE_MODEL}, "dataset": DEFAULT_META_EVAL_VARIANT},
        )
        if control.dry_run:
            n_rows, rows = meta_dry_run(cfg)
            print_estimate(f"dry run: {n_rows} rows × {cfg.n_repeats} repeats (no call made)", rows)
            return
        with traces.tracing() as tracing:
            outcome = start_to_end(s, cfg, name, META_EVAL, store_flag=store, tracing=tracing)
    say(calls_line(outcome.counters, calls="judge calls"))
    view = RunView.of(s, outcome.run)
    judge_spec = view.judge_spec
    judge_usage = view.usage_totals().judge
    if len(view.config.panel) > 1:
        title = f"meta-eval run {outcome.run.name} · {len(view.config.panel)} judges · {view.describe_provenance()}"
        measured = _output_panel(
            s, outcome.run, title, metrics_out, reports, min_physician_ratings, view, judge_usage
        )
        ungraded = max(int(e.result.metrics.get("ungraded_rows") or 0) for e in measured.members)
    else:
        result = score_meta_run(s, outcome.run, min_physician_ratings=min_physician_ratings)
        title = f"meta-eval run {outcome.run.name} · judge {judge_spec} · {view.describe_provenance()}"
        _output(result, title, metrics_out, min_physician_ratings, view.provenance(), judge_usage)
        if judges_out is not None:  # its one row
            one = score_panel_meta_run(s, outcome.run, min_physician_ratings=min_physician_ratings)
            _write_judges_file(judges_out, one)
        ungraded = int(result.metrics.get("ungraded_rows") or 0)
    if judge_spec.startswith("local/"):
        say(
            "note: a 135M local judge is a smoke test of the pipeline, not a judge.",
            style="yellow",
            stderr=True,
        )
    if control.strict and ungraded:
        raise RunError(
            f"--strict: {ungraded} rows ungraded; continue with: "
            f"{resume_command(outcome.run.name, kind='meta_eval', store=store)}"
        )


@dataclass(frozen=True)
class JudgeReports:
    """What a meta-eval writes about its judges beside the metrics: ``--judges-out`` and the runs that
    calibrate the calibrated rule (``--calibrate-with``)."""

    judges_out: Path | None
    calibrate_with: list[str]
    calibration: Calibration | None  # None: the calibrated rule is cross-fitted on the run's rows

    @classmethod
    def of(cls, store: Store, judges_out: Path | None, calibrate_with: list[str]) -> JudgeReports:
        """The reports asked for, the calibration read (a wrong run name fails before any call)."""
        from healthbench.results.calibration import load_calibration

        calibration = load_calibration(store, calibrate_with) if calibrate_with else None
        return cls(judges_out, calibrate_with, calibration)


def render_judges(measured: PanelMetaRun, *, title: str) -> None:
    """The side-by-side table (each member, then the panel under each rule) and the paper's Table 5
    (balanced F1 by theme, beside the physicians' own agreement)."""
    from healthbench.results.panel_meta_results import judges_table, theme_table

    table = Table(title=Text(title))
    table.add_column("judge / panel rule", overflow="fold", ratio=1)
    for header in ("F1\nbalanced", "F1\nmet", "F1\nnot met", "$ per 1,000\ncriteria", "n pairs", "rows"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in judges_table(measured):
        table.add_row(
            Text(row["name"]),
            _fmt(row["f1_balanced"]),
            _fmt(row["f1_pos"]),
            _fmt(row["f1_neg"]),
            _fmt(row["dollars_per_1000_criteria"], 4),
            str(row["n_pairs"]),
            str(row["graded_rows"]),
        )
    console.print(table)
    themes = Table(title=Text("pairwise balanced F1 by theme (physicians: their own agreement)"))
    themes.add_column("theme", no_wrap=True)
    names = ["physicians", *(entry.name for entry in measured.result.entries)]
    for name in names:  # a rule's column by its rule's name: the first table names it in full
        themes.add_column(Text(name.removeprefix("panel:")), justify="right", overflow="fold")
    for row in theme_table(measured):
        themes.add_row(Text(row["scope"].removeprefix("theme:")), *(_fmt(row[name]) for name in names))
    console.print(themes)
    console.print(Text(measured.calibration_line()), soft_wrap=True)
    for entry in measured.members:
        ungraded = entry.result.metrics.get("ungraded_rows") or 0
        if ungraded:
            say(
                f"warning: {entry.name}: {ungraded} rows ungraded (left out of its numbers)",
                style="yellow",
                stderr=True,
            )


def _output_panel(
    store: Store,
    run: RunRecord,
    title: str,
    metrics_out: Path | None,
    reports: JudgeReports,
    min_physician_ratings: int,
    view: RunView,
    judge: CallTally,
) -> PanelMetaRun:
    """A meta-eval of several judges: the judges' table, then the files asked for (``--metrics-out``
    with the members' cost and tokens together, as a single judge's)."""
    from healthbench.results.metrics_out import usage_metrics, write_metrics
    from healthbench.results.panel_meta_results import panel_meta_keys, score_panel_meta_run

    measured = score_panel_meta_run(
        store,
        run,
        calibration=reports.calibration,
        calibrate_with=reports.calibrate_with,
        min_physician_ratings=min_physician_ratings,
    )
    render_judges(measured, title=title)
    if metrics_out is not None:
        write_metrics(
            metrics_out, panel_meta_keys(measured), usage_metrics(None, judge), provenance=view.provenance()
        )
        say(f"metrics written to {metrics_out}")
    if reports.judges_out is not None:
        _write_judges_file(reports.judges_out, measured)
    return measured


def _write_judges_file(path: Path, measured: PanelMetaRun) -> None:
    from healthbench.results.panel_meta_results import write_judges_csv

    write_judges_csv(path, measured)
    say(f"judges written to {path}")


def _output(
    result: MetaEvalResult,
    title: str,
    metrics_out: Path | None,
    min_physician_ratings: int,
    about: dict[str, str | None] | None = None,
    judge: CallTally | None = None,
) -> None:
    """Show the metrics and write ``--metrics-out`` (with the judge's cost and tokens, as an eval
    run's, when a judge was called)."""
    from healthbench.results.metrics_out import usage_metrics, write_metrics

    render_meta(result, title=title, min_physician_ratings=min_physician_ratings)
    if metrics_out is not None:
        costs = [] if judge is None else [usage_metrics(None, judge)]
        write_metrics(metrics_out, result.metrics, *costs, provenance=about)
        say(f"metrics written to {metrics_out}")
