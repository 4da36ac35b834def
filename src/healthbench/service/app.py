"""The HTTP routes of `healthbench serve` (NeMo Evaluator's path layout). Routes only: the work is
in `JobService` (service/operations.py) and the background workers (service/jobs.py).

Routes are plain ``def``: FastAPI runs them in its thread pool, so store reads never block the event
loop (the status poll and the cached token check excepted: see below). Every failure answers with one
JSON shape (`ErrorBody`), never a traceback.
"""

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from healthbench.defaults import DEFAULT_PAGE_SIZE
from healthbench.errors import StoreError
from healthbench.service.api_docs import mount_docs
from healthbench.service.auth import TokenCache
from healthbench.service.console import REPORT_HEADERS, mount_console
from healthbench.service.errors import ERROR_TYPES, ServiceError, validation_message
from healthbench.service.guard import MB, PUBLIC, RequestGuard, error_response, store_unavailable
from healthbench.service.health import HealthSource, OutageNotes, readiness
from healthbench.service.metrics import CONTENT_TYPE, HttpMetrics, exposition
from healthbench.service.operations import JobService
from healthbench.service.schemas import (
    MAX_PAGE,
    MAX_PAGE_SIZE,
    NAME_PATTERN,
    ErrorBody,
    Job,
    JobCreate,
    JobList,
    JobLogs,
    JobStatus,
    JobStatusName,
    ResultList,
)

PREFIX = "/apis/evaluation/v2/workspaces/{workspace}/benchmark-jobs"
DEFAULT_WORKSPACE = "default"
ERROR_CODES = (401, 403, 404, 409, 411, 413, 422, 429, 503)
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": ERROR_TYPES[code]} for code in ERROR_CODES
}
BODY_ERRORS: dict[int | str, dict[str, Any]] = {  # of the routes that read a request body
    400: {"model": ErrorBody, "description": "bad_request: a body that is not UTF-8 JSON text"}
}

HTML_PAGE: dict[int | str, dict[str, Any]] = {  # a page's errors are JSON (`ErrorBody`) all the same
    200: {
        "content": {"text/html": {"schema": {"type": "string"}}},
        "description": "a self-contained HTML page",
    },
    **{
        code: {
            "description": ERROR_TYPES[code],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
        }
        for code in ERROR_CODES
    },
}
Gate = Annotated[
    float | None,
    Query(
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="a gate threshold D, 0 <= D < 1 (as in compare)",
    ),
]
Workspace = Annotated[str, PathParam(pattern=NAME_PATTERN, description="workspace name")]
Name = Annotated[str, PathParam(pattern=NAME_PATTERN, description="job name")]


def create_app(
    service: JobService, workers: HealthSource | None = None, *, metrics_public: bool = False
) -> FastAPI:
    """The service's app; ``workers`` (the job workers serving its store) feed ``/health/ready``;
    ``metrics_public``: /metrics answers without a token."""
    app = FastAPI(
        title="healthbench job service",
        description="HealthBench benchmark jobs in workspaces (NeMo Evaluator's paths and result shapes).",
        version="1",
        docs_url=None,  # served from the package's own files (service/api_docs.py), never a CDN
        redoc_url=None,
    )

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.type)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, validation_message(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405 and (methods := _allowed_methods(app, request)):
            headers["Allow"] = ", ".join(methods)  # every method of the path (RFC 9110), not one route's
        return error_response(exc.status_code, str(exc.detail), headers=headers)

    outages = OutageNotes()

    @app.exception_handler(StoreError)
    async def _store_down(_: Request, exc: StoreError) -> JSONResponse:
        return store_unavailable(exc, outages)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return error_response(500, f"internal error ({type(exc).__name__})")

    # the token is checked (and the body's size capped) before the body is read: see service/guard.py
    app.add_middleware(
        RequestGuard,
        tokens=TokenCache(service.jobs),
        max_body=int(service.limits.max_upload_mb * MB),
        notes=outages,
        public=PUBLIC | {"/metrics"} if metrics_public else PUBLIC,
    )
    app.add_middleware(HttpMetrics, routes=app.routes)  # the outermost: refused requests count too

    async def access(workspace: Workspace, authorization: Annotated[str | None, Header()] = None) -> str:
        """The workspace of a request `RequestGuard` let through (the header is declared for OpenAPI)."""
        return workspace

    Scoped = Annotated[str, Depends(access)]
    router = APIRouter(prefix=PREFIX, tags=["benchmark-jobs"], responses=ERRORS)

    @router.post("", status_code=201, response_model=Job, responses=BODY_ERRORS)
    def create_job(workspace: Scoped, body: JobCreate) -> Job:
        return service.create(workspace, body)

    @router.get("", response_model=JobList)
    def list_jobs(
        workspace: Scoped,
        status: JobStatusName | None = None,
        page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
        page_size: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
        newest_first: Annotated[bool, Query(description="newest job first (default: oldest)")] = False,
        name_contains: Annotated[
            str | None, Query(max_length=100, description="only jobs whose name holds this (any case)")
        ] = None,
    ) -> JobList:
        offset = (page - 1) * page_size
        return service.list(
            workspace,
            status=status,
            offset=offset,
            limit=page_size,
            newest_first=newest_first,
            name_contains=name_contains,
        )

    @router.get("/{name}", response_model=Job)
    def retrieve_job(workspace: Scoped, name: Name) -> Job:
        return service.retrieve(workspace, name)

    @router.delete("/{name}", status_code=204)
    def delete_job(workspace: Scoped, name: Name) -> Response:
        service.delete(workspace, name)
        return Response(status_code=204)

    # the hot path of polling clients: one indexed read of five small columns (well under a
    # millisecond) done on the loop, which is cheaper than the thread-pool hop the other routes take,
    # and encoded once by pydantic-core (FastAPI would validate the model again before encoding it)
    @router.get("/{name}/status", response_model=JobStatus)
    async def job_status(workspace: Scoped, name: Name) -> Response:
        body = service.status(workspace, name).model_dump_json()
        return Response(body, media_type="application/json")

    @router.get("/{name}/logs", response_model=JobLogs)
    def job_logs(workspace: Scoped, name: Name) -> JobLogs:
        return service.logs(workspace, name)

    @router.post("/{name}/cancel", response_model=Job)
    def cancel_job(workspace: Scoped, name: Name) -> Job:
        return service.cancel(workspace, name)

    @router.post("/{name}/resume", response_model=Job)
    def resume_job(workspace: Scoped, name: Name) -> Job:
        return service.resume(workspace, name)

    @router.get("/{name}/results", response_model=ResultList)
    def list_results(workspace: Scoped, name: Name) -> ResultList:
        return service.results(workspace, name)

    @router.get("/{name}/results/aggregate-scores/download")
    def aggregate_scores(workspace: Scoped, name: Name) -> dict[str, Any]:
        return service.aggregate_scores(workspace, name)

    @router.get("/{name}/results/row-scores/download", response_class=StreamingResponse)
    def row_scores(workspace: Scoped, name: Name) -> StreamingResponse:
        rows = service.row_scores(workspace, name)
        return StreamingResponse(_jsonl(rows), media_type="application/jsonl")

    @router.get("/{name}/results/metrics/download")
    def metrics(workspace: Scoped, name: Name) -> dict[str, Any]:
        return service.metrics(workspace, name)

    @router.get("/{name}/results/allresults/download", response_class=FileResponse)
    def allresults(workspace: Scoped, name: Name) -> FileResponse:
        folder = Path(tempfile.mkdtemp(prefix="healthbench-allresults-"))
        path = service.allresults_file(workspace, name, folder)
        return FileResponse(
            path, media_type="application/json", background=BackgroundTask(_remove, folder, path)
        )

    # HTML pages: their own router, so that their errors are documented as JSON (as they are sent)
    pages = APIRouter(prefix=PREFIX, tags=["benchmark-jobs"], default_response_class=HTMLResponse)

    @pages.get("/{name}/report", responses=HTML_PAGE)
    def job_report(workspace: Scoped, name: Name) -> FileResponse:
        """The HTML report of a completed eval, regrade or import job (`healthbench report`), built
        once and kept; a meta-eval job's shows which judge to pay for (each judge's F1 and cost)."""
        return FileResponse(
            service.report_file(workspace, name), media_type="text/html", headers=REPORT_HEADERS
        )

    @pages.get("/{name}/compare", responses=HTML_PAGE)
    def job_comparison(
        workspace: Scoped,
        name: Name,
        baseline: Annotated[str, Query(pattern=NAME_PATTERN, description="the job compared against (A)")],
        fail_if_worse_by: Gate = None,
        require_non_inferiority: Gate = None,
    ) -> HTMLResponse:
        """The paired comparison of this job (B) against ``baseline`` (A) as `healthbench compare`
        makes it, with the verdicts of the gates asked for, as an HTML page (the report of both)."""
        page = service.comparison_html(
            workspace,
            name,
            baseline,
            fail_if_worse_by=fail_if_worse_by,
            require_non_inferiority=require_non_inferiority,
        )
        return HTMLResponse(page, headers=REPORT_HEADERS)

    @app.get("/health", tags=["service"])
    async def health() -> dict[str, str]:  # no I/O: answered on the loop, no thread-pool hop
        return {"status": "ok"}

    add_probes(app, service, workers, outages)

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def prometheus_metrics() -> Response:
        """Prometheus' text format (any valid token, or none with `serve --metrics-public`)."""
        return Response(exposition(service.store), media_type=CONTENT_TYPE)

    app.include_router(router)
    app.include_router(pages)
    mount_console(app)
    mount_docs(app)
    return app


def add_probes(app: FastAPI, service: JobService, workers: HealthSource | None, outages: OutageNotes) -> None:
    """Kubernetes' probes, without a token: ``/health/live`` (the process answers) and
    ``/health/ready`` (the store answers and the job workers run; else 503 saying which, in public
    words: no store location, host or error text)."""
    not_ready: dict[int | str, dict[str, Any]] = {
        503: {"model": ErrorBody, "description": "unavailable: the store or the job workers"}
    }

    @app.get("/health/live", tags=["service"])
    async def live() -> dict[str, str]:  # no I/O, as /health
        return {"status": "ok"}

    @app.get("/health/ready", tags=["service"], responses=not_ready)
    def ready() -> JSONResponse:  # a store query: in the thread pool
        state = readiness(service.jobs, workers, outages)
        if not state.ready:
            return error_response(503, f"not ready: {state.reason}")
        return JSONResponse({"status": "ready", "store": state.store, "workers": state.workers})


def _allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """The methods the OpenAPI spec documents for the request's path (every route of the path)."""
    path = request.url.path
    for template, operations in app.openapi()["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path):
            return sorted(method.upper() for method in operations)
    return []


def _jsonl(rows: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for row in rows:
        yield (json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _remove(folder: Path, path: Path) -> None:
    path.unlink(missing_ok=True)
    folder.rmdir()
