"""`healthbench import`: re-score a simple-evals ``_allresults.json`` with our scoring, and re-export it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from healthbench.atomic import refuse_overwriting_inputs
from healthbench.cli.app import app, console, handles_errors, say
from healthbench.cli.options import (
    LengthCenter,
    LengthPenalty,
    ResamplesOpt,
    SeedOpt,
    length_adjustment,
)
from healthbench.cli.summary_view import render_summary
from healthbench.defaults import DEFAULT_RESAMPLES, DEFAULT_SEED
from healthbench.errors import ConfigError
from healthbench.results.summary import summary_of
from healthbench.store.location import store_file


@app.command("import")
@handles_errors
def import_allresults(
    file: Annotated[Path, typer.Argument(help="A simple-evals HealthBench _allresults.json file.")],
    data: Annotated[
        list[Path] | None,
        typer.Option("--data", help="Dataset JSONL the run used, for example tags (repeatable)."),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            help="Dataset variant the run used (full, hard, consensus); downloaded once if not cached.",
        ),
    ] = None,
    allow_untagged: Annotated[
        bool,
        typer.Option(
            "--allow-untagged",
            help="Keep examples whose prompt_id is not in the dataset, "
            "without example tags (their theme metrics are then partial).",
        ),
    ] = False,
    metrics_out: Annotated[
        Path | None, typer.Option("--metrics-out", help="Write the flat metrics JSON here.")
    ] = None,
    export: Annotated[
        Path | None, typer.Option("--export", help="Write the re-scored _allresults.json here.")
    ] = None,
    html: Annotated[bool, typer.Option("--html", help="Include short per-sample HTML in --export.")] = False,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
    cache: Annotated[Path | None, typer.Option("--cache-dir", help="Download cache for --dataset.")] = None,
    length_center: LengthCenter = None,
    length_penalty: LengthPenalty = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Also keep the imported run in this run store, a path or SQLAlchemy URL (then regrade, analyse or serve it like any run).",
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Name of the stored run with --store (default generated).")
    ] = None,
) -> None:
    """Re-score FILE (simple-evals' rules, our bootstrap), print the summary, write the outputs.

    The file stores no example tags: theme: and physician_agreed_category: metrics need the dataset,
    given by --data and/or --dataset and joined on prompt_id (rubrics must match).
    """
    from healthbench.results.rescore import rescore_allresults
    from healthbench.scoring.run_score import ScoringOptions

    if name is not None and store is None:
        raise ConfigError("--name names the run kept with --store; give --store too")
    center, penalty = length_adjustment(length_center, length_penalty)
    refuse_overwriting_inputs(
        {"--metrics-out": metrics_out, "--export": export},
        [file, *(data or []), store_file(store) if store is not None else None],
    )
    rescored = rescore_allresults(
        file,
        data=data or [],
        dataset=dataset,
        cache=cache,
        allow_untagged=allow_untagged,
        options=ScoringOptions(
            n_resamples=DEFAULT_RESAMPLES if n_resamples is None else n_resamples,
            seed=DEFAULT_SEED if seed is None else seed,
            length_center=center,
            length_penalty=penalty,
        ),
        # the texts (completions, usage, explanations) only where an output or the length adjustment reads them
        texts=export is not None or store is not None or center is not None,
    )
    run_score, a = rescored.run_score, rescored.agreement
    render_summary(summary_of(run_score), title=f"{file.name} (re-scored)", console=console)
    say(
        f"agreement with the file: {a.equal}/{a.compared} means and n_samples equal, top-level score "
        f"{'equal' if a.same_score else 'differs'} (bootstrap std not compared: it is random)"
    )
    if rescored.untagged:
        effect = "cover only the joined examples" if rescored.joined else "are left out"
        say(
            f"{rescored.untagged} of {rescored.n_samples} examples have no dataset entry, so no "
            f"example tags: their theme: and physician_agreed_category: metrics {effect} (see --data, --dataset)",
            style="yellow",
        )
    if metrics_out is not None:
        from healthbench.results.metrics_out import write_metrics

        say(f"metrics: {write_metrics(metrics_out, run_score.metrics())}")
    if export is not None:
        from healthbench.results.simple_evals import write_allresults

        say(f"export: {write_allresults(export, rescored.samples, run_score, html=html)}")
    if store is not None:
        # Imported here: the store (SQLAlchemy) and the runner are not needed to re-score a file.
        from healthbench.data.sources import sha256_of
        from healthbench.runner.imported import store_imported
        from healthbench.runner.run import new_run_name
        from healthbench.store import Store

        source = {"source": "local", "path": str(file), "sha256": sha256_of(file)}
        target = Store(store)
        run = store_imported(target, name or new_run_name("import"), rescored.samples, source=source)
        say(f"stored as run {run.name} in {target.url}")
