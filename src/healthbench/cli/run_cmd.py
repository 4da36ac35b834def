"""`healthbench run` and `regrade`: thin wrappers over healthbench.runner (the shared skeleton:
`healthbench.cli.run_flow`; the scores and files at the end: `healthbench.cli.eval_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from healthbench.atomic import refuse_overwriting_inputs
from healthbench.cli.app import app, console, err_console, handles_errors
from healthbench.cli.option_groups import (
    Bootstrap,
    CallOptions,
    CandidateOptions,
    JudgeOptions,
    RayOptions,
    RunControl,
    ScoreFiles,
    TraceOptions,
    takes_groups,
)
from healthbench.cli.options import (
    CacheDir,
    ConfigFile,
    LengthCenter,
    LengthPenalty,
    MlflowOpt,
    StoreOpt,
)
from healthbench.defaults import OFFLINE_MODEL

if TYPE_CHECKING:  # the rest is imported by the commands that use it (`run --help` stays light)
    from healthbench.config import RunConfig
    from healthbench.store import Store


def _dry_run(store: Store, config: RunConfig, name: str | None) -> None:
    from healthbench.cli.dry_run import print_estimate
    from healthbench.runner import run as runner

    n_conversations, rows = runner.dry_run(store, config, name)
    print_estimate(
        f"dry run: {n_conversations} conversations × {config.n_repeats} repeats (no call made)", rows
    )


def _professional_line(cfg: RunConfig) -> str | None:
    """The line naming the HealthBench Professional settings of a run of a Professional file."""
    from healthbench.data.professional import PROFESSIONAL, describe_professional, file_format

    if cfg.data is None or file_format(Path(cfg.data)) != PROFESSIONAL:
        return None
    scoring = cfg.scoring
    return describe_professional(
        cfg.judge.spec, cfg.judge.settings.reasoning_effort, scoring.length_center, scoring.length_penalty
    )


@app.command("run")
@handles_errors
@takes_groups
def run_command(
    ctx: typer.Context,
    *,
    candidate: CandidateOptions,
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            show_default=False,
            help=f"Judge model spec (same syntax). Default {OFFLINE_MODEL}. Repeat it for a panel of "
            "judges (the first is the chair): every judge grades every criterion.",
        ),
    ] = None,
    judging: JudgeOptions,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "-d",
            show_default=False,
            help="full, hard, consensus or demo (default demo: offline).",
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", help="A local JSONL file in HealthBench format instead of the download."),
    ] = None,
    data_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Format of --data: classic or professional (HealthBench Professional: upstream's grader "
            "and length adjustment by default). Default: detected from the file.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", help="Run N conversations, chosen as simple-evals does (random.Random(0).sample)."
        ),
    ] = None,
    ids: Annotated[
        list[str] | None, typer.Option("--ids", help="Only these prompt_ids (repeatable or comma-separated).")
    ] = None,
    theme: Annotated[
        list[str] | None,
        typer.Option(
            "--theme", help="Only conversations with this theme (repeatable), e.g. emergency_referrals."
        ),
    ] = None,
    n_repeats: Annotated[
        int | None,
        typer.Option("--n-repeats", show_default=False, help="Sample each conversation K times (default 1)."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Run name (default generated). An existing name is continued."),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Continue run NAME with its stored settings (grades what is missing or ungraded).",
        ),
    ] = None,
    config: ConfigFile = None,
    store: StoreOpt = None,
    calls: CallOptions,
    cache_dir: CacheDir = None,
    ray: RayOptions,
    length_center: LengthCenter = None,
    length_penalty: LengthPenalty = None,
    bootstrap: Bootstrap,
    completions: Annotated[
        str | None,
        typer.Option(
            "--completions",
            help="Grade the dataset's own completions instead of a model's: physician (the physicians' "
            "ideal completions) or references (the 4 reference model completions they saw). No --model.",
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            help="Physician group for --completions: 'Group 1' / no_reference, 'Group 2' / "
            "aug_2024_reference, 'Group 3' / apr_2025_reference (default: each group, one run each).",
        ),
    ] = None,
    control: RunControl,
    files: ScoreFiles,
    mlflow: MlflowOpt = False,
    traces: TraceOptions,
) -> None:
    """Sample a model on HealthBench, grade every rubric criterion with a judge, and report the scores."""
    from healthbench.cli.config_flags import config_layer, refuse_with_resume
    from healthbench.cli.eval_report import finish_eval
    from healthbench.cli.run_flow import resume_to_end, start_to_end
    from healthbench.config import build_config, load_config_file
    from healthbench.executors.ray import require_ray
    from healthbench.results.mlflow_log import require_mlflow
    from healthbench.results.views import RunView
    from healthbench.runner import run as runner
    from healthbench.store import Store
    from healthbench.store.location import store_file

    if mlflow and not control.dry_run:  # before any model call
        require_mlflow()
    refuse_overwriting_inputs(
        {"--metrics-out": files.metrics_out, "--allresults-out": files.allresults_out},
        [store_file(store), data, config, calls.prices, judging.grader_template],
    )
    s = Store(store, create=resume is None)  # a run is resumed from a store that exists
    if ray.executor == "ray" and not control.dry_run:
        require_ray()
    if resume is not None:
        refuse_with_resume(ctx, also=("data_format",))
        if control.dry_run:
            _dry_run(s, RunView.open(s, resume).config, resume)
            return
        with traces.tracing() as tracing:
            outcome = resume_to_end(ctx, s, resume, runner.EVAL, store_flag=store, tracing=tracing)
        finish_eval(
            s, outcome, files, strict=control.strict, bootstrap=bootstrap, store_flag=store, mlflow=mlflow
        )
        return
    defaults: dict[str, Any] = {"model": {"spec": OFFLINE_MODEL}, "judge": {"spec": OFFLINE_MODEL}}
    file_layer = load_config_file(config) if config else {}
    cfg = build_config(file_layer, config_layer(ctx.params), defaults=defaults, data_format=data_format)
    if (line := _professional_line(cfg)) is not None:
        console.print(Text(line))
    if cfg.completions is not None:
        _baselines(s, cfg, name, files, control, mlflow=mlflow)
        return
    if control.dry_run:
        _dry_run(s, cfg, name)
        return
    with traces.tracing() as tracing:
        outcome = start_to_end(s, cfg, name, runner.EVAL, store_flag=store, tracing=tracing)
    finish_eval(s, outcome, files, strict=control.strict, store_flag=store, mlflow=mlflow)


def _baselines(
    s: Store, cfg: RunConfig, name: str | None, files: ScoreFiles, control: RunControl, *, mlflow: bool
) -> None:
    """One baseline run per group (or its estimate); with several groups, each output file gets the
    group's short name."""
    from healthbench.cli.dry_run import print_estimate
    from healthbench.cli.eval_report import finish_eval
    from healthbench.cli.progress import DownloadBar, run_progress
    from healthbench.runner.baselines import estimate_baselines, run_baselines

    if control.dry_run:
        for planned in estimate_baselines(s, cfg, name):
            title = (
                f"dry run of {planned.run_name}: {planned.completions} completions × {cfg.n_repeats} repeats"
            )
            print_estimate(f"{title} (no call made)", planned.rows)
        return
    with run_progress(console, label="completions given") as progress:
        results = run_baselines(
            cfg, store=s, name=name, progress=progress, download_progress=DownloadBar(err_console)
        )
    for result in results:
        group, selection = result.group, result.selection
        console.print(
            Text(
                f"{result.outcome.run.name}: {cfg.completions} completions of {group.name} "
                f"({group.short_name}): {result.outcome.run.config['dataset']['conversations']} graded of "
                f"{selection.completions} completions from {selection.matching} rows; "
                f"{selection.skipped} rows of the group have none (skipped)"
            )
        )
        suffix = "" if len(results) == 1 else group.short_name
        group_files = ScoreFiles(
            metrics_out=suffixed(files.metrics_out, suffix),
            allresults_out=suffixed(files.allresults_out, suffix),
        )
        finish_eval(s, result.outcome, group_files, strict=control.strict, mlflow=mlflow)


ALLRESULTS_END = "_allresults.json"  # what `analyze DIR` picks up: the suffix stays last


def suffixed(path: Path | None, suffix: str) -> Path | None:
    """``path`` with ``-suffix`` before its extension, or before ``_allresults.json`` so that a
    simple-evals export still ends in it (``X_allresults.json`` -> ``X-suffix_allresults.json``)."""
    if path is None or not suffix:
        return path
    if path.name.endswith(ALLRESULTS_END):
        return path.with_name(f"{path.name.removesuffix(ALLRESULTS_END)}-{suffix}{ALLRESULTS_END}")
    return path.with_name(f"{path.stem}-{suffix}{path.suffix}")


@app.command("regrade")
@handles_errors
@takes_groups
def regrade_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="The run whose samples are graded again.")],
    *,
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            show_default=False,
            help="Judge model spec (required without --profile or --add-judge/--drop-judge); repeat it "
            "for a panel of judges: every criterion is graded anew by each.",
        ),
    ] = None,
    add_judge: Annotated[
        list[str] | None,
        typer.Option(
            "--add-judge",
            show_default=False,
            help="Grow the run's panel by this judge (repeatable; the per-judge flags apply to the new "
            "judges): the members' grades are copied, only the new judges are asked.",
        ),
    ] = None,
    drop_judge: Annotated[
        list[str] | None,
        typer.Option(
            "--drop-judge",
            show_default=False,
            help="Leave this judge (its spec) out of the run's panel (repeatable): the others' grades are "
            "copied, no call is made.",
        ),
    ] = None,
    judging: JudgeOptions,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="Name of the new run (default generated); an existing regrade is continued."
        ),
    ] = None,
    store: StoreOpt = None,
    calls: CallOptions,
    control: RunControl,
    files: ScoreFiles,
    mlflow: MlflowOpt = False,
    traces: TraceOptions,
) -> None:
    """Grade an existing run's answers with another judge or template, without re-sampling."""
    from healthbench.cli.config_flags import config_layer
    from healthbench.cli.dry_run import print_estimate
    from healthbench.cli.eval_report import finish_eval
    from healthbench.cli.run_flow import carry_out
    from healthbench.executors.progress import ProgressSink
    from healthbench.results.mlflow_log import require_mlflow
    from healthbench.runner import run as runner
    from healthbench.store import Store

    if mlflow and not control.dry_run:  # before any model call
        require_mlflow()
    s = Store(store, create=False)  # the run regraded is in it: a store that does not exist is refused
    from healthbench.errors import ConfigError

    if add_judge and judge:
        raise ConfigError("--judge names a new panel, --add-judge grows the run's: give one or the other")
    # --add-judge's judges take the per-judge flags as --judge's would (the candidate's settings stay
    # the parent's)
    overrides = config_layer({**ctx.params, "judge": add_judge or judge}, candidate=False)
    one, panel = overrides.pop("judge", None), overrides.pop("judges", None)
    given = panel or ([one] if one else [])
    judges: Any = None if add_judge else given or None
    changes: dict[str, Any] = {"add_judges": given if add_judge else [], "drop_judges": drop_judge or []}
    if control.dry_run:
        config, n_conversations, rows = runner.regrade_dry_run(s, source, judges, overrides, **changes)
        print_estimate(
            f"dry run: {n_conversations} conversations × {config.n_repeats} repeats (no call made)", rows
        )
        return
    new_name = name or runner.new_run_name("regrade")

    with traces.tracing() as tracing:
        observer = None if tracing is None else tracing.observer()

        def step(progress: ProgressSink) -> runner.RunOutcome:
            return runner.regrade(
                source,
                judges,
                store=s,
                name=new_name,
                overrides=overrides,
                progress=progress,
                observer=observer,
                **changes,
            )

        outcome = carry_out(
            s, new_name, step, kind="eval", store_flag=store, label="answers reused", tracing=tracing
        )
    finish_eval(s, outcome, files, strict=control.strict, store_flag=store, mlflow=mlflow)
