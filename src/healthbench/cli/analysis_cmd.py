"""`healthbench analyze` (multi-run tables) and `healthbench compare` (a paired comparison, with an exit
code a CI job can gate on). The library does the work (`healthbench.analysis`); heavy imports are made
inside the commands so that `healthbench --help` stays fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from healthbench.atomic import check_folder
from healthbench.cli.app import app, console, handles_errors
from healthbench.cli.options import ResamplesOpt, SeedOpt, StoreOpt, below_one
from healthbench.errors import StoreMissingError

if TYPE_CHECKING:
    from healthbench.analysis.compare import Comparison, GateDecision
    from healthbench.analysis.inputs import LoadedRun
    from healthbench.scoring.stats import BootstrapOptions

WORSE_EXIT_CODE = 3  # `compare --fail-if-worse-by` / `--require-non-inferiority`: a gate failed

InputsArg = Annotated[
    list[str],
    typer.Argument(
        help="_allresults.json files, folders of them, stored run names or glob patterns over run names.",
        show_default=False,
    ),
]
DataOpt = Annotated[
    list[Path] | None,
    typer.Option("--data", help="Dataset JSONL the runs used, for example tags of files (repeatable)."),
]
DatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset", help="Dataset variant the files used (full, hard, consensus), for their example tags."
    ),
]
AllowUntaggedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-untagged", help="Keep examples of files that are not in the dataset, without example tags."
    ),
]
CacheOpt = Annotated[Path | None, typer.Option("--cache-dir", help="Download cache for --dataset.")]


def _load(
    specs: list[str],
    *,
    store: str | None,
    data: list[Path] | None,
    dataset: str | None,
    allow_untagged: bool,
    cache: Path | None,
    model: str | None = None,
    run_id: str | None = None,
    texts: bool = True,
) -> list[LoadedRun]:
    """Load the inputs; the store is opened (and loaded) only when an input is not a file or folder.
    Without ``texts`` files are read without completions, usage and explanations (`load_inputs`)."""
    from healthbench.analysis.inputs import load_inputs, needs_store, only_paths_missing

    conversations, data_sha = None, None
    if data or dataset is not None:  # (the dataset readers, and their records' schema, load only then)
        from healthbench.data.sources import join_datasets, sha256_of

        conversations = join_datasets(data or [], dataset, cache)
        data_sha = sha256_of(data[0]) if data and len(data) == 1 and dataset is None else None
    opened = None
    if needs_store(specs):  # (SQLAlchemy is loaded only then)
        from healthbench.store import Store

        try:
            opened = Store(store, create=False)
        except StoreMissingError:
            if not only_paths_missing(specs):
                raise  # a run name without a store: the error names where the store was looked for
    return load_inputs(
        specs,
        store=opened,
        data=conversations,
        data_sha256=data_sha,
        allow_untagged=allow_untagged,
        model=model,
        run_id=run_id,
        texts=texts,
    )


@app.command("analyze")
@handles_errors
def analyze(
    inputs: InputsArg,
    out: Annotated[Path, typer.Option("--out", help="Folder for the tables (created if needed).")],
    data: DataOpt = None,
    dataset: DatasetOpt = None,
    allow_untagged: AllowUntaggedOpt = False,
    store: StoreOpt = None,
    parquet: Annotated[
        bool, typer.Option("--parquet", help="Write Parquet files instead of TSV / CSV.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name for every input (default: from file names).")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id of the single input run (default: from its name).")
    ] = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
    cache: CacheOpt = None,
) -> None:
    """Theme and axis tables with 95% CIs for many runs and models, written to --out.

    Also the run-to-run spread per model, worst-at-k per conversation and the granular criterion
    table (TSV / CSV, or Parquet). Definitions: docs/analysis.md.
    """
    check_folder("--out", out)
    runs = _load(
        inputs,
        store=store,
        data=data,
        dataset=dataset,
        allow_untagged=allow_untagged,
        cache=cache,
        model=model,
        run_id=run_id,
        texts=False,  # (the tables read verdicts, rubrics and tags only)
    )
    from healthbench.analysis.analyze import analyze as run_analysis
    from healthbench.analysis.analyze import write_analysis
    from healthbench.cli.analysis_view import render_analysis

    result = run_analysis(runs, _bootstrap_options(seed, n_resamples))
    render_analysis(result, console)
    for path in write_analysis(result, out, parquet=parquet).values():
        console.print(f"wrote {path}", highlight=False, markup=False, soft_wrap=True)


@app.command("compare")
@handles_errors
def compare(
    a: Annotated[str, typer.Argument(help="Baseline: a file, folder, stored run or pattern (runs pooled).")],
    b: Annotated[str, typer.Argument(help="Candidate compared with A, same forms.")],
    data: DataOpt = None,
    dataset: DatasetOpt = None,
    allow_untagged: AllowUntaggedOpt = False,
    store: StoreOpt = None,
    margin: Annotated[
        float,
        typer.Option(
            "--margin",
            callback=below_one,
            help="Smallest difference that counts as better or worse (0 to below 1).",
        ),
    ] = 0.0,
    fail_if_worse_by: Annotated[
        float | None,
        typer.Option(
            "--fail-if-worse-by",
            callback=below_one,
            help=f"Exit {WORSE_EXIT_CODE} if B is worse than A by more than this and the CI lies below 0 "
            "(0 to below 1).",
        ),
    ] = None,
    require_non_inferiority: Annotated[
        float | None,
        typer.Option(
            "--require-non-inferiority",
            callback=below_one,
            help=f"Exit {WORSE_EXIT_CODE} unless the CI's lower bound of B - A is above minus this "
            "(0 to below 1).",
        ),
    ] = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
    cache: CacheOpt = None,
) -> None:
    """Paired comparison of B against A, with an exit code a CI job can gate on.

    On the conversations both graded: the difference of means with a paired bootstrap 95% CI and a
    p-value, overall, per theme and per axis; flipped conversations; a verdict (better / worse / no
    difference). Several runs on one side are pooled as repeats. See docs/analysis.md.
    """
    from healthbench.analysis.analyze import setting_warnings
    from healthbench.analysis.compare import compare_runs, same_input_warning
    from healthbench.analysis.inputs import merge_runs
    from healthbench.cli.analysis_view import render_comparison

    sides = []
    warnings: list[str] = []
    if a != b and Path(a).exists() and Path(b).exists() and os.path.samefile(a, b):
        warnings.append(same_input_warning(a))  # one file by two paths (one path: compare_runs says so)
    for spec in (a, b):
        runs = _load(
            [spec], store=store, data=data, dataset=dataset, allow_untagged=allow_untagged, cache=cache
        )
        warnings.extend(f"{spec}: {w}" for w in setting_warnings(runs))
        sides.append(merge_runs(runs))
    result = compare_runs(sides[0], sides[1], _bootstrap_options(seed, n_resamples), margin=margin)
    gates = result.gates(fail_if_worse_by=fail_if_worse_by, require_non_inferiority=require_non_inferiority)
    render_comparison(result, console, extra_warnings=warnings, gates=gates)
    failed = [g for g in gates if not g.passed]
    if failed:
        _fail_gate(result, failed)


def _fail_gate(result: Comparison, failed: list[GateDecision]) -> None:
    from healthbench.cli.app import fail

    rules = "; ".join(f"{g.option} {g.threshold:g} {g.rule}" for g in failed)
    raise fail(f"{result.b} against {result.a}: gate failed: {rules}", WORSE_EXIT_CODE)


def _bootstrap_options(seed: int | None, n_resamples: int | None) -> BootstrapOptions:
    """The bootstrap of --seed and --n-resamples (defaults for those not given)."""
    from healthbench.scoring.stats import BootstrapOptions

    defaults = BootstrapOptions()
    return BootstrapOptions(
        n_resamples=defaults.n_resamples if n_resamples is None else n_resamples,
        seed=defaults.seed if seed is None else seed,
    )
