"""`healthbench fake-server`: run the deterministic fake model server in the foreground."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from healthbench.cli.app import app, handles_errors, say
from healthbench.errors import ConfigError


@app.command("fake-server")
@handles_errors
def fake_server(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    latency: float = typer.Option(0.0, "--latency", help="Seconds every chat request takes."),
    latency_jitter: float = typer.Option(
        0.0, "--latency-jitter", help="Random extra seconds per request, up to this (seeded)."
    ),
    fault_rate: float = typer.Option(
        0.0, "--fault-rate", help="Share of chat requests (0..1) that get a fault."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the fault and jitter RNG."),
    met_rate: float = typer.Option(
        0.5, "--met-rate", help="Share of judge prompts answered criteria_met=true."
    ),
    retry_after: float = typer.Option(
        1.0, "--retry-after", help="Retry-After seconds sent with injected 429s."
    ),
    slow_seconds: float = typer.Option(30.0, "--slow-seconds", help="How long a 'slow' fault stalls."),
    rate_limit_weight: float = typer.Option(1.0, "--rate-limit-weight", help="Weight of 429 faults."),
    server_error_weight: float = typer.Option(1.0, "--server-error-weight", help="Weight of 500 faults."),
    unavailable_weight: float = typer.Option(1.0, "--unavailable-weight", help="Weight of 503/529 faults."),
    garbage_weight: float = typer.Option(1.0, "--garbage-weight", help="Weight of non-JSON judge replies."),
    slow_weight: float = typer.Option(0.0, "--slow-weight", help="Weight of slow (stalled) replies."),
    require_api_key: str | None = typer.Option(
        None, "--require-api-key", help="Answer 401 unless this key is sent."
    ),
    quota_exhausted: bool = typer.Option(
        False, "--quota-exhausted", help="Answer every chat request 429 insufficient_quota."
    ),
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model id listed by GET /v1/models (repeatable; default fake-model)."),
    ] = None,
    fail_containing: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-containing",
            help="Answer 500 to every chat request whose last user message contains TEXT (repeatable).",
        ),
    ] = None,
    batch_delay: float = typer.Option(
        0.0, "--batch-delay", help="Seconds from a batch's creation to its completion (batch APIs)."
    ),
    batch_error_rate: float = typer.Option(
        0.0, "--batch-error-rate", help="Share of batch requests (0..1) that come back errored."
    ),
    batch_expired_rate: float = typer.Option(
        0.0, "--batch-expired-rate", help="Share of batch requests (0..1) that come back expired."
    ),
    batch_fail_first: int = typer.Option(
        0, "--batch-fail-first", help="The first N batches created fail as a whole."
    ),
    prompt_cache: bool = typer.Option(
        False,
        "--prompt-cache",
        help="Bill prompt caching as OpenAI and Anthropic do (cached_tokens, cache reads and writes).",
    ),
    reply_words: int = typer.Option(
        0, "--reply-words", help="Candidate answers of about this many words (0: 8-24 words)."
    ),
    batch_parallel: int = typer.Option(
        1,
        "--batch-parallel",
        help="With --prompt-cache: a batch's requests are answered N at a time, each group reading only what earlier groups wrote to the cache (1: one after another; 0: all at once).",
    ),
) -> None:
    """Run an OpenAI- and Anthropic-compatible fake model server (deterministic answers, injected faults)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: a TCP port is between 0 and 65535 (0 picks a free one)")
    import uvicorn

    from healthbench.testing.fake_server import FakeServerConfig, FaultMix, create_app, uvicorn_config

    try:
        config = FakeServerConfig(
            latency=latency,
            latency_jitter=latency_jitter,
            fault_rate=fault_rate,
            faults=FaultMix(
                rate_limit=rate_limit_weight,
                server_error=server_error_weight,
                unavailable=unavailable_weight,
                garbage=garbage_weight,
                slow=slow_weight,
            ),
            retry_after=retry_after,
            slow_seconds=slow_seconds,
            met_rate=met_rate,
            seed=seed,
            require_api_key=require_api_key,
            quota_exhausted=quota_exhausted,
            models=model or ["fake-model"],
            fail_containing=fail_containing or [],
            batch_delay=batch_delay,
            batch_error_rate=batch_error_rate,
            batch_expired_rate=batch_expired_rate,
            batch_fail_first=batch_fail_first,
            prompt_cache=prompt_cache,
            reply_words=reply_words,
            batch_parallel=batch_parallel,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"fake-server option {where}: {first['msg']}") from None
    say(f"fake model server on http://{host}:{port}/v1 (stats: http://{host}:{port}/stats)")
    uvicorn.Server(uvicorn_config(create_app(config), host, port)).run()
