"""Showing an eval run's scores and writing its files: after `run` and `regrade` (`finish_eval`) and
for `results` (`report_eval_run`). Everything heavy is imported when a run is shown, and each file's
writer only when that file is asked for, the metrics document only for the outputs that carry it
(`healthbench results NAME` start-up, docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from healthbench.cli.app import console, say
from healthbench.cli.option_groups import Bootstrap, ScoreFiles
from healthbench.errors import RunError

if TYPE_CHECKING:
    from healthbench.results.panel_scores import PanelFigures
    from healthbench.results.views import RunView
    from healthbench.runner.run import RunOutcome
    from healthbench.scoring.panel import Calibration, PanelRule
    from healthbench.scoring.run_score import GradedSample, RunScore
    from healthbench.store import RunRecord, Store

SMOKE_WARNING = (
    "The judge is a local 135M-parameter model: this run is a smoke test of the pipeline, not a "
    "measurement. Its verdicts are no better than a constant; use a real judge (e.g. --judge "
    "openai/gpt-4.1) for numbers you can compare."
)


def report_eval_run(
    store: Store,
    run: RunRecord,
    files: ScoreFiles,
    *,
    bootstrap: Bootstrap | None = None,
    strict: bool = False,
    counters_line: str | None = None,
    aggregate_out: Path | None = None,
    row_scores_out: Path | None = None,
    extra_metrics: Mapping[str, Any] | None = None,
    inspect_log_out: Path | None = None,
    mlflow: bool = False,
    store_flag: str | None = None,
    panel_rule: PanelRule | None = None,
    calibration: Calibration | None = None,
) -> tuple[int, int]:
    """Score the run, print its scores (marked PARTIAL while conversations lack an answer), write the
    files asked for, and warn about (or, ``strict``, refuse) ungraded criteria. Returns the
    (conversation, repeat) pairs without an answer and all of them (`RunView.unanswered`).
    ``store_flag``: the command's ``--store``, for the command that grades the ungraded criteria.
    ``panel_rule`` / ``calibration``: how a panel's verdicts are combined (None: the stored rule)."""
    from healthbench.cli.summary_view import render_summary
    from healthbench.results.run_results import run_metrics, scored_run
    from healthbench.results.summary import summary_of
    from healthbench.results.views import RunView

    view = RunView.of(store, run).require_kind("eval").with_panel(panel_rule, calibration)
    bootstrap = bootstrap or Bootstrap()  # the run's stored settings
    options = view.scoring_options(seed=bootstrap.seed, n_resamples=bootstrap.n_resamples)
    # the graded samples (every answer's text) only for the files that carry them; else read as columns
    with_samples = files.allresults_out is not None or aggregate_out is not None or mlflow
    scored = scored_run(view, options, with_samples=with_samples)
    samples, score, panel, members = scored.samples, scored.score, scored.panel, scored.members
    summary = summary_of(score, panel)
    judge = view.judge_spec
    missing, expected = unanswered = view.unanswered()
    judges = f"judges {', '.join(view.members)} (rule {view.panel_rule})" if panel else f"judge {judge}"
    title = f"run {run.name} · {judges} · {view.describe_provenance()}"
    if missing:  # never shown as if it were the run's score
        title = f"PARTIAL: {expected - missing} of {expected} conversations answered, not the run's score · {title}"
    render_summary(summary, title=title, console=console)
    if counters_line:
        say(counters_line)
    if judge.startswith("local/"):
        say(f"note: {SMOKE_WARNING}", style="yellow", stderr=True)
    metrics = None  # the metrics document: built only for the outputs that carry it
    if files.metrics_out is not None or inspect_log_out is not None or mlflow:
        metrics = run_metrics(view, scored, [extra_metrics] if extra_metrics is not None else [])
    del scored
    if files.metrics_out is not None:
        from healthbench.results.metrics_out import write_metrics

        assert metrics is not None
        write_metrics(files.metrics_out, metrics)
        say(f"metrics written to {files.metrics_out}")
    _write_score_files(
        view, samples, score, metrics, files, aggregate_out, inspect_log_out, mlflow, members, panel
    )
    if row_scores_out is not None:
        from healthbench.results.rows import iter_row_scores, write_row_scores

        del samples  # the rows stream from the store
        _, count = write_row_scores(
            row_scores_out,
            iter_row_scores(store, run.name, options, rule=panel_rule, calibration=calibration),
        )
        say(f"{count} row scores written to {row_scores_out}")
    if summary.ungraded_criteria:
        from healthbench.cli.continuable import resume_command

        message = (
            f"{summary.ungraded_criteria} criteria ungraded in {summary.ungraded_samples} conversations "
            f"(left out of the scores); `{resume_command(run.name, store=store_flag)}` grades them"
        )
        if strict:
            raise RunError(f"--strict: {message}")
        say(f"warning: {message}", style="yellow", stderr=True)
    return unanswered


def _write_score_files(
    view: RunView,
    samples: list[GradedSample],
    score: RunScore,
    metrics: dict[str, Any] | None,
    files: ScoreFiles,
    aggregate_out: Path | None,
    inspect_log_out: Path | None,
    mlflow: bool,
    members: list[Mapping[str, GradedSample]] | None,
    panel: PanelFigures | None,
) -> None:
    """The files of `report_eval_run` that are written from the scores and samples themselves
    (``members``: a panel's members' own samples beside ``samples``, None for a single judge;
    ``metrics``: the metrics document, None unless ``inspect_log_out`` or ``mlflow`` asks for it)."""
    run = view.record
    if files.allresults_out is not None:
        from healthbench.results.simple_evals import write_allresults

        write_allresults(files.allresults_out, samples, score, provenance=view.provenance(), members=members)
        say(f"simple-evals export written to {files.allresults_out}")
    if aggregate_out is not None:
        from healthbench.results.aggregate import aggregate_document, write_aggregate_scores

        write_aggregate_scores(
            aggregate_out, aggregate_document(run.name, samples, score, panel, members or ())
        )
        say(f"aggregate scores written to {aggregate_out}")
    if inspect_log_out is not None:
        from healthbench.results.inspect_log import write_inspect_log

        assert metrics is not None
        write_inspect_log(inspect_log_out, view, score, metrics)
        say(f"Inspect log written to {inspect_log_out}")
    if mlflow:
        from healthbench.analysis.inputs import stored_run
        from healthbench.analysis.report import build_report
        from healthbench.results.mlflow_log import log_to_mlflow

        assert metrics is not None
        report = build_report(
            [stored_run(view, samples, members)], options=score.options, title=f"HealthBench run {run.name}"
        )
        logged = log_to_mlflow(view, samples, score, metrics, report=report)
        say(
            f"logged to MLflow: run {logged.run_id} in experiment {logged.experiment!r} at {logged.tracking_uri}"
        )


def finish_eval(
    store: Store,
    outcome: RunOutcome,
    files: ScoreFiles,
    *,
    strict: bool,
    bootstrap: Bootstrap | None = None,
    store_flag: str | None = None,
    mlflow: bool = False,
) -> None:
    """The end of `run` and `regrade`: what the calls took, the scores and files (`report_eval_run`;
    ``bootstrap`` None: the run's stored settings), and an error naming the command that continues a run left incomplete (it never exits 0)."""
    from healthbench.cli.continuable import resume_command
    from healthbench.cli.run_flow import calls_line

    line = calls_line(outcome.counters)
    missing, expected = report_eval_run(
        store,
        outcome.run,
        files,
        bootstrap=bootstrap,
        strict=strict,
        counters_line=line,
        mlflow=mlflow,
        store_flag=store_flag,
    )
    if missing:
        raise RunError(
            f"run {outcome.run.name!r} is incomplete: {missing} of {expected} conversations have no "
            f"answer; continue with: {resume_command(outcome.run.name, store=store_flag)}"
        )
