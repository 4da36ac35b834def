"""Python client of the job service, shaped like NeMo Evaluator's SDK.

    client = Client("http://127.0.0.1:8000", token="hb_...")   # over HTTP
    client = Client.local("healthbench.db")                      # in-process, same methods
    jobs = client.evaluation.benchmark_jobs
    jobs.create(name="j1", model={...}, judge={...}); client.wait_until_done("j1")
    aggregate = jobs.results.aggregate_scores.download(name="j1")
    for row in jobs.results.row_scores.download(name="j1"): ...   # streamed

Every job method takes the job as ``name=`` or ``job=`` (NeMo's current spelling), and an optional
``workspace=`` (default: the client's). Refusals raise `ServiceError` either way.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Annotated, Any, Protocol

import httpx
from pydantic import Field, StringConstraints, TypeAdapter, ValidationError

from healthbench.defaults import DEFAULT_PAGE_SIZE, DEFAULT_SERVICE_WORKERS
from healthbench.service.app import DEFAULT_WORKSPACE, PREFIX
from healthbench.service.errors import ServiceError, validation_message
from healthbench.service.schemas import (
    MAX_PAGE,
    MAX_PAGE_SIZE,
    NAME_PATTERN,
    TERMINAL,
    Job,
    JobCreate,
    JobList,
    JobLogs,
    JobStatus,
    JobStatusName,
    ResultList,
)

__all__ = ["Client", "ServiceError"]


class Backend(Protocol):
    def create(self, workspace: str, body: JobCreate) -> Job: ...
    def list(
        self,
        workspace: str,
        status: str | None,
        page: int,
        page_size: int,
        newest_first: bool = False,
        name_contains: str | None = None,
    ) -> JobList: ...
    def retrieve(self, workspace: str, name: str) -> Job: ...
    def status(self, workspace: str, name: str) -> JobStatus: ...
    def logs(self, workspace: str, name: str) -> JobLogs: ...
    def cancel(self, workspace: str, name: str) -> Job: ...
    def resume(self, workspace: str, name: str) -> Job: ...
    def delete(self, workspace: str, name: str) -> None: ...
    def results(self, workspace: str, name: str) -> ResultList: ...
    def aggregate_scores(self, workspace: str, name: str) -> dict[str, Any]: ...
    def row_scores(self, workspace: str, name: str) -> Iterator[dict[str, Any]]: ...
    def metrics(self, workspace: str, name: str) -> dict[str, Any]: ...
    def close(self) -> None: ...


class HttpBackend:
    def __init__(self, base_url: str, token: str | None, timeout: float) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, trust_env=False
        )

    def _path(self, workspace: str, name: str | None = None, tail: str = "") -> str:
        path = PREFIX.format(workspace=workspace)
        return f"{path}/{name}{tail}" if name is not None else path

    def _check(self, response: httpx.Response) -> httpx.Response:
        if response.is_success:
            return response
        try:
            error = response.json()["error"]
            raise ServiceError(response.status_code, error["message"], error["type"])
        except (ValueError, KeyError, TypeError):
            raise ServiceError(response.status_code, response.text[:200]) from None

    def _get(self, path: str, **params: Any) -> Any:
        return self._check(self._http.get(path, params=params or None)).json()

    def create(self, workspace: str, body: JobCreate) -> Job:
        payload = body.model_dump(mode="json", exclude_none=True)
        return Job.model_validate(self._check(self._http.post(self._path(workspace), json=payload)).json())

    def list(
        self,
        workspace: str,
        status: str | None,
        page: int,
        page_size: int,
        newest_first: bool = False,
        name_contains: str | None = None,
    ) -> JobList:
        params: dict[str, Any] = {"page": page, "page_size": page_size}
        if status is not None:
            params["status"] = status
        if newest_first:
            params["newest_first"] = "true"
        if name_contains is not None:
            params["name_contains"] = name_contains
        return JobList.model_validate(self._get(self._path(workspace), **params))

    def retrieve(self, workspace: str, name: str) -> Job:
        return Job.model_validate(self._get(self._path(workspace, name)))

    def status(self, workspace: str, name: str) -> JobStatus:
        return JobStatus.model_validate(self._get(self._path(workspace, name, "/status")))

    def logs(self, workspace: str, name: str) -> JobLogs:
        return JobLogs.model_validate(self._get(self._path(workspace, name, "/logs")))

    def cancel(self, workspace: str, name: str) -> Job:
        return Job.model_validate(self._check(self._http.post(self._path(workspace, name, "/cancel"))).json())

    def resume(self, workspace: str, name: str) -> Job:
        return Job.model_validate(self._check(self._http.post(self._path(workspace, name, "/resume"))).json())

    def delete(self, workspace: str, name: str) -> None:
        self._check(self._http.delete(self._path(workspace, name)))

    def results(self, workspace: str, name: str) -> ResultList:
        return ResultList.model_validate(self._get(self._path(workspace, name, "/results")))

    def aggregate_scores(self, workspace: str, name: str) -> dict[str, Any]:
        return dict(self._get(self._path(workspace, name, "/results/aggregate-scores/download")))

    def metrics(self, workspace: str, name: str) -> dict[str, Any]:
        return dict(self._get(self._path(workspace, name, "/results/metrics/download")))

    def row_scores(self, workspace: str, name: str) -> Iterator[dict[str, Any]]:
        """Rows as they arrive: one line of the response in memory at a time."""
        path = self._path(workspace, name, "/results/row-scores/download")
        with self._http.stream("GET", path) as response:
            if not response.is_success:
                response.read()
                self._check(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def close(self) -> None:
        self._http.close()


class LocalBackend:
    """The service's operations called in-process on a store, with this process's job workers."""

    def __init__(self, store: Any, workers: int) -> None:
        from healthbench.service.jobs import JobWorkers, WorkerSettings
        from healthbench.service.operations import JobService
        from healthbench.store.runs import Store

        self._own_store = not isinstance(store, Store)
        self.service = JobService(store if isinstance(store, Store) else Store(store))
        self._workers = JobWorkers(self.service.store, WorkerSettings(workers=workers))
        self._workers.start()

    def create(self, workspace: str, body: JobCreate) -> Job:
        return self.service.create(workspace, body)

    def list(
        self,
        workspace: str,
        status: str | None,
        page: int,
        page_size: int,
        newest_first: bool = False,
        name_contains: str | None = None,
    ) -> JobList:
        return self.service.list(
            workspace,
            status=status,
            offset=(page - 1) * page_size,
            limit=page_size,
            newest_first=newest_first,
            name_contains=name_contains,
        )

    def retrieve(self, workspace: str, name: str) -> Job:
        return self.service.retrieve(workspace, name)

    def status(self, workspace: str, name: str) -> JobStatus:
        return self.service.status(workspace, name)

    def logs(self, workspace: str, name: str) -> JobLogs:
        return self.service.logs(workspace, name)

    def cancel(self, workspace: str, name: str) -> Job:
        return self.service.cancel(workspace, name)

    def resume(self, workspace: str, name: str) -> Job:
        return self.service.resume(workspace, name)

    def delete(self, workspace: str, name: str) -> None:
        self.service.delete(workspace, name)

    def results(self, workspace: str, name: str) -> ResultList:
        return self.service.results(workspace, name)

    def aggregate_scores(self, workspace: str, name: str) -> dict[str, Any]:
        return self.service.aggregate_scores(workspace, name)

    def row_scores(self, workspace: str, name: str) -> Iterator[dict[str, Any]]:
        return self.service.row_scores(workspace, name)

    def metrics(self, workspace: str, name: str) -> dict[str, Any]:
        return self.service.metrics(workspace, name)

    def close(self) -> None:
        self._workers.stop()
        if self._own_store:
            self.service.store.close()


_NAME: TypeAdapter[str] = TypeAdapter(Annotated[str, StringConstraints(pattern=NAME_PATTERN)])
_PAGE: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=MAX_PAGE)])
_PAGE_SIZE: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)])
_STATUS: TypeAdapter[str | None] = TypeAdapter(JobStatusName | None)


def _valid(adapter: TypeAdapter[Any], value: Any, *where: str) -> Any:
    """``value`` checked as the server checks it: a refusal is the server's 422 and message, so a
    client over HTTP and `Client.local` refuse the same arguments the same way."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise ServiceError(422, validation_message(exc.errors(), where)) from None


def job_create(body: dict[str, Any]) -> JobCreate:
    """A job body from keyword arguments; a bad one is a 422 `ServiceError` naming the field."""
    try:
        return JobCreate.model_validate(body)
    except ValidationError as exc:
        raise ServiceError(422, validation_message(exc.errors(), ("body",))) from None


def _job_name(name: str | None, job: str | None) -> str:
    if (name is None) == (job is None):
        raise TypeError("give the job as name=... or job=... (exactly one)")
    return str(_valid(_NAME, name if name is not None else job, "path", "name"))


class _Scoped:
    def __init__(self, backend: Backend, workspace: str) -> None:
        self._backend, self._workspace = backend, workspace

    def _ws(self, workspace: str | None) -> str:
        return str(_valid(_NAME, workspace or self._workspace, "path", "workspace"))


class AggregateScores(_Scoped):
    def download(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> dict[str, Any]:
        return self._backend.aggregate_scores(self._ws(workspace), _job_name(name, job))


class RowScores(_Scoped):
    def download(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> Iterator[dict[str, Any]]:
        return self._backend.row_scores(self._ws(workspace), _job_name(name, job))


class Metrics(_Scoped):
    def download(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> dict[str, Any]:
        """The flat metrics of ``--metrics-out`` (a meta-eval-labels job's only result)."""
        return self._backend.metrics(self._ws(workspace), _job_name(name, job))


class Results(_Scoped):
    def __init__(self, backend: Backend, workspace: str) -> None:
        super().__init__(backend, workspace)
        self.aggregate_scores = AggregateScores(backend, workspace)
        self.row_scores = RowScores(backend, workspace)
        self.metrics = Metrics(backend, workspace)

    def list(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> ResultList:
        return self._backend.results(self._ws(workspace), _job_name(name, job))


class BenchmarkJobs(_Scoped):
    def __init__(self, backend: Backend, workspace: str) -> None:
        super().__init__(backend, workspace)
        self.results = Results(backend, workspace)

    def create(self, *, workspace: str | None = None, **body: Any) -> Job:
        """Create a job from the `JobCreate` fields (name, model, judge, dataset, limit, ...)."""
        return self._backend.create(self._ws(workspace), job_create(body))

    def list(
        self,
        *,
        status: str | None = None,
        page: int = 1,
        page_size: int = DEFAULT_PAGE_SIZE,
        newest_first: bool = False,
        name_contains: str | None = None,
        workspace: str | None = None,
    ) -> JobList:
        """One page of jobs, oldest first (``newest_first``: newest first), those whose name holds
        ``name_contains`` (any case) when given; ``pagination.total`` counts the matches."""
        return self._backend.list(
            self._ws(workspace),
            _valid(_STATUS, status, "query", "status"),
            _valid(_PAGE, page, "query", "page"),
            _valid(_PAGE_SIZE, page_size, "query", "page_size"),
            newest_first,
            name_contains,
        )

    def retrieve(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> Job:
        return self._backend.retrieve(self._ws(workspace), _job_name(name, job))

    def get_status(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> JobStatus:
        return self._backend.status(self._ws(workspace), _job_name(name, job))

    def get_logs(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> JobLogs:
        return self._backend.logs(self._ws(workspace), _job_name(name, job))

    def cancel(self, name: str | None = None, *, job: str | None = None, workspace: str | None = None) -> Job:
        return self._backend.cancel(self._ws(workspace), _job_name(name, job))

    def resume(self, name: str | None = None, *, job: str | None = None, workspace: str | None = None) -> Job:
        """Continue a finished job that left work undone (see the resume route): only what is missing
        is asked again, as `healthbench run --resume` does."""
        return self._backend.resume(self._ws(workspace), _job_name(name, job))

    def delete(
        self, name: str | None = None, *, job: str | None = None, workspace: str | None = None
    ) -> None:
        self._backend.delete(self._ws(workspace), _job_name(name, job))

    def wait_until_done(
        self,
        name: str | None = None,
        *,
        job: str | None = None,
        workspace: str | None = None,
        interval: float = 0.5,
        timeout: float | None = None,
    ) -> JobStatus:
        """Poll the job's status until it is completed, error or cancelled; returns that status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.get_status(name, job=job, workspace=workspace)
            if status.status in TERMINAL:
                return status
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {status.name!r} is still {status.status} after {timeout} s")
            time.sleep(interval)


class Evaluation:
    def __init__(self, backend: Backend, workspace: str) -> None:
        self.benchmark_jobs = BenchmarkJobs(backend, workspace)


class Client:
    """``Client(base_url, token=...)`` over HTTP, or ``Client.local(store)`` in-process."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        workspace: str = DEFAULT_WORKSPACE,
        timeout: float = 60.0,
        backend: Backend | None = None,
    ) -> None:
        if backend is None:
            if base_url is None:
                raise TypeError("Client needs a base_url (or use Client.local(store))")
            backend = HttpBackend(base_url, token or os.environ.get("HEALTHBENCH_TOKEN"), timeout)
        self._backend = backend
        self.evaluation = Evaluation(backend, workspace)

    @classmethod
    def local(
        cls, store: Any = None, *, workspace: str = DEFAULT_WORKSPACE, workers: int = DEFAULT_SERVICE_WORKERS
    ) -> Client:
        """A client on a store in this process (a path, a URL or a `Store`), running its own jobs."""
        return cls(workspace=workspace, backend=LocalBackend(store, workers))

    def wait_until_done(self, name: str | None = None, *, job: str | None = None, **kwargs: Any) -> JobStatus:
        return self.evaluation.benchmark_jobs.wait_until_done(name, job=job, **kwargs)

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
