"""Options shared by several commands, each declared once (one ``Annotated`` alias per option) so its
name, help text and default are the same everywhere; `healthbench.cli.option_groups` gathers the ones
that go together into groups a command takes whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from healthbench.defaults import (
    DEFAULT_BATCH_POLL,
    DEFAULT_JUDGE_RETRIES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_OUTAGE,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RAY_CONNECT_TIMEOUT,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT,
    MAX_RESAMPLES,
    OFFLINE_MODEL,
)
from healthbench.errors import ConfigError

StoreOpt = Annotated[
    str | None,  # not a Path: Path() would mangle URLs (sqlite:////x.db -> sqlite:/x.db)
    typer.Option(
        "--store",
        help="Run store: a SQLite file path or a SQLAlchemy URL (sqlite:///PATH, "
        "postgresql+psycopg://USER:PASSWORD@HOST/DB). Default: $HEALTHBENCH_STORE, else "
        "healthbench.db in the user data dir.",
        show_default=False,
    ),
]
MetricsOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--metrics-out", help="Write the flat metrics JSON (simple-evals key style, see docs/metrics.md)."
    ),
]
AllResultsOpt = Annotated[
    Path | None,
    typer.Option("--allresults-out", help="Write a simple-evals `_allresults.json` export of the run."),
]
MlflowOpt = Annotated[
    bool,
    typer.Option(
        "--mlflow",
        help="Also log the run to MLflow: parameters, every metric, the allresults, metrics and HTML "
        "report files, at $MLFLOW_TRACKING_URI (default: MLflow's, sqlite:///mlflow.db here); needs pip "
        "install 'healthbench[mlflow]' (see docs/interop.md).",
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", min=0, help=f"Bootstrap seed, 0 or more (default {DEFAULT_SEED}).", show_default=False
    ),
]
ResamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--n-resamples",
        min=0,
        max=MAX_RESAMPLES,
        help=f"Bootstrap resamples, 0 (no std / CI) to {MAX_RESAMPLES:_} (default {DEFAULT_RESAMPLES}).",
        show_default=False,
    ),
]


def below_one(value: float | None) -> float | None:
    """A score difference threshold: 0 <= value < 1 (scores are in [0, 1]: a threshold of 1 or more,
    inf or nan could never be crossed, so the option would do nothing)."""
    from healthbench.analysis.compare import threshold_problem

    if value is not None and (problem := threshold_problem(value)) is not None:
        raise typer.BadParameter(problem)
    return value


def parse_json_option(name: str, value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name}: not valid JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{name}: expected a JSON object")
    return parsed


def parse_key_values(name: str, pairs: list[str] | None) -> dict[str, Any] | None:
    """Repeated ``KEY=VALUE`` flags as a dict; a VALUE that is JSON is decoded (4096, true, "auto"),
    anything else stays text."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{name} {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def split_list(values: list[str] | None) -> list[str] | None:
    """Accept repeated options and comma-separated values alike."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


# -- the judge and the run's "how", shared by run, regrade and meta-eval ----------------------------
def _opt(kind: type, *flags: str, help: str, **kw: Any) -> Any:
    return Annotated[kind | None, typer.Option(*flags, help=help, **kw)]


# per member of a panel (several --judge): given once, every member's; once per --judge, each member's in order
JudgeBaseUrl = _opt(
    list[str],
    "--judge-base-url",
    help="OpenAI-compatible endpoint of the judge (with several --judge: once for all, or once per judge in order).",
)
JudgeKeyEnv = _opt(
    list[str],
    "--judge-api-key-env",
    help="Environment variable holding the judge's API key (with several --judge: once for all, or once per judge).",
)
JudgeTemperature = _opt(float, "--judge-temperature", help="Judge sampling temperature.")
JudgeMaxTokens = _opt(int, "--judge-max-tokens", help="Judge max output tokens.")
JudgeReasoning = _opt(str, "--judge-reasoning-effort", help="Judge reasoning effort.")
JudgeSystemMessage = _opt(
    str, "--judge-system-message", help="System message sent before each judge prompt (default none)."
)
Profile = _opt(
    str,
    "--profile",
    help="Send what a reference sends: simple-evals or inspect (candidate and judge settings, judge "
    "model, grader prompt; explicit flags win). See docs/profiles.md.",
)
JudgeExtraBody = _opt(str, "--judge-extra-body", help="JSON object merged into the judge's request body.")
JudgeJson = _opt(
    bool,
    "--judge-json/--no-judge-json",
    show_default=False,
    help="Ask the judge for schema-constrained JSON (default: on for local models only).",
)
GraderTemplate = _opt(
    Path,
    "--grader-template",
    help="Grader prompt file with <<conversation>> and <<rubric_item>> placeholders, or simple-evals "
    "(OpenAI's prompt, downloaded once from simple-evals and checked by sha256).",
)
ConfigFile = _opt(Path, "--config", help="TOML/JSON run config; flags override it.")
MaxConnections = _opt(
    int,
    "--max-connections",
    show_default=False,
    help=f"Concurrent model calls, candidate and judge together (default {DEFAULT_MAX_CONNECTIONS}).",
)
Executor = _opt(
    str,
    "--executor",
    show_default=False,
    help="Where the calls run: local (the async engine, default) or ray (a Ray Data pipeline; "
    "needs pip install 'healthbench[ray]'; see docs/scale.md).",
)
RayAddress = _opt(
    str,
    "--ray-address",
    show_default=False,
    help="Ray cluster to join with --executor ray (e.g. ray://head:10001 or auto; default: a new local Ray).",
)
RayConnectTimeout = _opt(
    float,
    "--ray-connect-timeout",
    min=0.001,
    show_default=False,
    help="Seconds --ray-address may take to answer before the run stops, storing nothing "
    f"(default {DEFAULT_RAY_CONNECT_TIMEOUT:g}).",
)
VllmEngineArg = _opt(
    list[str],
    "--vllm-engine-arg",
    show_default=False,
    help="KEY=VALUE passed to the vLLM engine of a vllm/HF_ID_OR_PATH candidate with --executor ray "
    "(repeatable; e.g. max_model_len=8192, tensor_parallel_size=2; no secrets: they are stored).",
)
MaxRetries = _opt(
    int,
    "--max-retries",
    show_default=False,
    help=f"Retries of a failed call (429, 5xx, timeouts; default {DEFAULT_MAX_RETRIES}).",
)
Batch = _opt(
    str,
    "--batch",
    show_default=False,
    help="Send judge calls (judge) or every call (all) through the provider's batch API: half the "
    "price, answered within 24 h; resumable (default none; see docs/batch.md).",
)
WarmFirst = _opt(
    bool,
    "--warm-first/--no-warm-first",
    show_default=False,
    help="With a judge whose provider caches prompts and a cache-first grader prompt, ask one "
    "criterion per conversation first and the rest once it has answered (default on; docs/cost.md).",
)
BatchFallback = _opt(
    str,
    "--batch-fallback",
    show_default=False,
    help="A request a batch did not answer (errored, expired): retry (in a later batch, default) or "
    "online (asked at once, online price).",
)
BatchPollInterval = _opt(
    float,
    "--batch-poll-interval",
    show_default=False,
    help="Longest wait between polls of a provider batch (first after 1 s, then doubling; "
    f"default {DEFAULT_BATCH_POLL:g}).",
)
MaxOutage = _opt(
    float,
    "--max-outage",
    show_default=False,
    help="Stop the run (resumable) when an endpoint that answered before has failed every call for "
    f"this many seconds (default {DEFAULT_MAX_OUTAGE:g}).",
)
JudgeRetries = _opt(
    int,
    "--judge-retries",
    show_default=False,
    help=f"Re-asks when a judge answer does not parse (default {DEFAULT_JUDGE_RETRIES}).",
)
Timeout = _opt(
    float,
    "--timeout",
    show_default=False,
    help=f"Per-request timeout in seconds for every model (default {DEFAULT_TIMEOUT:g}).",
)
Rpm = _opt(float, "--rpm", help="Requests per minute per endpoint.")
Tpm = _opt(float, "--tpm", help="Tokens per minute per endpoint.")
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print calls, tokens and estimated cost; call nothing.")
]
Strict = Annotated[bool, typer.Option("--strict", help="Fail (exit 1) if any criterion is left ungraded.")]
LengthCenter = _opt(
    float,
    "--length-adjustment-center",
    min=0,
    help="Also report overall_score_length_adjusted = score - penalty*(len(response)-center)/500, "
    "center in characters (give --length-adjustment-penalty-per-500-chars too).",
)
LengthPenalty = _opt(
    float,
    "--length-adjustment-penalty-per-500-chars",
    min=0,
    help="Penalty per 500 characters beyond --length-adjustment-center (the two go together).",
)
Prices = _opt(Path, "--prices", help="JSON/TOML price overrides (USD per million tokens).")
CacheDir = _opt(
    Path, "--cache-dir", help="Dataset download cache (default $HEALTHBENCH_CACHE_DIR or the user cache dir)."
)


def base_urls(
    model: str | None, base_url: str | None, judge: str | None, judge_base_url: str | None
) -> tuple[str | None, str | None]:
    """The candidate's and the judge's endpoints as the SDKs would pick them: a flag wins, then
    $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL; a judge given as a bare model name with no
    --judge-base-url asks the candidate's --base-url (one local server serving both)."""
    from healthbench.models.base import env_base_url, provider_prefix  # (not loaded by light commands)

    model_url = base_url or (env_base_url(model) if model else None)
    judge_url = judge_base_url
    if judge_url is None and judge is not None:
        if provider_prefix(judge) is None and base_url is not None:
            judge_url = base_url
        else:
            judge_url = env_base_url(judge)
    return model_url, judge_url


def length_adjustment(center: float | None, penalty: float | None) -> tuple[float | None, float | None]:
    """The length adjustment's (center, penalty) from their two flags, which go together."""
    if (center is None) != (penalty is None):
        raise ConfigError(
            "--length-adjustment-center and --length-adjustment-penalty-per-500-chars go together"
        )
    return center, penalty


# -- the candidate (run) ------------------------------------------------------------------------------
Model = _opt(
    str,
    "--model",
    "-m",
    show_default=False,
    help="Candidate model spec: openai/NAME, anthropic/NAME, local/smollm2, or NAME with --base-url. "
    f"Default {OFFLINE_MODEL}.",
)
BaseUrl = _opt(
    str,
    "--base-url",
    help="OpenAI-compatible endpoint of the candidate (vLLM, llama.cpp server, Ollama ...).",
)
ApiKeyEnv = _opt(str, "--api-key-env", help="Environment variable holding the candidate's API key.")
Temperature = _opt(float, "--temperature", help="Candidate sampling temperature.")
MaxTokens = _opt(int, "--max-tokens", help="Candidate max output tokens.")
SystemMessage = _opt(str, "--system-message", help="System message sent before each conversation.")
ReasoningEffort = _opt(
    str, "--reasoning-effort", help="Candidate reasoning effort (low/medium/high) for reasoning models."
)
ExtraBody = _opt(str, "--extra-body", help="JSON object merged into the candidate's request body.")
