"""What `healthbench serve` checks before a route runs, at the ASGI level: the bearer token, before a
byte of the body is read, and the size of the body, declared (``Content-Length``) and counted while it
streams. A refused request therefore costs the process no memory for its body, whatever its size.

Every refusal answers with the service's one JSON error shape (`error_response`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from healthbench.errors import StoreError
from healthbench.service.api_docs import ASSETS_PATH, DOCS_PATH, FAVICON_PATH, REDOC_PATH
from healthbench.service.auth import TokenCache, authorize
from healthbench.service.console import CONSOLE_PATH
from healthbench.service.errors import ERROR_TYPES, ServiceError
from healthbench.service.health import STORE_RETRY_AFTER, OutageNotes
from healthbench.service.schemas import NAME_PATTERN, ErrorBody

WORKSPACES = "/apis/evaluation/v2/workspaces/"
PUBLIC = frozenset({"/health", DOCS_PATH, REDOC_PATH, "/openapi.json", FAVICON_PATH})
PUBLIC_FOLDERS = (f"{CONSOLE_PATH}/", f"{ASSETS_PATH}/")
PROBES = frozenset({"/health/live", "/health/ready"})  # Kubernetes sends no token (service/health.py)
MB = 1_000_000


def error_response(
    status: int, message: str, type: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The one JSON shape of every non-2xx answer."""
    body = ErrorBody.model_validate(
        {"error": {"status": status, "type": type or ERROR_TYPES.get(status, "error"), "message": message}}
    )
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def store_unavailable(exc: StoreError, notes: OutageNotes) -> JSONResponse:
    """A request the store's outage stopped: 503 with ``Retry-After``, in public words (the store's
    own line goes to the log, `notes`)."""
    notes.note(exc)
    message = "the store does not answer; try again shortly"
    return error_response(503, message, headers={"Retry-After": str(STORE_RETRY_AFTER)})


class _TooLarge(Exception):
    """The body went past the cap while it was read."""


class RequestGuard:
    """ASGI middleware: 401/403 from the headers alone (the body is never read for an unauthorized
    request), 411 for a body without ``Content-Length``, 413 for one declared or found larger than
    ``max_body`` bytes (counted chunk by chunk, so at most ``max_body`` bytes are ever held)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenCache,
        max_body: int,
        notes: OutageNotes | None = None,
        public: frozenset[str] = PUBLIC,
    ) -> None:
        self.app, self.tokens, self.max_body = app, tokens, max_body
        self.notes = notes or OutageNotes()
        self.public = public  # paths answered without a token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_headers(scope)
        except ServiceError as exc:
            await error_response(exc.status, exc.message, exc.type)(scope, receive, send)
            return
        except StoreError as exc:  # the token could not be looked up
            await store_unavailable(exc, self.notes)(scope, receive, send)
            return
        received = 0
        overflow = started = False

        async def counted() -> Message:
            nonlocal received, overflow
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    overflow = True
                    raise _TooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if overflow:  # the route's own answer to the failed read (a 400) is replaced by the 413
                return
            started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not overflow:
                raise
        if overflow and not started:
            await error_response(413, self._too_large())(scope, receive, send)

    def _check_headers(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        path: str = scope["path"]
        if (
            path not in self.public
            and path not in PROBES
            and path != CONSOLE_PATH
            and not path.startswith(PUBLIC_FOLDERS)
        ):
            # the console's and the docs' static files are public: one signs in on the page itself
            workspace: Any = None
            raw = scope.get("raw_path") or path.encode()
            raw = raw.decode("latin-1").split("?", 1)[0]  # as sent: an encoded slash stays encoded
            if raw.startswith(WORKSPACES):  # a malformed name: any valid token, then the route's 422
                workspace = unquote(raw[len(WORKSPACES) :].split("/", 1)[0])
                workspace = workspace if re.fullmatch(NAME_PATTERN, workspace) else None
            authorize(self.tokens, headers.get("authorization"), workspace)
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise ServiceError(400, "Content-Length is not a number")
            if int(length) > self.max_body:
                raise ServiceError(413, self._too_large())
        elif "transfer-encoding" in headers:
            raise ServiceError(411, "a request body needs a Content-Length header")

    def _too_large(self) -> str:
        return f"request body larger than this service's limit of {self.max_body / MB:g} MB"
