"""`healthbench serve` (the job service) and its API tokens: `new-token`, `tokens`, `revoke-token`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from healthbench.cli.app import app, console, handles_errors, say
from healthbench.cli.options import StoreOpt
from healthbench.defaults import (
    DEFAULT_ALLOWED_BASE_URLS,
    DEFAULT_LEASE,
    DEFAULT_MAX_UPLOAD_MB,
    DEFAULT_SERVICE_CONNECTIONS,
    DEFAULT_SERVICE_WORKERS,
    DEFAULT_WORKSPACE_QUEUED_JOBS,
    DEFAULT_WORKSPACE_UPLOAD_MB,
)
from healthbench.service.logs import LogFormat


@app.command("serve")
@handles_errors
def serve(
    store: StoreOpt = None,
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    workers: int = typer.Option(
        DEFAULT_SERVICE_WORKERS, "--workers", min=1, help="Jobs this process runs at once."
    ),
    connections: int = typer.Option(
        DEFAULT_SERVICE_CONNECTIONS,
        "--connections",
        min=1,
        help="Connection budget per model endpoint, shared by the jobs running at once.",
    ),
    lease: float = typer.Option(
        DEFAULT_LEASE,
        "--lease",
        min=1.0,
        help="Seconds after which an active job whose service died is picked up by another.",
    ),
    max_upload_mb: float = typer.Option(
        DEFAULT_MAX_UPLOAD_MB,
        "--max-upload-mb",
        min=0.001,
        help="Largest request body in MB (refused with 413 before it is read).",
    ),
    workspace_upload_mb: float = typer.Option(
        DEFAULT_WORKSPACE_UPLOAD_MB,
        "--workspace-upload-mb",
        min=0.0,
        help="MB of uploads a workspace's jobs may hold together (429 beyond).",
    ),
    workspace_queued_jobs: int = typer.Option(
        DEFAULT_WORKSPACE_QUEUED_JOBS,
        "--workspace-queued-jobs",
        min=1,
        help="Jobs a workspace may have pending or running at once (429 beyond).",
    ),
    allow_base_url: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-base-url",
            help="Endpoints jobs may call, as a pattern (* matches anything; repeatable; default "
            f"{' '.join(DEFAULT_ALLOWED_BASE_URLS)}), e.g. 'http://127.0.0.1:8001/*'.",
        ),
    ] = None,
    allow_model_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-model-dir",
            help="Folder whose local/PATH.gguf models jobs may run (repeatable; default: none).",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="JSON or TOML price file every job's calls are priced with (over the built-in table; "
            "a model with no price has an unknown cost).",
        ),
    ] = None,
    allow_ray_address: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-ray-address",
            help="Ray cluster address a ray job may name as its ray_address (repeatable; default: none, "
            "jobs run on the worker's own Ray).",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            help="Log lines on stderr as text or as one JSON object each (with the job's workspace "
            "and name on a job's lines; never a token or key).",
        ),
    ] = LogFormat.TEXT,
    metrics_public: bool = typer.Option(
        False,
        "--metrics-public",
        help="Answer GET /metrics (Prometheus) without a token (default: any valid token).",
    ),
) -> None:
    """Run the job service: HealthBench jobs over HTTP (OpenAPI at /docs), workers in the background.

    SIGTERM and SIGINT both stop it gracefully: running jobs are handed back as pending. On a store without API token, the first one is $HEALTHBENCH_BOOTSTRAP_TOKEN if set, else a new
    one printed once. Metrics at /metrics (Prometheus), traces when the OTEL_* variables name an OTLP
    endpoint (docs/service.md, "Operating it")."""
    import signal

    import uvicorn

    from healthbench import telemetry

    if telemetry.tracing_requested():
        telemetry.require()

    from healthbench.models.pricing import PriceTable
    from healthbench.service.app import create_app
    from healthbench.service.auth import BOOTSTRAP_TOKEN_ENV, bootstrap_token, first_token
    from healthbench.service.jobs import WorkerProcess, WorkerSettings
    from healthbench.service.limits import ServiceLimits
    from healthbench.service.logs import configure_logging
    from healthbench.service.metrics import metrics_dir
    from healthbench.service.operations import JobService
    from healthbench.service.startup import check_port, private_store
    from healthbench.store.location import store_file
    from healthbench.store.runs import Store

    check_port(host, port)
    if (sqlite := store_file(store)) is not None:
        for warning in private_store(sqlite):
            say(f"warning: {warning}", style="yellow", stderr=True)
    limits = ServiceLimits(
        max_upload_mb=max_upload_mb,
        workspace_upload_mb=workspace_upload_mb,
        workspace_queued_jobs=workspace_queued_jobs,
        allow_base_urls=tuple(allow_base_url or DEFAULT_ALLOWED_BASE_URLS),
        model_dirs=tuple(allow_model_dir or ()),
        ray_addresses=tuple(allow_ray_address or ()),
    )
    configure_logging(log_format.value)
    service = JobService(Store(store), limits)
    if bootstrap_token(service.jobs):
        console.print(
            Text(f"API token for every workspace: the one in ${BOOTSTRAP_TOKEN_ENV} (its hash stored)")
        )
    elif (token := first_token(service.jobs)) is not None:
        console.print(Text("API token for every workspace (shown once; only its hash is stored):"))
        console.print(Text(token))
    if prices is not None:
        PriceTable.load(prices)  # a bad file stops here, with one line, not in every job
    price_file = None if prices is None else str(prices.resolve())
    settings = WorkerSettings(workers=workers, lease=lease, connections=connections, prices=price_file)

    # uvicorn stops serving on SIGTERM, then raises the signal again once it restored this handler:
    # as for Ctrl-C, the KeyboardInterrupt ends `uvicorn.run` and WorkerProcess hands the running
    # jobs back (without it, SIGTERM's default action would end the process before that)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # JSON lines: uvicorn's own lines go through the root handler too (log_config=None)
    uvicorn_logs = {"log_config": None} if log_format == LogFormat.JSON else {}
    with metrics_dir(), WorkerProcess(store, settings, log_format.value) as worker_process:
        console.print(Text(f"serving on http://{host}:{port} (OpenAPI at /docs)"))
        uvicorn.run(
            create_app(service, worker_process, metrics_public=metrics_public),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            **uvicorn_logs,  # type: ignore[arg-type]
        )


@app.command("new-token")
@handles_errors
def new_token(
    workspace: Annotated[
        list[str],
        typer.Option("--workspace", help="Workspace the token may use (repeatable; '*' for all)."),
    ],
    store: StoreOpt = None,
    label: str | None = typer.Option(None, "--label", help="A note stored with the token's hash."),
) -> None:
    """Make an API token for the job service; it is printed once and only its hash is stored."""
    from healthbench.service.auth import create_token
    from healthbench.store.jobs import JobStore
    from healthbench.store.runs import Store

    console.print(Text(create_token(JobStore(Store(store)), workspace, label)))


@app.command("tokens")
@handles_errors
def tokens(store: StoreOpt = None) -> None:
    """List the job service's API tokens: id (start of the hash), workspaces, label, creation time."""
    from rich.table import Table

    from healthbench.service.auth import token_id
    from healthbench.store.jobs import JobStore
    from healthbench.store.runs import Store

    table = Table("id", "workspaces", "label", "created")
    for t in JobStore(Store(store, create=False)).list_tokens():
        table.add_row(
            Text(token_id(t.token_sha256)),
            Text(", ".join(t.workspaces)),
            Text(t.label or ""),
            Text(t.created_at),
        )
    console.print(table)


@app.command("revoke-token")
@handles_errors
def revoke_token(
    token: Annotated[
        str, typer.Argument(help="The token itself, or its id as `healthbench tokens` lists it.")
    ],
    store: StoreOpt = None,
) -> None:
    """Revoke an API token of the job service (a running service stops accepting it within seconds)."""
    from healthbench.service import auth
    from healthbench.store.jobs import JobStore
    from healthbench.store.runs import Store

    gone = auth.revoke_token(JobStore(Store(store, create=False)), token)
    say(f"revoked token {auth.token_id(gone.token_sha256)} ({', '.join(gone.workspaces)})")
