"""`healthbench run`, `regrade`, `runs`, `results`: thin wrappers over healthbench.runner and results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from healthbench.atomic import refuse_overwriting_inputs
from healthbench.cli.app import app, console, err_console, handles_errors, say
from healthbench.cli.options import (
    AllResultsOpt,
    Batch,
    BatchFallback,
    BatchPollInterval,
    CacheDir,
    ConfigFile,
    DryRun,
    Executor,
    GraderTemplate,
    JudgeBaseUrl,
    JudgeExtraBody,
    JudgeJson,
    JudgeKeyEnv,
    JudgeMaxTokens,
    JudgeReasoning,
    JudgeRetries,
    JudgeSystemMessage,
    JudgeTemperature,
    LengthCenter,
    LengthPenalty,
    MaxConnections,
    MaxOutage,
    MaxRetries,
    MetricsOutOpt,
    MlflowOpt,
    Prices,
    Profile,
    RayAddress,
    RayConnectTimeout,
    ResamplesOpt,
    Rpm,
    SeedOpt,
    StoreOpt,
    Strict,
    Timeout,
    Tpm,
    VllmEngineArg,
)
from healthbench.defaults import OFFLINE_MODEL
from healthbench.errors import RunError, StoreMissingError, a_kind

if TYPE_CHECKING:  # the rest is imported by the commands that use it (`run --help` stays light)
    from healthbench.config import RunConfig
    from healthbench.runner import run as runner
    from healthbench.scoring.run_score import RunScore
    from healthbench.store import RunRecord, Store

SMOKE_WARNING = (
    "The judge is a local 135M-parameter model: this run is a smoke test of the pipeline, not a "
    "measurement. Its verdicts are no better than a constant; use a real judge (e.g. --judge "
    "openai/gpt-4.1) for numbers you can compare."
)


def _report(
    store: Store,
    run: RunRecord,
    *,
    metrics_out: Path | None,
    allresults_out: Path | None,
    seed: int | None,
    n_resamples: int | None,
    strict: bool,
    counters_line: str | None = None,
    aggregate_out: Path | None = None,
    row_scores_out: Path | None = None,
    extra_metrics: Mapping[str, Any] | None = None,
    inspect_log_out: Path | None = None,
    mlflow: bool = False,
) -> RunScore:
    from healthbench.cli.summary_view import render_summary
    from healthbench.results.aggregate import aggregate_document, write_aggregate_scores
    from healthbench.results.metrics_out import metrics_document, write_metrics
    from healthbench.results.rows import iter_row_scores, write_row_scores
    from healthbench.results.simple_evals import write_allresults
    from healthbench.results.views import RunView
    from healthbench.runner import run as runner

    view = RunView.of(store, run).require_kind("eval")
    options = view.scoring_options(seed=seed, n_resamples=n_resamples)
    samples = view.graded_samples()
    score = view.score_samples(samples, options)
    judge = view.judge_spec
    missing, expected = runner.unanswered(store, run)
    title = f"run {run.name} · judge {judge} · {view.describe_provenance()}"
    if missing:  # never shown as if it were the run's score
        title = f"PARTIAL: {expected - missing} of {expected} conversations answered, not the run's score · {title}"
    render_summary(score, title=title, console=console)
    if counters_line:
        say(counters_line)
    if judge.startswith("local/"):
        say(f"note: {SMOKE_WARNING}", style="yellow", stderr=True)
    extra = [extra_metrics] if extra_metrics is not None else []
    metrics = metrics_document(score.metrics(), *extra, provenance=view.provenance())
    if metrics_out is not None:
        write_metrics(metrics_out, metrics)
        say(f"metrics written to {metrics_out}")
    if allresults_out is not None:
        write_allresults(allresults_out, samples, score, provenance=view.provenance())
        say(f"simple-evals export written to {allresults_out}")
    if aggregate_out is not None:
        write_aggregate_scores(aggregate_out, aggregate_document(run.name, samples, score))
        say(f"aggregate scores written to {aggregate_out}")
    if inspect_log_out is not None:
        from healthbench.results.inspect_log import write_inspect_log

        write_inspect_log(inspect_log_out, view, score, metrics)
        say(f"Inspect log written to {inspect_log_out}")
    if mlflow:
        from healthbench.analysis.inputs import stored_run
        from healthbench.analysis.report import build_report
        from healthbench.results.mlflow_log import log_to_mlflow

        report = build_report(
            [stored_run(view, samples)], options=options, title=f"HealthBench run {run.name}"
        )
        logged = log_to_mlflow(view, samples, score, metrics, report=report)
        say(
            f"logged to MLflow: run {logged.run_id} in experiment {logged.experiment!r} at {logged.tracking_uri}"
        )
    if row_scores_out is not None:
        del samples  # the rows stream from the store
        _, count = write_row_scores(row_scores_out, iter_row_scores(store, run.name, options))
        say(f"{count} row scores written to {row_scores_out}")
    if score.ungraded_criteria:
        message = (
            f"{score.ungraded_criteria} criteria ungraded in {score.ungraded_samples} conversations "
            f"(left out of the scores); `healthbench run --resume {run.name}` grades them"
        )
        if strict:
            raise RunError(f"--strict: {message}")
        say(f"warning: {message}", style="yellow", stderr=True)
    return score


def _dry_run(store: Store, config: RunConfig, name: str | None) -> None:
    from healthbench.cli.dry_run import print_estimate
    from healthbench.runner import run as runner

    n_conversations, rows = runner.dry_run(store, config, name)
    print_estimate(
        f"dry run: {n_conversations} conversations × {config.n_repeats} repeats (no call made)", rows
    )


@app.command("run")
@handles_errors
def run_command(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            show_default=False,
            help=f"Candidate model spec: openai/NAME, anthropic/NAME, local/smollm2, or NAME with --base-url. Default {OFFLINE_MODEL}.",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible endpoint of the candidate (vLLM, llama.cpp server, Ollama ...).",
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="Environment variable holding the candidate's API key."),
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="Candidate sampling temperature.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Candidate max output tokens.")
    ] = None,
    system_message: Annotated[
        str | None, typer.Option("--system-message", help="System message sent before each conversation.")
    ] = None,
    reasoning_effort: Annotated[
        str | None,
        typer.Option(
            "--reasoning-effort", help="Candidate reasoning effort (low/medium/high) for reasoning models."
        ),
    ] = None,
    extra_body: Annotated[
        str | None, typer.Option("--extra-body", help="JSON object merged into the candidate's request body.")
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            "-j",
            show_default=False,
            help=f"Judge model spec (same syntax). Default {OFFLINE_MODEL}.",
        ),
    ] = None,
    judge_base_url: JudgeBaseUrl = None,
    judge_api_key_env: JudgeKeyEnv = None,
    judge_temperature: JudgeTemperature = None,
    judge_max_tokens: JudgeMaxTokens = None,
    judge_reasoning_effort: JudgeReasoning = None,
    judge_extra_body: JudgeExtraBody = None,
    judge_system_message: JudgeSystemMessage = None,
    judge_json: JudgeJson = None,
    profile: Profile = None,
    timeout: Timeout = None,
    grader_template: GraderTemplate = None,
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
    max_connections: MaxConnections = None,
    rpm: Rpm = None,
    tpm: Tpm = None,
    max_retries: MaxRetries = None,
    max_outage: MaxOutage = None,
    batch: Batch = None,
    batch_fallback: BatchFallback = None,
    batch_poll_interval: BatchPollInterval = None,
    judge_retries: JudgeRetries = None,
    prices: Prices = None,
    cache_dir: CacheDir = None,
    executor: Executor = None,
    ray_address: RayAddress = None,
    ray_connect_timeout: RayConnectTimeout = None,
    vllm_engine_arg: VllmEngineArg = None,
    length_center: LengthCenter = None,
    length_penalty: LengthPenalty = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
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
    dry_run: DryRun = False,
    strict: Strict = False,
    metrics_out: MetricsOutOpt = None,
    allresults_out: AllResultsOpt = None,
    mlflow: MlflowOpt = False,
) -> None:
    """Sample a model on HealthBench, grade every rubric criterion with a judge, and report the scores."""
    from healthbench.cli.config_flags import config_layer, refuse_with_resume, resume_overrides
    from healthbench.cli.continuable import continuable
    from healthbench.cli.dry_run import print_estimate
    from healthbench.cli.progress import DownloadBar, run_progress
    from healthbench.config import build_config, load_config_file
    from healthbench.data.professional import PROFESSIONAL, describe_professional, file_format
    from healthbench.executors.ray import require_ray
    from healthbench.results.mlflow_log import require_mlflow
    from healthbench.results.views import RunView
    from healthbench.runner import run as runner
    from healthbench.runner.baselines import estimate_baselines
    from healthbench.store import Store
    from healthbench.store.location import store_file

    if mlflow and not dry_run:  # before any model call
        require_mlflow()
    refuse_overwriting_inputs(
        {"--metrics-out": metrics_out, "--allresults-out": allresults_out},
        [store_file(store), data, config, prices, grader_template],
    )
    s = Store(store, create=resume is None)  # a run is resumed from a store that exists
    if executor == "ray" and not dry_run:
        require_ray()
    if resume is not None:
        refuse_with_resume(ctx, also=("data_format",))
        if dry_run:
            _dry_run(s, RunView.open(s, resume).config, resume)
            return
        with continuable(s, resume, kind="eval", store_flag=store), run_progress(console) as progress:
            overrides = resume_overrides(ctx.params)
            outcome = runner.resume_run(resume, store=s, overrides=overrides, progress=progress)
        _finish(
            s,
            outcome,
            metrics_out,
            allresults_out,
            seed,
            n_resamples,
            strict,
            store_flag=store,
            mlflow=mlflow,
        )
        return
    defaults: dict[str, Any] = {"model": {"spec": OFFLINE_MODEL}, "judge": {"spec": OFFLINE_MODEL}}
    file_layer = load_config_file(config) if config else {}
    cfg = build_config(file_layer, config_layer(ctx.params), defaults=defaults, data_format=data_format)
    professional = cfg.data is not None and file_format(Path(cfg.data)) == PROFESSIONAL
    if professional:
        scoring = cfg.scoring
        line = describe_professional(
            cfg.judge.spec, cfg.judge.settings.reasoning_effort, scoring.length_center, scoring.length_penalty
        )
        console.print(Text(line))
    if cfg.completions is not None:
        if model is not None or base_url is not None:
            raise RunError("--completions grades the dataset's completions: no --model or --base-url")
        if dry_run:
            for planned in estimate_baselines(s, cfg, name):
                title = f"dry run of {planned.run_name}: {planned.completions} completions × {cfg.n_repeats} repeats"
                print_estimate(f"{title} (no call made)", planned.rows)
            return
        _run_baselines(s, cfg, name, metrics_out, allresults_out, strict, mlflow=mlflow)
        return
    if dry_run:
        _dry_run(s, cfg, name)
        return
    name = name or runner.new_run_name()
    with continuable(s, name, kind="eval", store_flag=store), run_progress(console) as progress:
        outcome = runner.run_eval(
            cfg, store=s, name=name, progress=progress, download_progress=DownloadBar(err_console)
        )
    _finish(s, outcome, metrics_out, allresults_out, None, None, strict, store_flag=store, mlflow=mlflow)


def _run_baselines(
    s: Store,
    cfg: RunConfig,
    name: str | None,
    metrics_out: Path | None,
    allresults_out: Path | None,
    strict: bool,
    *,
    mlflow: bool = False,
) -> None:
    """One baseline run per group; with several groups, each output file gets the group's short name."""
    from healthbench.cli.progress import DownloadBar, run_progress
    from healthbench.runner.baselines import run_baselines

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
                f"{len(selection.rows)} completions from {selection.matching} rows; "
                f"{selection.skipped} rows of the group have none (skipped)"
            )
        )
        suffix = "" if len(results) == 1 else group.short_name
        _finish(
            s,
            result.outcome,
            suffixed(metrics_out, suffix),
            suffixed(allresults_out, suffix),
            None,
            None,
            strict,
            mlflow=mlflow,
        )


ALLRESULTS_END = "_allresults.json"  # what `analyze DIR` picks up: the suffix stays last


def suffixed(path: Path | None, suffix: str) -> Path | None:
    """``path`` with ``-suffix`` before its extension, or before ``_allresults.json`` so that a
    simple-evals export still ends in it (``X_allresults.json`` -> ``X-suffix_allresults.json``)."""
    if path is None or not suffix:
        return path
    if path.name.endswith(ALLRESULTS_END):
        return path.with_name(f"{path.name.removesuffix(ALLRESULTS_END)}-{suffix}{ALLRESULTS_END}")
    return path.with_name(f"{path.stem}-{suffix}{path.suffix}")


def _finish(
    s: Store,
    outcome: runner.RunOutcome,
    metrics_out: Path | None,
    allresults_out: Path | None,
    seed: int | None,
    n_resamples: int | None,
    strict: bool,
    *,
    store_flag: str | None = None,
    mlflow: bool = False,
) -> None:
    from healthbench.cli.continuable import resume_command
    from healthbench.cli.progress import batch_summary
    from healthbench.executors.progress import resumed_note
    from healthbench.runner import run as runner

    c, t = outcome.counters, outcome.counters.tally
    line = (
        f"{t.made} model calls ({t.cached_calls} answered from cache) in {c.elapsed:.1f}s · "
        f"{t.input_tokens:,} input + {t.output_tokens:,} output tokens · ${t.cost:.4f}"
    )
    if t.unpriced_calls:
        line += f" + unknown cost of {t.unpriced_calls} calls to unpriced models (see --prices)"
    if c.samples_failed:
        line += f" · {c.samples_failed} conversations could not be sampled"
    if (note := resumed_note(c)) is not None:
        line += f" · {note}"
    batches = batch_summary(c)
    if batches:
        line += f"\n{batches}"
    _report(
        s,
        outcome.run,
        metrics_out=metrics_out,
        allresults_out=allresults_out,
        seed=seed,
        n_resamples=n_resamples,
        strict=strict,
        counters_line=line,
        mlflow=mlflow,
    )
    missing, expected = runner.unanswered(s, outcome.run)
    if missing:  # an incomplete run never exits 0
        raise RunError(
            f"run {outcome.run.name!r} is incomplete: {missing} of {expected} conversations have no "
            f"answer; continue with: {resume_command(outcome.run.name, store=store_flag)}"
        )


@app.command("regrade")
@handles_errors
def regrade_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="The run whose samples are graded again.")],
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge", "-j", show_default=False, help="Judge model spec (required without --profile)."
        ),
    ] = None,
    judge_base_url: JudgeBaseUrl = None,
    judge_api_key_env: JudgeKeyEnv = None,
    judge_temperature: JudgeTemperature = None,
    judge_max_tokens: JudgeMaxTokens = None,
    judge_reasoning_effort: JudgeReasoning = None,
    judge_extra_body: JudgeExtraBody = None,
    judge_system_message: JudgeSystemMessage = None,
    profile: Profile = None,
    judge_json: JudgeJson = None,
    timeout: Timeout = None,
    grader_template: GraderTemplate = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="Name of the new run (default generated); an existing regrade is continued."
        ),
    ] = None,
    store: StoreOpt = None,
    max_connections: MaxConnections = None,
    rpm: Rpm = None,
    tpm: Tpm = None,
    max_retries: MaxRetries = None,
    max_outage: MaxOutage = None,
    batch: Batch = None,
    batch_fallback: BatchFallback = None,
    batch_poll_interval: BatchPollInterval = None,
    judge_retries: JudgeRetries = None,
    prices: Prices = None,
    dry_run: DryRun = False,
    strict: Strict = False,
    metrics_out: MetricsOutOpt = None,
    allresults_out: AllResultsOpt = None,
) -> None:
    """Grade an existing run's answers with another judge or template, without re-sampling."""
    from healthbench.cli.config_flags import config_layer
    from healthbench.cli.continuable import continuable
    from healthbench.cli.dry_run import print_estimate
    from healthbench.cli.progress import run_progress
    from healthbench.runner import run as runner
    from healthbench.store import Store

    s = Store(store, create=False)  # the run regraded is in it: a store that does not exist is refused
    overrides = config_layer(ctx.params, candidate=False)  # the candidate's settings stay the parent's
    layer = overrides.pop("judge", {})
    if dry_run:
        config, rows = runner.regrade_dry_run(s, source, layer or None, overrides)
        n_conversations = len(s.load_items(s.require_run(source).id))
        print_estimate(
            f"dry run: {n_conversations} conversations × {config.n_repeats} repeats (no call made)", rows
        )
        return
    name = name or runner.new_run_name("regrade")
    with (
        continuable(s, name, kind="eval", store_flag=store),
        run_progress(console, label="answers reused") as progress,
    ):
        outcome = runner.regrade(
            source,
            layer or None,
            store=s,
            name=name,
            overrides=overrides,
            progress=progress,
        )
    _finish(s, outcome, metrics_out, allresults_out, None, None, strict, store_flag=store)


def dataset_label(dataset: dict[str, Any]) -> str:
    """What `runs` shows of a run's data: the variant, or a local file's name and sha256."""
    if dataset.get("source") == "local":
        return f"{Path(str(dataset.get('path', '?'))).name} sha256:{dataset.get('sha256', '?')}"
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
        cells = (
            run.name,
            run.kind,
            run.status,
            view.model_spec or _completions_label(view.config),
            view.judge_spec,
            dataset_label(run.config.get("dataset") or {}),
            run.created_at[:19],
        )
        table.add_row(*(Text(cell) for cell in cells))  # user text is shown literally
    console.print(table)


def _completions_label(config: RunConfig) -> str:
    """What a run without a candidate model graded (a baseline run's completions), else "-"."""
    return f"{config.completions} completions" if config.completions else "-"


@app.command("results")
@handles_errors
def results_command(
    name: Annotated[str, typer.Argument(help="Run name.")],
    store: StoreOpt = None,
    seed: SeedOpt = None,
    n_resamples: ResamplesOpt = None,
    metrics_out: MetricsOutOpt = None,
    allresults_out: AllResultsOpt = None,
    correct_with: Annotated[
        str | None,
        typer.Option(
            "--correct-with",
            help="A stored meta-eval run of the same judge: also report scores corrected for the judge's "
            "measured errors (docs/correction.md).",
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
    mlflow: MlflowOpt = False,
) -> None:
    """Show a stored run's scores again and export them (no model call)."""
    from healthbench.cli.correction_view import render_correction
    from healthbench.results.correction import corrected_scores
    from healthbench.results.mlflow_log import require_mlflow
    from healthbench.results.views import RunView
    from healthbench.store import Store
    from healthbench.store.location import store_file

    outputs = {
        "--metrics-out": metrics_out,
        "--allresults-out": allresults_out,
        "--aggregate-out": aggregate_out,
        "--row-scores-out": row_scores_out,
        "--inspect-log-out": inspect_log_out,
    }
    refuse_overwriting_inputs(outputs, [store_file(store)])
    s = Store(store, create=False)
    run = s.require_run(name)
    if run.kind != "eval":
        raise RunError(f"run {name!r} is {a_kind(run.kind)} run; use `healthbench meta-eval --resume {name}`")
    if mlflow:
        require_mlflow()
    correction = None
    if correct_with is not None:  # before any output: a refused meta-eval run leaves no partial file
        options = RunView.of(s, run).scoring_options(seed=seed, n_resamples=n_resamples)
        correction = corrected_scores(s, name, correct_with, options=options)
    _report(
        s,
        run,
        metrics_out=metrics_out,
        allresults_out=allresults_out,
        seed=seed,
        n_resamples=n_resamples,
        strict=False,
        aggregate_out=aggregate_out,
        row_scores_out=row_scores_out,
        extra_metrics=correction.metrics() if correction is not None else None,
        inspect_log_out=inspect_log_out,
        mlflow=mlflow,
    )
    if correction is not None:
        render_correction(
            correction, title=f"run {name} corrected with meta-eval run {correct_with}", console=console
        )
