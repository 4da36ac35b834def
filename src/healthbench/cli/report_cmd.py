"""`healthbench report`: one self-contained HTML report (and optional figures) from runs or files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from healthbench.cli.app import app, console, handles_errors
from healthbench.cli.options import ResamplesOpt, SeedOpt, StoreOpt


@app.command("report")
@handles_errors
def report_command(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="Stored run names and/or simple-evals _allresults.json files or folders of them.",
            metavar="RUN_OR_FILE...",
            show_default=False,
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    figures: Annotated[
        Path | None,
        typer.Option("--figures", help="Also write PNG and SVG charts for papers into this folder."),
    ] = None,
    data: Annotated[
        list[Path] | None,
        typer.Option(
            "--data", help="Dataset JSONL the runs used, for themes of _allresults.json files (repeatable)."
        ),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="Title of the report.")] = "HealthBench report",
    store: StoreOpt = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
) -> None:
    """Write one HTML file that works offline: scores with CIs, theme and axis charts, the score
    distribution, coverage, tokens and cost, and a browser of every conversation with its grades."""
    from healthbench.analysis.report import build_report
    from healthbench.scoring.run_score import ScoringOptions

    runs = _inputs(inputs, data or [], store)
    defaults = ScoringOptions()
    options = ScoringOptions(
        n_resamples=defaults.n_resamples if n_resamples is None else n_resamples,
        seed=defaults.seed if seed is None else seed,
    )
    report = build_report(runs, options=options, title=title)
    path = report.write(output)
    conversations = sum(run.score.n_samples for run in report.runs)
    _say(
        f"report: {path} ({path.stat().st_size / 1e6:.1f} MB, {len(report.runs)} runs, {conversations} answers)"
    )
    if figures is not None:
        for written in report.write_figures(figures):
            _say(f"figure: {written}")


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _inputs(names: list[str], data: list[Path], store: Path | None) -> list[Any]:
    """Each input as (model, run_id, samples): a path is a simple-evals file (or a folder of them),
    anything else a stored run's name."""
    from dataclasses import dataclass

    from healthbench.cli.interop_cmd import _dataset
    from healthbench.errors import DataError
    from healthbench.results.run_results import graded_samples
    from healthbench.results.simple_evals import read_allresults
    from healthbench.store import Store

    @dataclass(frozen=True)
    class Loaded:
        model: str
        run_id: str
        samples: list[Any]

    conversations = _dataset(data, None, None)
    loaded: list[Any] = []
    opened: Store | None = None
    for name in names:
        path = Path(name)
        if path.exists():
            files = sorted(path.glob("*_allresults.json")) if path.is_dir() else [path]
            if not files:
                raise DataError("no *_allresults.json file in this folder", path=name)
            for file in files:
                samples = read_allresults(file, conversations, allow_missing=True)
                loaded.append(Loaded(file.name.removesuffix("_allresults.json"), "", samples))
        else:
            opened = opened or Store(store)
            run = opened.require_run(name)
            loaded.append(
                Loaded(
                    str(run.config.get("model", {}).get("spec", name)), run.name, graded_samples(opened, run)
                )
            )
    return loaded
