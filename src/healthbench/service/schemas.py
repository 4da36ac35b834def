"""Request and response bodies of the job service (also what the Python client returns)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from healthbench.defaults import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_UPLOAD_MB
from healthbench.models.base import ModelSettings
from healthbench.models.tally import CallTally

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"  # no slash, no "..", at most 100 characters
JobStatusName = Literal["created", "pending", "active", "completed", "error", "cancelling", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "error", "cancelled"})
DOCUMENTS: tuple[str, ...] = ("aggregate-scores", "row-scores", "allresults", "metrics")
MAX_UPLOAD_CHARS = DEFAULT_MAX_UPLOAD_MB * 1_000_000  # a body within the cap never has a longer field
MAX_PAGE, MAX_PAGE_SIZE = 1_000_000, 500  # the job list's page and page_size
JobKind = Literal["eval", "regrade", "meta-eval", "import", "meta-eval-labels"]
KIND_DOCUMENTS: dict[str, tuple[str, ...]] = {
    "eval": DOCUMENTS,
    "regrade": DOCUMENTS,
    "meta-eval": ("metrics",),
    "import": DOCUMENTS,
    "meta-eval-labels": ("metrics",),
}


# Request bodies are validated strictly (no "5" for 5, no 0 for false), so that the server accepts
# exactly what the OpenAPI schema allows; JSON Schema's integers include 5.0, which is taken as 5.
def _whole_numbers(model: type[BaseModel], data: Any) -> Any:
    """``data`` with the whole floats given to ``model``'s integer fields made ints (for strict mode)."""
    if not isinstance(data, dict):
        return data
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    fields |= model.model_fields
    return {
        key: int(value)
        if isinstance(value, float)
        and value.is_integer()
        and key in fields
        and int in (fields[key].annotation, *get_args(fields[key].annotation))
        else value
        for key, value in data.items()
    }


class JobModelSettings(ModelSettings):
    """`ModelSettings` in a request body (validated strictly)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integers(cls, data: Any) -> Any:
        return _whole_numbers(cls, data)


class ModelRef(BaseModel):
    """A model role. Its API key comes from the service's environment, never from a request."""

    model_config = ConfigDict(extra="forbid", strict=True)
    spec: str = Field(min_length=1, max_length=200, description="e.g. openai/gpt-4.1 or a model name")
    base_url: str | None = Field(default=None, max_length=500, description="OpenAI-compatible endpoint")
    settings: JobModelSettings = Field(default_factory=JobModelSettings)


class JobCreate(BaseModel):
    """A job. Online: ``eval`` answers the dataset with ``model`` and grades the answers with ``judge``;
    ``regrade`` grades the answers of the completed job ``source`` with ``judge``; ``meta-eval`` grades
    the meta-eval dataset's completions with ``judge``. Offline: ``import`` stores and scores an uploaded
    simple-evals ``_allresults.json``; ``meta-eval-labels`` scores an uploaded judge label file against
    the meta-eval dataset."""

    # the fields are `RunConfig`'s (same names, so a body maps onto a run config with no hand-written
    # table, see `job_layer`); the API's public names of two of them are aliases, used in JSON and specs
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        json_schema_extra=lambda schema, _: _union_by_kind(schema),
    )
    name: str | None = Field(default=None, pattern=NAME_PATTERN, description="unique in the workspace")
    description: str | None = Field(default=None, max_length=1000)
    kind: JobKind = Field(
        default="eval", description="eval, regrade, meta-eval (online); import, meta-eval-labels (offline)"
    )
    source: str | None = Field(
        default=None, pattern=NAME_PATTERN, description="regrade: the completed job whose answers are graded"
    )
    dataset: Literal["full", "hard", "consensus", "demo"] | None = Field(
        default=None,
        description="eval: the dataset (default demo); import: the dataset joined for example tags",
    )
    data_jsonl: str | None = Field(
        default=None,
        max_length=MAX_UPLOAD_CHARS,
        description="uploaded HealthBench JSONL (replaces dataset; the meta-eval JSONL for meta-eval-labels)",
    )
    allresults_json: str | None = Field(
        default=None, max_length=MAX_UPLOAD_CHARS, description="import: the uploaded _allresults.json"
    )
    allow_untagged: bool = Field(
        default=False, description="import: keep examples absent from the dataset, without example tags"
    )
    labels_jsonl: str | None = Field(
        default=None,
        max_length=MAX_UPLOAD_CHARS,
        description='meta-eval-labels: JSONL lines {"completion_id", "rubric", "criteria_met"}',
    )
    model: ModelRef | None = Field(default=None, description="eval: the candidate model")
    judge: ModelRef | None = Field(default=None, description="eval: the judge model")
    judges: list[ModelRef] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="a panel of judges instead of judge (the first is the chair): every judge grades every "
        "criterion (see docs/runs.md)",
    )
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    n_repeats: int = Field(default=1, ge=1, le=100, alias="repeats")
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS,
        ge=1,
        le=4096,
        alias="concurrency",
        description="model calls in flight for this job",
    )
    grader_template: str | None = Field(
        default=None, max_length=200_000, description="grader prompt text with both placeholders"
    )
    max_retries: int | None = Field(default=None, ge=0, le=100)
    executor: Literal["local", "ray"] = Field(
        default="local", description="local (the worker's async engine) or ray (a Ray Data pipeline)"
    )
    ray_address: str | None = Field(
        default=None,
        max_length=500,
        description="ray: the cluster to join (default: the worker's)",
    )
    profile: Literal["simple-evals", "inspect"] | None = Field(
        default=None,
        description="a reference profile: send what simple-evals or Inspect's port send (its judge when "
        "none is given; explicit settings win; see docs/profiles.md)",
    )
    batch: Literal["none", "judge", "all"] = Field(
        default="none",
        description="judge or all: those calls go through the provider's batch API (half price, within "
        "24 h; the job stays active while its batches run, see docs/batch.md)",
    )

    @model_validator(mode="before")
    @classmethod
    def _integers(cls, data: Any) -> Any:
        return _whole_numbers(cls, data)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> JobCreate:
        needed, unused = KIND_FIELDS[self.kind]
        for field in needed:
            public = PUBLIC_NAMES.get(field, field)
            if field == PROFILE_GIVES and (self.profile is not None or self.judges):
                continue  # the profile names the judge, or the panel's first member is it
            if getattr(self, field) is None:
                raise _field_error(public, f"a job of kind {self.kind!r} needs {public}")
        for field in unused:
            public = PUBLIC_NAMES.get(field, field)
            if getattr(self, field) != type(self).model_fields[field].default:
                raise _field_error(public, f"{public} does not apply to a job of kind {self.kind!r}")
        return self


# the public (JSON) names of the fields named otherwise in Python (their `RunConfig` names)
PUBLIC_NAMES: dict[str, str] = {
    name: field.alias for name, field in JobCreate.model_fields.items() if field.alias is not None
}


def _field_error(field: str, message: str) -> ValidationError:
    """A validation error located at ``field`` (so the 422 names it), raised by a model validator."""
    error = PydanticCustomError("job_kind", message)
    return ValidationError.from_exception_data(
        "JobCreate", [InitErrorDetails(type=error, loc=(field,), input=None)]
    )


_ONLINE = (
    "model",
    "judge",
    "judges",
    "n_repeats",
    "max_connections",
    "grader_template",
    "max_retries",
    "executor",
    "ray_address",
    "profile",
    "batch",
)
PROFILE_GIVES = "judge"  # a field a kind needs unless the job names a profile
_OFFLINE = ("allresults_json", "allow_untagged", "labels_jsonl")
KIND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # (needed, refused)
    "eval": (("model", "judge"), (*_OFFLINE, "source")),
    "regrade": (("source", "judge"), (*_OFFLINE, "model", "dataset", "data_jsonl", "limit", "n_repeats")),
    "meta-eval": (("judge",), (*_OFFLINE, "model", "dataset", "source")),
    "import": (("allresults_json",), (*_ONLINE, "limit", "labels_jsonl", "source")),
    "meta-eval-labels": (
        ("labels_jsonl",),
        (*_ONLINE, "dataset", "allresults_json", "allow_untagged", "source"),
    ),
}


def _union_by_kind(schema: dict[str, Any]) -> None:
    """The JSON schema of `JobCreate` as what the server enforces: one alternative per kind (``oneOf``,
    told apart by ``kind``; a body without one is an ``eval``), each requiring the fields its kind
    needs (not null) and allowing a field its kind does not use only at its default, as
    `JobCreate._fields_of_kind` checks with the same table (`KIND_FIELDS`)."""
    properties: dict[str, Any] = schema.pop("properties")
    schema.pop("required", None)
    defaults = {name: field.default for name, field in JobCreate.model_fields.items()}
    python_names = {public: name for name, public in PUBLIC_NAMES.items()}
    alternatives = []
    for kind, (needed, unused) in KIND_FIELDS.items():
        fields: dict[str, Any] = {}
        for public, definition in properties.items():
            field = python_names.get(public, public)
            if field == "kind":
                fields[public] = {"const": kind, "type": "string"} | (
                    {"default": kind} if kind == "eval" else {}
                )
            elif field in needed and field != PROFILE_GIVES:
                fields[public] = _not_null(definition)
            elif field in unused:
                default = defaults[field]
                fields[public] = {"type": "null"} if default is None else {"const": default}
            else:
                fields[public] = definition
        required = [
            *(() if kind == "eval" else ("kind",)),
            *(PUBLIC_NAMES.get(f, f) for f in needed if f != PROFILE_GIVES),
        ]
        alternative = {
            "title": f"JobCreate ({kind})",
            "type": "object",
            "properties": fields,
            "required": required,
            "additionalProperties": False,
        }
        if PROFILE_GIVES in needed:  # the judge (not null), or a profile that names one
            judge = properties[PROFILE_GIVES]
            alternative["anyOf"] = [
                {"required": [PROFILE_GIVES], "properties": {PROFILE_GIVES: _not_null(judge)}},
                {"required": ["judges"], "properties": {"judges": _not_null(properties["judges"])}},
                {"required": ["profile"], "properties": {"profile": {"type": "string"}}},
            ]
        alternatives.append(alternative)
    schema.pop("additionalProperties", None)
    schema["oneOf"] = alternatives


def _not_null(definition: dict[str, Any]) -> dict[str, Any]:
    """A field's schema without its ``null`` alternative (a field a kind needs may not be null)."""
    options = [o for o in definition.get("anyOf", ()) if o != {"type": "null"}]
    if len(options) != 1:
        return definition
    rest = {k: v for k, v in definition.items() if k not in ("anyOf", "default")}
    return {**options[0], **rest}


def cost_details(total: CallTally, judge: CallTally) -> dict[str, Any]:
    """`StatusDetails`' prompt-cache and judge fields of a job's counters (all calls, the judge's)."""
    return {
        "cached_input_tokens": total.cached_input_tokens,
        "cache_write_input_tokens": total.cache_write_input_tokens,
        "judge_cost": judge.known_cost,
        "judge_cached_share": judge.cached_share,
    }


class StatusDetails(BaseModel):
    progress: float = 0.0
    samples_done: int = 0
    samples_total: int = 0
    samples_failed: int = 0
    criteria_done: int = 0
    criteria_total: int = 0
    ungraded: int = 0
    input_tokens: int = 0  # every input token (cached and cache-written ones included)
    output_tokens: int = 0
    cached_input_tokens: int = 0  # read from the provider's prompt cache
    cache_write_input_tokens: int = 0  # written to it (Anthropic)
    cost: float | None = 0.0  # USD; None: unknown (a model with no price), never shown as 0
    judge_cost: float | None = 0.0  # the judge's part of it
    judge_cached_share: float | None = None  # the share of the judge's input tokens read from the cache
    batches: str | None = (
        None  # --batch: the provider batches running, e.g. "judge batch in_progress 120/500"
    )


class JobStatus(BaseModel):
    name: str
    workspace: str
    status: JobStatusName
    status_details: StatusDetails
    error: str | None = None


class Job(JobStatus):
    id: str
    description: str | None = None
    spec: dict[str, Any]
    created_at: str
    updated_at: str


class Page(BaseModel):
    offset: int
    limit: int
    total: int


class JobList(BaseModel):
    data: list[Job]
    pagination: Page


class LogEntry(BaseModel):
    at: str
    message: str


class JobLogs(BaseModel):
    data: list[LogEntry]


class ResultRef(BaseModel):
    name: str
    media_type: str


class ResultList(BaseModel):
    data: list[ResultRef]


class ErrorDetail(BaseModel):
    status: int
    type: str
    message: str


class ErrorBody(BaseModel):
    """The one error shape of every non-2xx answer."""

    error: ErrorDetail
