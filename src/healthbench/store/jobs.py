"""Benchmark jobs and API tokens in the store: rows in, records out, and atomic claims so that two
service processes on one database never run the same job."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, and_, cast, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from healthbench.store import db
from healthbench.store.db import runs
from healthbench.store.job_tables import api_tokens, benchmark_jobs, job_results, job_uploads
from healthbench.store.runs import Store

ACTIVE = ("active", "cancelling")
QUEUED = ("created", "pending", *ACTIVE)  # jobs that hold a place in a workspace's queue


@dataclass(frozen=True)
class JobRecord:
    id: str
    workspace: str
    name: str
    status: str
    spec: dict[str, Any]
    run_name: str
    details: dict[str, Any]
    error: str | None
    logs: list[dict[str, Any]]
    owner: str | None
    lease_until: float | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class JobStatusRecord:
    """The columns a status poll reads: never the job's spec or its logs (which grow as it runs)."""

    workspace: str
    name: str
    status: str
    details: dict[str, Any]
    error: str | None


STATUS_COLUMNS = tuple(benchmark_jobs.c[f] for f in JobStatusRecord.__dataclass_fields__)


@dataclass(frozen=True)
class TokenRecord:
    token_sha256: str
    workspaces: list[str]
    label: str | None
    created_at: str


@dataclass(frozen=True)
class WorkspaceUsage:
    queued: int  # jobs pending or running
    upload_chars: int  # characters of the uploads kept for its jobs


class DuplicateJob(Exception):
    """A job with this name already exists in the workspace."""


class JobStore:
    """The job rows of one store. Every method is one short transaction; safe from any thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine

    def ping(self) -> None:
        """One trivial query: returns if the store answers, else raises `StoreError`."""
        with self._engine.connect() as conn:
            conn.execute(select(1)).scalar()

    # -- jobs -----------------------------------------------------------------------------------
    def create(
        self,
        job_id: str,
        workspace: str,
        name: str,
        spec: dict[str, Any],
        run_name: str,
        uploads: Mapping[str, str] | None = None,
    ) -> JobRecord:
        stamp = db.now()
        row: dict[str, Any] = {
            "id": job_id,
            "workspace": workspace,
            "name": name,
            "status": "pending",
            "spec": spec,
            "run_name": run_name,
            "details": {},
            "error": None,
            "logs": [{"at": stamp, "message": "job created"}],
            "owner": None,
            "lease_until": None,
            "created_at": stamp,
            "updated_at": stamp,
        }
        try:
            with self._engine.begin() as conn:
                conn.execute(insert(benchmark_jobs).values(**row))
                for field, text in (uploads or {}).items():
                    conn.execute(insert(job_uploads).values(job_id=job_id, field=field, text=text))
        except IntegrityError:
            raise DuplicateJob(name) from None
        return JobRecord(**row)

    def get(self, workspace: str, name: str) -> JobRecord | None:
        with self._engine.connect() as conn:
            row = (
                conn.execute(
                    select(benchmark_jobs).where(
                        and_(benchmark_jobs.c.workspace == workspace, benchmark_jobs.c.name == name)
                    )
                )
                .mappings()
                .first()
            )
        return JobRecord(**row) if row else None

    def counts_by_status(self) -> dict[str, int]:
        """How many jobs are in each status, over every workspace (the service's /metrics)."""
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(benchmark_jobs.c.status, func.count()).group_by(benchmark_jobs.c.status)
            ).all()
        return {str(status): int(count) for status, count in rows}

    def status(self, workspace: str, name: str) -> JobStatusRecord | None:
        """The status columns of one job (the hot path of polling clients: one indexed row, five
        small columns)."""
        with self._engine.connect() as conn:
            row = (
                conn.execute(
                    select(*STATUS_COLUMNS).where(
                        and_(benchmark_jobs.c.workspace == workspace, benchmark_jobs.c.name == name)
                    )
                )
                .mappings()
                .first()
            )
        return JobStatusRecord(**row) if row else None

    def uploads(self, job_id: str) -> dict[str, str]:
        """The uploaded files of a job by request field (``data_jsonl``, ``grader_template``)."""
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(job_uploads.c.field, job_uploads.c.text).where(job_uploads.c.job_id == job_id)
            ).all()
        return {row.field: row.text for row in rows}

    def set_result(self, job_id: str, name: str, body: dict[str, Any]) -> None:
        """Store (or replace) a result document of a job (an offline job's, computed once)."""
        with self._engine.begin() as conn:
            conn.execute(
                delete(job_results).where(job_results.c.job_id == job_id, job_results.c.name == name)
            )
            conn.execute(insert(job_results).values(job_id=job_id, name=name, body=body))

    def result(self, job_id: str, name: str) -> dict[str, Any] | None:
        """A stored result document of a job (None when none was stored)."""
        with self._engine.connect() as conn:
            body = conn.execute(
                select(job_results.c.body).where(job_results.c.job_id == job_id, job_results.c.name == name)
            ).scalar()
        return dict(body) if body is not None else None

    def usage(self, workspace: str) -> WorkspaceUsage:
        """What a workspace holds, for its quota."""
        in_workspace = benchmark_jobs.c.workspace == workspace
        with self._engine.connect() as conn:
            queued = conn.execute(
                select(func.count())
                .select_from(benchmark_jobs)
                .where(in_workspace, benchmark_jobs.c.status.in_(QUEUED))
            ).scalar_one()
            chars = conn.execute(
                select(func.coalesce(func.sum(func.length(job_uploads.c.text)), 0))
                .select_from(job_uploads.join(benchmark_jobs, job_uploads.c.job_id == benchmark_jobs.c.id))
                .where(in_workspace)
            ).scalar_one()
        return WorkspaceUsage(int(queued), int(chars))

    def upload_in_use(self, digest: str) -> bool:
        """Whether any job's spec names an upload with this SHA-256."""
        with self._engine.connect() as conn:
            found = conn.execute(
                select(benchmark_jobs.c.id).where(cast(benchmark_jobs.c.spec, Text).contains(digest)).limit(1)
            ).first()
        return found is not None

    def get_by_id(self, job_id: str) -> JobRecord | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(benchmark_jobs).where(benchmark_jobs.c.id == job_id)).mappings().first()
        return JobRecord(**row) if row else None

    def list(
        self,
        workspace: str,
        *,
        status: str | None = None,
        offset: int = 0,
        limit: int = 50,
        newest_first: bool = False,
        name_contains: str | None = None,
    ) -> tuple[list[JobRecord], int]:
        """One page of a workspace's jobs (oldest first, or newest first) and the total matching;
        ``name_contains`` keeps the jobs whose name holds it (case-insensitive)."""
        where = [benchmark_jobs.c.workspace == workspace]
        if status is not None:
            where.append(benchmark_jobs.c.status == status)
        if name_contains:
            where.append(benchmark_jobs.c.name.icontains(name_contains, autoescape=True))
        order = (benchmark_jobs.c.created_at, benchmark_jobs.c.id)
        with self._engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(benchmark_jobs).where(*where)).scalar_one()
            rows = (
                conn.execute(
                    select(benchmark_jobs)
                    .where(*where)
                    .order_by(*(column.desc() for column in order) if newest_first else order)
                    .offset(offset)
                    .limit(limit)
                )
                .mappings()
                .all()
            )
        return [JobRecord(**r) for r in rows], int(total)

    def set_status(
        self,
        job_id: str,
        status: str,
        *,
        expect: Sequence[str] | None = None,
        error: str | None = None,
        clear_error: bool = False,
    ) -> bool:
        """Move a job to ``status`` (only from one of ``expect`` when given); True if it moved.
        ``error`` records why it failed; ``clear_error`` forgets an earlier one (a resumed job)."""
        where = [benchmark_jobs.c.id == job_id]
        if expect is not None:
            where.append(benchmark_jobs.c.status.in_(list(expect)))
        values: dict[str, Any] = {"status": status, "updated_at": db.now()}
        if error is not None or clear_error:
            values["error"] = error
        if status not in ACTIVE:
            values.update(owner=None, lease_until=None)
        with self._engine.begin() as conn:
            return conn.execute(update(benchmark_jobs).where(*where).values(**values)).rowcount == 1

    def set_details(self, job_id: str, details: dict[str, Any]) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                update(benchmark_jobs)
                .where(benchmark_jobs.c.id == job_id)
                .values(details=details, updated_at=db.now())
            )

    def log(self, job_id: str, message: str) -> None:
        with self._engine.begin() as conn:
            logs = conn.execute(select(benchmark_jobs.c.logs).where(benchmark_jobs.c.id == job_id)).scalar()
            if logs is None:
                return
            entry = {"at": db.now(), "message": message}
            conn.execute(
                update(benchmark_jobs).where(benchmark_jobs.c.id == job_id).values(logs=[*logs, entry])
            )

    def delete(self, job: JobRecord) -> None:
        """Remove the job and its run (samples and grades go with it)."""
        with self._engine.begin() as conn:
            conn.execute(delete(job_uploads).where(job_uploads.c.job_id == job.id))
            conn.execute(delete(job_results).where(job_results.c.job_id == job.id))
            conn.execute(delete(benchmark_jobs).where(benchmark_jobs.c.id == job.id))
            conn.execute(delete(runs).where(runs.c.name == job.run_name))

    def drop_run(self, run_name: str) -> None:
        """Remove a job's run (with its samples and grades), e.g. one an interrupted import left."""
        with self._engine.begin() as conn:
            conn.execute(delete(runs).where(runs.c.name == run_name))

    # -- claims ---------------------------------------------------------------------------------
    def claim(self, owner: str, now: float, lease: float) -> JobRecord | None:
        """Take the oldest pending job, or an active one whose lease ran out (its worker died).

        The UPDATE is conditional on the row being unchanged since it was read, so of two processes
        racing for one job exactly one gets it (on SQLite and PostgreSQL alike)."""
        claimable = or_(
            benchmark_jobs.c.status == "pending",
            and_(benchmark_jobs.c.status.in_(ACTIVE), benchmark_jobs.c.lease_until < now),
        )
        with self._engine.connect() as conn:
            candidates = conn.execute(
                select(benchmark_jobs.c.id, benchmark_jobs.c.status, benchmark_jobs.c.lease_until)
                .where(claimable)
                .order_by(benchmark_jobs.c.created_at)
                .limit(10)
            ).all()
        for job_id, status, lease_until in candidates:
            same = [benchmark_jobs.c.id == job_id, benchmark_jobs.c.status == status]
            same.append(
                benchmark_jobs.c.lease_until.is_(None)
                if lease_until is None
                else benchmark_jobs.c.lease_until == lease_until
            )
            new_status = "cancelling" if status == "cancelling" else "active"
            with self._engine.begin() as conn:
                moved = conn.execute(
                    update(benchmark_jobs)
                    .where(*same)
                    .values(status=new_status, owner=owner, lease_until=now + lease, updated_at=db.now())
                ).rowcount
            if moved == 1:
                return self.get_by_id(job_id)
        return None

    def hand_back(self, job_id: str, owner: str) -> str | None:
        """Give up a job this owner holds: an active one goes back to pending (any worker claims it
        again), a cancelling one is cancelled. Returns the new status (None if no longer ours)."""
        ours = [benchmark_jobs.c.id == job_id, benchmark_jobs.c.owner == owner]
        values = {"owner": None, "lease_until": None, "updated_at": db.now()}
        with self._engine.begin() as conn:
            for was, status in (("active", "pending"), ("cancelling", "cancelled")):
                moved = conn.execute(
                    update(benchmark_jobs)
                    .where(*ours, benchmark_jobs.c.status == was)
                    .values(status=status, **values)
                ).rowcount
                if moved == 1:
                    return status
        return None

    def renew(self, job_id: str, owner: str, until: float) -> str | None:
        """Extend the lease of a job this owner holds; returns its status (None if no longer ours)."""
        with self._engine.begin() as conn:
            moved = conn.execute(
                update(benchmark_jobs)
                .where(and_(benchmark_jobs.c.id == job_id, benchmark_jobs.c.owner == owner))
                .values(lease_until=until)
            ).rowcount
            if moved != 1:
                return None
            status = conn.execute(
                select(benchmark_jobs.c.status).where(benchmark_jobs.c.id == job_id)
            ).scalar()
        return str(status) if status is not None else None

    # -- tokens ---------------------------------------------------------------------------------
    def add_token(self, token_sha256: str, workspaces: Sequence[str], label: str | None = None) -> None:
        with self._engine.begin() as conn:
            conn.execute(
                insert(api_tokens).values(
                    token_sha256=token_sha256, workspaces=list(workspaces), label=label, created_at=db.now()
                )
            )

    def token_workspaces(self, token_sha256: str) -> builtins.list[str] | None:
        with self._engine.connect() as conn:
            value = conn.execute(
                select(api_tokens.c.workspaces).where(api_tokens.c.token_sha256 == token_sha256)
            ).scalar()
        return list(value) if value is not None else None

    def count_tokens(self) -> int:
        with self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(api_tokens)).scalar_one())

    def list_tokens(self) -> builtins.list[TokenRecord]:
        """Every token's hash, workspaces, label and creation time, oldest first."""
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(api_tokens).order_by(api_tokens.c.created_at, api_tokens.c.token_sha256)
            ).all()
        return [TokenRecord(r.token_sha256, list(r.workspaces), r.label, str(r.created_at)) for r in rows]

    def delete_tokens(self, hashes: Sequence[str]) -> int:
        """Delete the tokens with these hashes; returns how many were deleted."""
        with self._engine.begin() as conn:
            return int(
                conn.execute(delete(api_tokens).where(api_tokens.c.token_sha256.in_(list(hashes)))).rowcount
            )
