"""A one-route aiohttp app served on the loopback for a test: the tests that must see exactly what a
model client sends (or answer it in ways the fake server does not) serve their own chat handler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.Response]]


@asynccontextmanager
async def chat_endpoint(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` at ``/v1/chat/completions`` on 127.0.0.1 (a free port); yields the base URL
    (``http://127.0.0.1:PORT/v1``) and stops the server on exit."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()
