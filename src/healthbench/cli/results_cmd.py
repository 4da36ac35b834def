"""`healthbench runs` and `results`: the read-only commands over the store (no model call).

This module loads typer, rich and the options only (docs/benchmarks.md: `runs` and `results NAME`
start-up); `runs` reads the store through `RunView` without parsing any run's settings (no numpy),
`results` loads the scoring core when it scores, and the judge-correction and export modules only
when their flags are given."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from healthbench.atomic import refuse_overwriting_inputs
from healthbench.cli.app import app, console, handles_errors
from healthbench.cli.eval_report import report_eval_run
from healthbench.cli.option_groups import Bootstrap, ScoreFiles, takes_groups
from healthbench.cli.options import MlflowOpt, StoreOpt
from healthbench.cli.summary_view import literal
from healthbench.errors import ConfigError, RunError, StoreMissingError, a_kind


def dataset_label(dataset: dict[str, Any]) -> str:
    """What `runs` shows of a run's data: the variant, or a local file's name and the first 12 hex
    digits of its sha256 (as git shortens a commit: enough to tell files apart, one table line)."""
    if dataset.get("source") == "local":
        return f"{Path(str(dataset.get('path', '?'))).name} sha256:{str(dataset.get('sha256', '?'))[:12]}"
    return str(dataset.get("variant", "?"))


@app.command("runs")
@handles_errors
def runs_command(store: StoreOpt = None) -> None:
    """List the runs in the store (a store that does not exist yet lists nothing and is not created)."""
    from healthbench.results.views import RunView
    from healthbench.store import Store

    try:
        s = Store(store, create=False)
    except StoreMissingError as exc:
        console.print(Text(f"no runs: {exc}"))
        return
    table = Table(title=Text(f"runs in {s.url}"))
    for column in ("name", "kind", "status", "model", "judge", "dataset", "created"):
        # long names fold at 80 columns (never cut); short fixed-width fields stay on one line
        table.add_column(column, overflow="fold", no_wrap=column in ("kind", "status", "created"))
    for run in s.list_runs():
        view = RunView.of(s, run)
        completions = f"{view.completions} completions" if view.completions else "-"
        cells = (
            run.name,
            run.kind,
            run.status,
            view.model_spec or completions,  # a run without a candidate: the completions it graded
            " + ".join(view.judge_specs),  # a panel: every member, the chair first
            dataset_label(run.config.get("dataset") or {}),
            run.created_at[:19],
        )
        table.add_row(*(Text(literal(cell)) for cell in cells))  # user text shown literally, escaped
    console.print(table)


@app.command("results")
@handles_errors
@takes_groups
def results_command(
    name: Annotated[str, typer.Argument(help="Run name.")],
    *,
    store: StoreOpt = None,
    bootstrap: Bootstrap,
    files: ScoreFiles,
    correct_with: Annotated[
        str | None,
        typer.Option(
            "--correct-with",
            help="A stored meta-eval run of the same judge (of the same panel for a panel's run): also "
            "report scores corrected for its measured errors (a panel's under its rule; docs/correction.md).",
        ),
    ] = None,
    aggregate_out: Annotated[
        Path | None,
        typer.Option(
            "--aggregate-out",
            help="Write the aggregate-scores JSON (NeMo Evaluator shape, see docs/results.md).",
        ),
    ] = None,
    row_scores_out: Annotated[
        Path | None,
        typer.Option(
            "--row-scores-out",
            help="Write the row-scores JSONL, one line per conversation and repeat (see docs/results.md).",
        ),
    ] = None,
    inspect_log_out: Annotated[
        Path | None,
        typer.Option(
            "--inspect-log-out",
            help="Write the run as an Inspect evaluation log (.eval, or .json) that `inspect view` opens; "
            "needs pip install 'healthbench[inspect]' (see docs/interop.md).",
        ),
    ] = None,
    panel: Annotated[
        str | None,
        typer.Option(
            "--panel",
            help="How a panel of judges' verdicts on a criterion become the run's: majority, unanimous, "
            "any or calibrated (default: the run's stored rule; no model call; docs/panels.md).",
        ),
    ] = None,
    calibrate_with: Annotated[
        list[str] | None,
        typer.Option(
            "--calibrate-with",
            help="A stored meta-eval run of a panel member (repeatable): the error rates the calibrated "
            "rule weighs members by; implies --panel calibrated (docs/panels.md).",
        ),
    ] = None,
    mlflow: MlflowOpt = False,
) -> None:
    """Show a stored run's scores again and export them (no model call)."""
    from healthbench.store import Store
    from healthbench.store.location import store_file

    outputs = {
        "--metrics-out": files.metrics_out,
        "--allresults-out": files.allresults_out,
        "--aggregate-out": aggregate_out,
        "--row-scores-out": row_scores_out,
        "--inspect-log-out": inspect_log_out,
    }
    refuse_overwriting_inputs(outputs, [store_file(store)])
    s = Store(store, create=False)
    run = s.require_run(name)
    if run.kind != "eval":
        from healthbench.cli.continuable import resume_command

        command = resume_command(name, kind=run.kind, store=store)
        raise RunError(f"run {name!r} is {a_kind(run.kind)} run; use `{command}`")
    if mlflow:
        from healthbench.results.mlflow_log import require_mlflow

        require_mlflow()
    rule, calibration = _panel_choice(s, panel, calibrate_with or [])
    correction = None
    title = f"run {name} corrected with meta-eval run {correct_with}"
    if correct_with is not None:  # before any output: a refused meta-eval run leaves no partial file
        from healthbench.results.correction import corrected_scores
        from healthbench.results.views import RunView

        view = RunView.of(s, run).with_panel(rule, calibration)
        options = view.scoring_options(seed=bootstrap.seed, n_resamples=bootstrap.n_resamples)
        correction = corrected_scores(
            s, name, correct_with, options=options, panel_rule=rule, calibration=calibration
        )
        if view.is_panel:
            title += f" (the panel's error rates, rule {view.panel_rule})"
    report_eval_run(
        s,
        run,
        files,
        bootstrap=bootstrap,
        aggregate_out=aggregate_out,
        row_scores_out=row_scores_out,
        extra_metrics=correction.metrics() if correction is not None else None,
        inspect_log_out=inspect_log_out,
        mlflow=mlflow,
        store_flag=store,
        panel_rule=rule,
        calibration=calibration,
    )
    if correction is not None:
        from healthbench.cli.correction_view import render_correction

        render_correction(correction, title=title, console=console)


def _panel_choice(store: Any, panel: str | None, calibrate_with: list[str]) -> tuple[Any, Any]:
    """(rule, calibration) of ``--panel`` and ``--calibrate-with``: a one-line error on an unknown rule
    or a calibration given to another rule (None, None: the run's stored settings)."""
    from healthbench.defaults import PANEL_RULES

    if panel is not None and panel not in PANEL_RULES:
        raise ConfigError(f"--panel {panel!r}: choose one of {', '.join(PANEL_RULES)}")
    if calibrate_with and panel not in (None, "calibrated"):
        raise ConfigError(
            f"--calibrate-with weighs the calibrated rule's members: drop it or use --panel calibrated, not {panel}"
        )
    if not calibrate_with:
        return panel, None
    from healthbench.results.calibration import load_calibration

    return "calibrated", load_calibration(store, calibrate_with)
