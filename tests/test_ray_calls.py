"""`EagerSession`: how a call through Ray's HTTP stage fails, without Ray (a loopback aiohttp server)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from healthbench.executors.ray_calls import ERROR_FIELD, EagerSession, answer


async def _serve(handler_status: dict[str, tuple[int, str]]) -> tuple[web.AppRunner, str]:
    async def handle(request: web.Request) -> web.Response:
        status, text = handler_status[request.path]
        return web.Response(status=status, text=text)

    app = web.Application()
    app.router.add_post("/{name}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def _replies(max_retries: int, paths: list[str]) -> list[tuple[int, Any]]:
    runner, url = await _serve(
        {
            "/ok": (200, json.dumps({"choices": []})),
            "/garbage": (200, "<html>oops</html>"),
            "/key": (401, json.dumps({"error": {"message": "Incorrect API key provided."}})),
            "/busy": (500, json.dumps({"error": {"message": "Internal server error"}})),
        }
    )
    out = []
    try:
        async with EagerSession(max_retries, timeout=5.0) as session:
            for path in paths:
                async with await session.post(f"{url}{path}", data=path) as reply:
                    out.append((reply.status, await reply.json()))
    finally:
        await runner.cleanup()
    return out


def test_failures_are_retried_then_become_error_rows() -> None:
    ok, garbage, key, busy1, busy2 = asyncio.run(_replies(1, ["/ok", "/garbage", "/key", "/busy", "/busy"]))
    assert ok == (200, {"choices": []})
    assert (
        garbage[0] == 200 and "unreadable response: <html>oops</html>" in garbage[1][ERROR_FIELD]["message"]
    )
    assert key == (200, {ERROR_FIELD: {"message": "401 invalid or missing API key (this server wants an "
                                                  "API key: set api_key_env): Incorrect API key provided.",
                                       "fatal": True}})  # fmt: skip
    assert busy1[0] == 503  # a 5xx is handed to Ray's stage as a status it retries ...
    assert busy2 == (
        200,
        {ERROR_FIELD: {"message": "500: Internal server error", "fatal": False}},
    )  # ... once


def test_an_error_row_becomes_an_answer_with_its_error() -> None:
    row = json.dumps({ERROR_FIELD: {"message": "500: boom", "fatal": False}})
    assert answer(3, row) == (3, row, "500: boom", False)
    assert answer(4, '{"choices": []}') == (4, '{"choices": []}', None, False)
