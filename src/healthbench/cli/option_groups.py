"""Option groups: options that go together (the judge's, the calls', the score files ...), declared
once as a frozen dataclass of `healthbench.cli.options` aliases. A command takes a whole group as one
typed parameter and is decorated with `takes_groups`, which puts the group's options in the
signature typer reads and hands the command the group built from their values::

    @app.command("regrade")
    @handles_errors
    @takes_groups
    def regrade_command(ctx: typer.Context, judging: JudgeOptions, calls: CallOptions, ...) -> None:
        ...  # judging.profile, calls.max_connections ...

Every option keeps its one flat parameter name on the command line's side (``ctx.params``): that is
what `healthbench.cli.config_flags` maps to the run config, whichever group declares it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar, get_type_hints

import typer

from healthbench.cli.options import (
    AllResultsOpt,
    ApiKeyEnv,
    BaseUrl,
    Batch,
    BatchFallback,
    BatchPollInterval,
    DryRun,
    Executor,
    ExtraBody,
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
    MaxConnections,
    MaxOutage,
    MaxRetries,
    MaxTokens,
    MetricsOutOpt,
    Model,
    Prices,
    Profile,
    RayAddress,
    RayConnectTimeout,
    ReasoningEffort,
    ResamplesOpt,
    Rpm,
    SeedOpt,
    Strict,
    SystemMessage,
    Temperature,
    Timeout,
    Tpm,
    VllmEngineArg,
    WarmFirst,
)

if TYPE_CHECKING:
    from healthbench.telemetry import Tracing


# -- the groups ---------------------------------------------------------------------------------
class OptionGroup:
    """Base of the option groups: a frozen dataclass whose fields are option aliases with defaults."""

    commands: ClassVar[str]  # which commands take the group (documentation)


@dataclasses.dataclass(frozen=True)
class CandidateOptions(OptionGroup):
    """The candidate model and how it is asked."""

    commands = "run"
    model: Model = None
    base_url: BaseUrl = None
    api_key_env: ApiKeyEnv = None
    temperature: Temperature = None
    max_tokens: MaxTokens = None
    system_message: SystemMessage = None
    reasoning_effort: ReasoningEffort = None
    extra_body: ExtraBody = None


@dataclasses.dataclass(frozen=True)
class JudgeOptions(OptionGroup):
    """How the judge is asked (its spec, ``--judge``, is each command's own: its help differs)."""

    commands = "run, regrade, meta-eval"
    judge_base_url: JudgeBaseUrl = None
    judge_api_key_env: JudgeKeyEnv = None
    judge_temperature: JudgeTemperature = None
    judge_max_tokens: JudgeMaxTokens = None
    judge_reasoning_effort: JudgeReasoning = None
    judge_extra_body: JudgeExtraBody = None
    judge_system_message: JudgeSystemMessage = None
    judge_json: JudgeJson = None
    profile: Profile = None
    grader_template: GraderTemplate = None


@dataclasses.dataclass(frozen=True)
class CallOptions(OptionGroup):
    """How the model calls are made: concurrency, limits, retries, batches, prices."""

    commands = "run, regrade, meta-eval"
    timeout: Timeout = None
    max_connections: MaxConnections = None
    rpm: Rpm = None
    tpm: Tpm = None
    max_retries: MaxRetries = None
    max_outage: MaxOutage = None
    batch: Batch = None
    batch_fallback: BatchFallback = None
    batch_poll_interval: BatchPollInterval = None
    judge_retries: JudgeRetries = None
    prices: Prices = None
    warm_first: WarmFirst = None


@dataclasses.dataclass(frozen=True)
class RayOptions(OptionGroup):
    """Where the calls run (the local engine or Ray) and the Ray-only settings."""

    commands = "run"
    executor: Executor = None
    ray_address: RayAddress = None
    ray_connect_timeout: RayConnectTimeout = None
    vllm_engine_arg: VllmEngineArg = None


Otel = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Trace the run with OpenTelemetry (a span per run and per model call), exported by OTLP "
        "as the OTEL_* variables say (on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set); needs "
        "pip install 'healthbench[otel]' (see docs/service.md).",
    ),
]
OtelContent = Annotated[
    bool,
    typer.Option("--otel-content", help="Put the prompts and answers in the trace's spans (default: never)."),
]


@dataclasses.dataclass(frozen=True)
class TraceOptions(OptionGroup):
    """OpenTelemetry traces of the commands that call models (healthbench.telemetry)."""

    commands = "run, regrade, meta-eval"
    otel: Otel = False
    otel_content: OtelContent = False

    def tracing(self) -> AbstractContextManager[Tracing | None]:
        """The command's tracing (`telemetry.tracing_for`): on with ``--otel``, ``--otel-content`` or
        the ``OTEL_*`` variables, exported when the block ends; None when off."""
        from healthbench.telemetry import tracing_for

        return tracing_for(self.otel or self.otel_content, content=self.otel_content)


@dataclasses.dataclass(frozen=True)
class RunControl(OptionGroup):
    """Estimate instead of running, and fail on anything left ungraded."""

    commands = "run, regrade, meta-eval"
    dry_run: DryRun = False
    strict: Strict = False


@dataclasses.dataclass(frozen=True)
class Bootstrap(OptionGroup):
    """The bootstrap of the reported scores (reporting only: a run's stored settings stay)."""

    commands = "run, results"
    seed: SeedOpt = None
    n_resamples: ResamplesOpt = None


@dataclasses.dataclass(frozen=True)
class ScoreFiles(OptionGroup):
    """The score files every eval run can write."""

    commands = "run, regrade, results"
    metrics_out: MetricsOutOpt = None
    allresults_out: AllResultsOpt = None


F = TypeVar("F", bound=Callable[..., Any])


def takes_groups(command: F) -> F:
    """``command`` with each parameter typed as an `OptionGroup` replaced, in the signature typer
    reads, by the group's options (keyword-only, in the group's order, with its defaults); the
    command is called with the group built from their values. Other parameters stay as they are."""
    hints = get_type_hints(command, include_extras=True)
    groups: dict[str, type[OptionGroup]] = {}
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        hint = hints.get(param.name, param.annotation)
        if isinstance(hint, type) and issubclass(hint, OptionGroup):
            groups[param.name] = hint
            field_hints = get_type_hints(hint, include_extras=True)
            params += [
                inspect.Parameter(
                    f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=field_hints[f.name]
                )
                for f in dataclasses.fields(hint)  # type: ignore[arg-type]
            ]
        else:
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hint))
    names = [param.name for param in params]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise TypeError(f"{command.__name__}: options declared twice: {', '.join(duplicated)}")

    @wraps(command)
    def with_groups(**kwargs: Any) -> Any:
        for name, group in groups.items():
            kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)})  # type: ignore[arg-type]
        return command(**kwargs)

    with_groups.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    with_groups.__annotations__ = {param.name: param.annotation for param in params}
    return with_groups  # type: ignore[return-value]
