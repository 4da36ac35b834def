"""`healthbench report`: one self-contained HTML report (and optional figures) from runs or files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from healthbench.atomic import check_folder, refuse_overwriting_inputs
from healthbench.cli.analysis_cmd import AllowUntaggedOpt, CacheOpt, DataOpt, DatasetOpt, _load
from healthbench.cli.app import app, console, handles_errors
from healthbench.cli.options import ResamplesOpt, SeedOpt, StoreOpt
from healthbench.errors import StoreMissingError
from healthbench.store.location import store_file


@app.command("report")
@handles_errors
def report_command(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Stored run names and/or simple-evals _allresults.json files or folders of them; a meta-eval run adds which judge to pay for.",
            metavar="RUN_OR_FILE...",
            show_default=False,
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    figures: Annotated[
        Path | None,
        typer.Option("--figures", help="Also write PNG and SVG charts for papers into this folder."),
    ] = None,
    data: DataOpt = None,
    dataset: DatasetOpt = None,
    allow_untagged: AllowUntaggedOpt = False,
    conversations: Annotated[
        bool,
        typer.Option(
            "--conversations/--no-conversations",
            help="Embed every conversation for the browser (each full run adds ~11 MB); --no-conversations keeps charts and tables only.",
        ),
    ] = True,
    title: Annotated[str, typer.Option("--title", help="Title of the report.")] = "HealthBench report",
    store: StoreOpt = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
    cache: CacheOpt = None,
) -> None:
    """Write one self-contained HTML report (scores, charts, conversation browser) that works offline.

    Scores with CIs, theme and axis charts, the score distribution, coverage, tokens and cost, a
    paired comparison when two models (or two runs) are given, and a browser of every conversation
    with its grades. A stored meta-eval run adds "Which judge to pay for": each judge's and panel
    rule's F1 against physicians beside its cost, by theme and on a chart. See docs/report.md.
    """
    from healthbench.analysis.report import build_report, default_comparison
    from healthbench.scoring.run_score import ScoringOptions

    refuse_overwriting_inputs({"--output": output}, [*inputs, *(data or []), store_file(store)])
    if figures is not None:  # checked before the report is written
        from healthbench.analysis.figures import require_matplotlib

        require_matplotlib()
        check_folder("--figures", figures)
    defaults = ScoringOptions()
    options = ScoringOptions(
        n_resamples=defaults.n_resamples if n_resamples is None else n_resamples,
        seed=defaults.seed if seed is None else seed,
    )
    specs, judge_choices = _meta_evals(inputs, store)
    runs = (
        _load(specs, store=store, data=data, dataset=dataset, allow_untagged=allow_untagged, cache=cache)
        if specs or not judge_choices
        else []
    )
    comparison = default_comparison(runs, options)
    for warning in comparison.warnings if comparison else ():
        _say(f"warning: {warning}", style="yellow")
    report = build_report(
        runs,
        options=options,
        title=title,
        comparison=comparison,
        conversations=conversations,
        judge_choices=judge_choices,
    )
    path = report.write(output)
    answers = sum(run.score.n_samples for run in report.runs)
    meta = f", {len(judge_choices)} meta-eval runs" if judge_choices else ""
    _say(
        f"report: {path} ({path.stat().st_size / 1e6:.1f} MB, {len(report.runs)} runs, {answers} answers{meta})"
    )
    if figures is not None:
        for written in report.write_figures(figures):
            _say(f"figure: {written}")


def _meta_evals(inputs: list[str], store: str | None) -> tuple[list[str], list[dict[str, Any]]]:
    """The inputs that name stored meta-eval runs, measured for the report's "Which judge to pay for",
    and the rest (`healthbench.analysis.report_judges.stored_meta_evals`)."""
    from healthbench.analysis.inputs import needs_store

    if not needs_store(inputs):
        return list(inputs), []
    from healthbench.analysis.report_judges import stored_meta_evals
    from healthbench.store import Store

    try:
        opened = Store(store, create=False)
    except StoreMissingError:
        return list(inputs), []  # (loading the rest says where the store was looked for)
    return stored_meta_evals(inputs, opened)


def _say(text: str, style: str | None = None) -> None:
    console.print(text, style=style, highlight=False, markup=False, soft_wrap=True)
