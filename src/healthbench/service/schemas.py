"""Request and response bodies of the job service (also what the Python client returns)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from healthbench.models.base import ModelSettings

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"  # no slash, no "..", at most 100 characters
JobStatusName = Literal["created", "pending", "active", "completed", "error", "cancelling", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "error", "cancelled"})
DOCUMENTS: tuple[str, ...] = ("aggregate-scores", "row-scores", "allresults", "metrics")
MAX_UPLOAD_CHARS = 50_000_000


class ModelRef(BaseModel):
    """A model role. Its API key comes from the service's environment, never from a request."""

    model_config = ConfigDict(extra="forbid")
    spec: str = Field(min_length=1, max_length=200, description="e.g. openai/gpt-4.1 or a model name")
    base_url: str | None = Field(default=None, max_length=500, description="OpenAI-compatible endpoint")
    settings: ModelSettings = Field(default_factory=ModelSettings)


class JobCreate(BaseModel):
    """An online job: answer the dataset with ``model`` and grade the answers with ``judge``."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, pattern=NAME_PATTERN, description="unique in the workspace")
    description: str | None = Field(default=None, max_length=1000)
    dataset: Literal["full", "hard", "consensus", "demo"] = "demo"
    data_jsonl: str | None = Field(
        default=None, max_length=MAX_UPLOAD_CHARS, description="uploaded HealthBench JSONL (replaces dataset)"
    )
    model: ModelRef
    judge: ModelRef
    limit: int | None = Field(default=None, ge=1, le=1_000_000)
    repeats: int = Field(default=1, ge=1, le=100)
    concurrency: int = Field(default=64, ge=1, le=4096, description="model calls in flight for this job")
    grader_template: str | None = Field(
        default=None, max_length=200_000, description="grader prompt text with both placeholders"
    )
    max_retries: int | None = Field(default=None, ge=0, le=100)


class StatusDetails(BaseModel):
    progress: float = 0.0
    samples_done: int = 0
    samples_total: int = 0
    samples_failed: int = 0
    criteria_done: int = 0
    criteria_total: int = 0
    ungraded: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


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
