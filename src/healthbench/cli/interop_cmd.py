"""`healthbench import`: re-score a simple-evals ``_allresults.json`` with our scoring, and re-export it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from healthbench.cli.app import app, console, handles_errors, say
from healthbench.data.schema import Conversation
from healthbench.data.sources import load_conversations, sha256_of
from healthbench.errors import ConfigError, DataError
from healthbench.results.metrics_out import write_metrics
from healthbench.results.simple_evals import load_allresults, write_allresults
from healthbench.results.summary import render_summary
from healthbench.runner.imported import store_imported
from healthbench.runner.run import new_run_name
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from healthbench.store import Store


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
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = DEFAULT_SEED,
    n_resamples: Annotated[
        int, typer.Option("--n-resamples", min=0, help="Bootstrap resamples (0 = no std / CI).")
    ] = DEFAULT_RESAMPLES,
    cache: Annotated[Path | None, typer.Option("--cache-dir", help="Download cache for --dataset.")] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Also keep the imported run in this run store (then regrade, analyse or serve it like any run).",
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
    conversations = _dataset(data or [], dataset, cache)
    stored = load_allresults(file, conversations, allow_missing=allow_untagged)
    run_score = score_run(stored.samples, ScoringOptions(n_resamples=n_resamples, seed=seed))
    render_summary(run_score, title=f"{file.name} (re-scored)", console=console)
    say(_agreement(stored.score, stored.metrics, run_score.metrics()))
    untagged = sum(
        1 for s in stored.samples if conversations is None or s.conversation.prompt_id not in conversations
    )
    if untagged:
        effect = "are left out" if conversations is None else "cover only the joined examples"
        say(
            f"{untagged} of {len(stored.samples)} examples have no dataset entry, so no example tags: "
            f"their theme: and physician_agreed_category: metrics {effect} (see --data, --dataset)",
            style="yellow",
        )
    if metrics_out is not None:
        say(f"metrics: {write_metrics(metrics_out, run_score.metrics())}")
    if export is not None:
        say(f"export: {write_allresults(export, stored.samples, run_score, html=html)}")
    if store is not None:
        source = {"source": "local", "path": str(file), "sha256": sha256_of(file)}
        run = store_imported(Store(store), name or new_run_name("import"), stored.samples, source=source)
        say(f"stored as run {run.name} in {store}")
    elif name is not None:
        raise ConfigError("--name names the run kept with --store; give --store too")


def _dataset(files: list[Path], variant: str | None, cache: Path | None) -> dict[str, Conversation] | None:
    """The conversations of every given dataset by prompt_id; a prompt_id given twice must agree."""
    if not files and variant is None:
        return None
    loaded: list[tuple[str, list[Conversation]]] = []
    for path in files:
        source, records = load_conversations(data=path)
        loaded.append((str(source.path), records))
    if variant is not None:
        source, records = load_conversations(variant, cache=cache)
        loaded.append((str(source.path), records))
    joined: dict[str, Conversation] = {}
    origin: dict[str, str] = {}
    for name, records in loaded:
        for record in records:
            known = joined.get(record.prompt_id)
            if known is not None and known.rubrics != record.rubrics:
                raise DataError(
                    f"prompt_id {record.prompt_id} has a different rubric in {origin[record.prompt_id]}"
                    "; give only the dataset the run used",
                    path=name,
                )
            joined.setdefault(record.prompt_id, record)
            origin.setdefault(record.prompt_id, name)
    return joined


def _agreement(score: float | None, stored: Mapping[str, Any], ours: Mapping[str, Any]) -> str:
    """How many of the file's means and n_samples we reproduce (bootstrap stds are random)."""
    keys = [k for k in stored if not k.endswith(":bootstrap_std")]
    equal = sum(1 for k in keys if _same(stored[k], ours.get(k)))
    same_score = "equal" if _same(score, ours.get("score")) else "differs"
    return (
        f"agreement with the file: {equal}/{len(keys)} means and n_samples equal, top-level score "
        f"{same_score} (bootstrap std not compared: it is random)"
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12)
    return bool(a == b)
