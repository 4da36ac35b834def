"""One typed config per run, the same whether built from CLI flags, Python kwargs or a config file."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from healthbench.defaults import (
    DEFAULT_BATCH_LINGER,
    DEFAULT_BATCH_MAX_WAIT,
    DEFAULT_BATCH_OPEN_ITEMS,
    DEFAULT_BATCH_POLL,
    DEFAULT_BOOTSTRAP_WORKERS,
    DEFAULT_JUDGE_RETRIES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PANEL_RULE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    DEFAULT_WARM_FIRST,
    MAX_RESAMPLES,
    OFFLINE_MODEL,
    PanelRule,
)
from healthbench.errors import ConfigError
from healthbench.models.base import ModelSettings, ModelSpec, parse_model_spec
from healthbench.models.limits import RetryPolicy
from healthbench.profiles import profile_layer

SECRET_WORDS = ("token", "key", "secret", "password")  # settings refused because they are stored


def looks_secret(key: str) -> bool:
    """Whether a free-form setting's name looks like a credential (``HF_TOKEN``, ``api_key``...):
    such settings are refused wherever they would be stored (vLLM engine arguments, job bodies)."""
    return any(word in key.lower() for word in SECRET_WORDS)


def secret_key_in(value: Any) -> str | None:
    """The first secret-looking key (`looks_secret`) at any depth of a JSON-like value, else None."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = str(key) if looks_secret(str(key)) else secret_key_in(item)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = secret_key_in(item)
            if found is not None:
                return found
    return None


def checked_base_url(url: str) -> str:
    """A model's base URL as every entry point takes it (a flag, a config file, a job body): surrounding
    whitespace dropped; whitespace or a control character inside it, or a ``.`` or ``..`` path segment
    (also percent-encoded), is a ValueError that does not repeat the URL (such a URL would be sent, or
    echoed in an error, as given, or step out of the prefix `serve --allow-base-url` allows)."""
    text = url.strip()
    if not text:
        raise ValueError("a base URL must not be empty")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError("a base URL must not contain spaces, line breaks or control characters")
    if any(unquote(part) in (".", "..") for part in urlsplit(text).path.split("/")):
        raise ValueError("a base URL must not contain '.' or '..' path segments")
    return text


class ModelConfig(BaseModel):
    """A model role: spec text (``openai/gpt-4.1``), optional endpoint and key variable, settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    spec: str
    base_url: str | None = None
    api_key_env: str | None = None
    settings: ModelSettings = Field(default_factory=ModelSettings)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return None if value is None else checked_base_url(value)

    def parsed(self) -> ModelSpec:
        return parse_model_spec(self.spec, self.base_url, self.api_key_env)

    @property
    def label(self) -> str:
        """The judge's name in a panel (its spec text, unique within a run): the ``judge`` of its stored
        grades and of its metric keys (``judge:<label>:overall_score``)."""
        return self.spec

    def identity(self) -> dict[str, Any]:
        """What defines the model's answers (the key variable and timeout are not part of it)."""
        spec = self.parsed()
        return {
            "spec": spec.name,
            "url": spec.url,
            "settings": self.settings.model_dump(mode="json", exclude={"timeout"}),
        }


class ScoringConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    n_resamples: int = Field(default=DEFAULT_RESAMPLES, ge=0, le=MAX_RESAMPLES)
    seed: int = Field(default=DEFAULT_SEED, ge=0)
    # overall_score_length_adjusted: --length-adjustment-penalty-per-500-chars / --length-adjustment-center
    length_penalty: float | None = Field(default=None, ge=0)
    length_center: float | None = Field(default=None, ge=0)
    # unused (the bootstrap runs on the calling thread); kept so stored run configs still load
    workers: int = Field(default=DEFAULT_BOOTSTRAP_WORKERS, ge=1)
    # a judge panel's rule (scoring/panel.py) and the meta-eval runs that calibrate it (rule "calibrated")
    panel: PanelRule = DEFAULT_PANEL_RULE
    calibrate_with: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _length_adjustment_together(self) -> ScoringConfig:
        if (self.length_penalty is None) != (self.length_center is None):
            raise ValueError(
                "--length-adjustment-center and --length-adjustment-penalty-per-500-chars go together"
            )
        return self


class RunConfig(BaseModel):
    """Everything a run needs. Fields under "what" define the run; the rest may change on resume."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # what: the data, the models, the grading
    dataset: str = "demo"
    data: str | None = None
    limit: int | None = Field(default=None, ge=1)
    ids: list[str] | None = None
    themes: list[str] | None = None
    categories: list[str] | None = None
    n_repeats: int = Field(default=1, ge=1)
    model: ModelConfig | None = Field(default_factory=lambda: ModelConfig(spec=OFFLINE_MODEL))
    judge: ModelConfig = Field(default_factory=lambda: ModelConfig(spec=OFFLINE_MODEL))
    # a panel of judges (docs/panels.md): every member grades every criterion; empty: ``judge`` alone.
    # Given, ``judge`` is its first member (the chair)
    judges: list[ModelConfig] = Field(default_factory=list)
    grader_template: str | None = None
    judge_structured_output: bool | None = None  # None: on for local models, off otherwise
    # baselines (runner/baselines.py): grade the dataset's completions, no candidate model
    completions: Literal["physician", "references"] | None = None
    group: str | None = None  # physician group; None: every group present
    # reference profiles (healthbench.profiles): the profile's layer goes under every explicit setting
    profile: str | None = None
    judge_sees_system_message: bool = False  # the judge's conversation starts with the candidate's
    # a vllm/ candidate's engine arguments (vLLMEngineProcessorConfig engine_kwargs), passed through
    vllm_engine_args: dict[str, Any] = Field(default_factory=dict)
    # how: may differ between sessions of the same run
    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, gt=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    judge_retries: int = Field(default=DEFAULT_JUDGE_RETRIES, ge=0)
    prices: str | None = None
    cache_dir: str | None = None
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)
    executor: Literal["local", "ray"] = "local"  # the async engine, or Ray Data (healthbench.executors.ray)
    ray_address: str | None = None  # None: a cluster already joined (RAY_ADDRESS) or a new local Ray
    # provider batch APIs (executors/batching.py, docs/batch.md): which roles' calls go through batches,
    # what becomes of a request a batch did not answer, and the batches' timing (seconds)
    batch: Literal["none", "judge", "all"] = "none"
    batch_fallback: Literal["retry", "online"] = "retry"
    batch_poll_interval: float = Field(default=DEFAULT_BATCH_POLL, gt=0)
    batch_linger: float = Field(default=DEFAULT_BATCH_LINGER, ge=0)
    batch_max_wait: float = Field(default=DEFAULT_BATCH_MAX_WAIT, ge=0)
    batch_max_requests: int | None = Field(default=None, gt=0)  # per batch; None: the provider's limit
    # conversations x repeats in progress at once with --batch: the default holds a full run (all its
    # requests in as few batches as possible); fewer bound the client's memory at the price of more
    # rounds of batches one after the other (docs/batch.md)
    batch_open_items: int = Field(default=DEFAULT_BATCH_OPEN_ITEMS, gt=0)
    ray_connect_timeout: float | None = Field(default=None, gt=0)  # None: DEFAULT_RAY_CONNECT_TIMEOUT
    # with a cache-first grader template and a judge whose provider caches prompts: ask one criterion
    # of each conversation first, the rest when it has answered (executors/local.py, docs/cost.md)
    warm_first: bool = DEFAULT_WARM_FIRST

    @model_validator(mode="before")
    @classmethod
    def _apply_profile(cls, data: Any) -> Any:
        """Put the profile's settings under the given ones (explicit settings win)."""
        if not isinstance(data, dict) or data.get("profile") is None:
            return data
        out = _profile_of(data)
        _overlay(out, data)
        return out

    @model_validator(mode="before")
    @classmethod
    def _chair_is_judge(cls, data: Any) -> Any:
        """With ``judges``, ``judge`` is their first member (`build_config` refuses both given)."""
        if isinstance(data, dict) and data.get("judges"):
            return {**data, "judge": data["judges"][0]}
        return data

    @model_validator(mode="after")
    def _distinct_judges(self) -> RunConfig:
        labels = [member.label for member in self.judges]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"judge {repeated[0]!r} is named twice in the panel: each member once")
        return self

    @model_validator(mode="after")
    def _ray_settings_need_ray(self) -> RunConfig:
        """Settings only the Ray executor reads are refused with the local one (not silently ignored)."""
        if self.executor != "ray":
            given = [
                flag
                for flag, value in (
                    ("--ray-address", self.ray_address),
                    ("--ray-connect-timeout", self.ray_connect_timeout),
                    ("--vllm-engine-arg", self.vllm_engine_args),
                )
                if value
            ]
            if given:
                raise ValueError(f"{', '.join(given)}: only used by --executor ray (this run is local)")
        return self

    @model_validator(mode="after")
    def _no_secret_engine_args(self) -> RunConfig:
        for key in self.vllm_engine_args:
            if looks_secret(key):
                raise ValueError(
                    f"vLLM engine argument {key!r} looks like a secret and would be stored with the run: "
                    "set it in the Ray workers' environment instead (e.g. HF_TOKEN)"
                )
        return self

    @model_validator(mode="after")
    def _batch_on_the_engine(self) -> RunConfig:
        if self.batch != "none" and self.executor == "ray":
            raise ValueError("--batch runs on the local engine; drop --executor ray")
        return self

    @property
    def panel(self) -> list[ModelConfig]:
        """The judges that grade every criterion, the chair first: ``judges``, or ``judge`` alone."""
        return list(self.judges) or [self.judge]

    @property
    def structured_judge(self) -> bool:
        if self.judge_structured_output is not None:
            return self.judge_structured_output
        return self.judge.parsed().provider == "local"


HOW_FIELDS = {
    "max_connections",
    "requests_per_minute",
    "tokens_per_minute",
    "retry",
    "judge_retries",
    "prices",
    "cache_dir",
    "scoring",
    "executor",
    "ray_address",
    "batch",
    "batch_fallback",
    "batch_poll_interval",
    "batch_linger",
    "batch_max_wait",
    "batch_max_requests",
    "batch_open_items",
    "ray_connect_timeout",
    "warm_first",
}


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a run config file (TOML or JSON) into a dict to merge under CLI flags."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = tomllib.loads(text) if str(path).endswith(".toml") else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a table/object at the top level")
    return data


def build_config(
    *layers: dict[str, Any], defaults: dict[str, Any] | None = None, data_format: str | None = None
) -> RunConfig:
    """Merge layers (later wins, nested tables merged) and validate; unknown fields are an error.

    The one place a run's settings are resolved, for the CLI, the Python API and the service alike.
    From bottom to top: ``defaults`` (e.g. the CLI's default model specs), the data format's defaults
    (HealthBench Professional: upstream's judge unless the layers name one, and its length
    adjustment; the format is ``data_format`` checked against the ``data`` file, else detected from
    it), a profile's settings, then the layers. The layers may not name both ``dataset`` and
    ``data``, unless the dataset is a meta-eval variant (whose rows the file replaces), nor a
    candidate model together with ``completions`` (a baseline run grades the dataset's own)."""
    # the dataset modules load their records' schema: only a config being built needs them, not a
    # stored run's (`healthbench results NAME` start-up, docs/benchmarks.md)
    from healthbench.data.professional import PROFESSIONAL, professional_defaults, resolve_format
    from healthbench.data.sources import META_VARIANTS

    merged: dict[str, Any] = {}
    for layer in layers:
        _merge(merged, layer)
    if merged.get("dataset") not in META_VARIANTS:  # a meta-eval's names the variant its file stands for
        check_one_data_source(merged.get("dataset"), merged.get("data"))
    if merged.get("judges") and _names_a_judge(merged):
        raise ConfigError("judge and judges both name the judge; give one (judges: a panel, the chair first)")
    if merged.get("completions") is not None and _names_a_candidate(merged):
        raise ConfigError("--completions grades the dataset's completions: no --model or --base-url")
    base: dict[str, Any] = {}
    _merge(base, defaults or {})
    data = merged.get("data", base.get("data"))
    if resolve_format(data_format, Path(data) if isinstance(data, str) else None) == PROFESSIONAL:
        _merge(base, professional_defaults(judge_given=_names_a_judge(merged) or bool(merged.get("judges"))))
    if merged.get("profile") is not None:
        _merge(base, _profile_of(base, merged))
    _merge(base, merged)
    return validate_config(base)


def check_one_data_source(dataset: Any, data: Any) -> None:
    """``dataset`` and ``data`` both name a run's data: at most one may be given."""
    if dataset is not None and data is not None:
        raise ConfigError("--dataset and --data both name the data; give one")


def validate_config(data: dict[str, Any]) -> RunConfig:
    """`RunConfig` from a dict; a bad or unknown field is a one-line ConfigError. Settings that would
    be silently ignored are refused here, for the CLI, config files and service job bodies alike (a
    stored run's settings, read back with `RunConfig.model_validate`, are not checked again)."""
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        hint = " (unknown setting)" if first["type"] == "extra_forbidden" else ""
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"run config: {where}: {message}{hint}" if where else message) from None
    if config.batch == "none" and config.batch_fallback != "retry":
        raise ConfigError(
            f"batch_fallback = {config.batch_fallback!r} (--batch-fallback) only applies with --batch judge "
            "or all; add --batch, or drop it"
        )
    return config


def _names_a_candidate(layer: dict[str, Any]) -> bool:
    """The layer names a candidate model or its endpoint (a baseline run grades no candidate)."""
    model = layer.get("model")
    if isinstance(model, ModelConfig):
        return True
    return isinstance(model, dict) and (model.get("spec") is not None or model.get("base_url") is not None)


def _names_a_judge(layer: dict[str, Any]) -> bool:
    judge = layer.get("judge")
    return isinstance(judge, ModelConfig) or (isinstance(judge, dict) and judge.get("spec") is not None)


def _profile_of(*sources: dict[str, Any]) -> dict[str, Any]:
    """The layer of the profile named in the last source, for the candidate the sources name (the
    default one if none; no candidate when the model is explicitly None, as in meta-eval)."""
    spec: str | None = OFFLINE_MODEL
    for source in sources:
        if "model" in source:
            model = source["model"]
            if model is None:
                spec = None
            elif isinstance(model, ModelConfig):
                spec = model.spec
            elif isinstance(model, dict) and model.get("spec"):
                spec = str(model["spec"])
    return profile_layer(str(sources[-1]["profile"]), spec)


def _overlay(target: dict[str, Any], layer: dict[str, Any]) -> None:
    """Like `_merge`, but a key present in ``layer`` wins even when None: a stored run's settings
    (every key present) are never changed by its profile."""
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _overlay(target[key], value)
        else:
            target[key] = value


def _merge(target: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if value is None:
            continue
        if isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value)
        else:
            target[key] = value
