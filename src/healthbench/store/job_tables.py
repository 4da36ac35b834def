"""Today's tables of the job service: benchmark jobs (one row per job, with its live status and claim
lease), their uploads, the results of offline jobs and API tokens (only their SHA-256 is stored), as
migrations 0004 and 0007 in migrations.py leave them."""

from __future__ import annotations

from sqlalchemy import JSON, Column, Float, ForeignKey, MetaData, String, Table, Text, UniqueConstraint

job_metadata = MetaData()

benchmark_jobs = Table(
    "benchmark_jobs",
    job_metadata,
    Column("id", String(40), primary_key=True),
    Column("workspace", String(100), nullable=False),
    Column("name", String(100), nullable=False),
    Column("status", String(20), nullable=False),
    Column("spec", JSON, nullable=False),  # the validated request body (never a key)
    Column("run_name", String(200), nullable=False),
    Column("details", JSON, nullable=False),  # live counters: progress, samples, criteria, tokens, cost
    Column("error", Text),
    Column("logs", JSON, nullable=False),
    Column("owner", String(80)),  # the worker holding the lease while the job is active
    Column("lease_until", Float),  # epoch seconds; an active job past its lease is picked up again
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    UniqueConstraint("workspace", "name", name="uq_benchmark_jobs_workspace_name"),
)

# uploaded files of a job (dataset JSONL, grader template), kept apart so that reading a job's row
# (status polls, lists) never parses megabytes of upload
job_uploads = Table(
    "job_uploads",
    job_metadata,
    Column("job_id", String(40), ForeignKey("benchmark_jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("field", String(40), primary_key=True),
    Column("text", Text, nullable=False),
)

# result documents of offline jobs that have no run to derive them from (``meta-eval-labels``: its
# metrics), computed once by the worker and served from here
job_results = Table(
    "job_results",
    job_metadata,
    Column("job_id", String(40), ForeignKey("benchmark_jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(40), primary_key=True),  # the result document: "metrics"
    Column("body", JSON, nullable=False),
)

api_tokens = Table(
    "api_tokens",
    job_metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("workspaces", JSON, nullable=False),  # workspace names, or ["*"] for all
    Column("label", String(100)),
    Column("created_at", String(40), nullable=False),
)
