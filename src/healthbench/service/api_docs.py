"""The OpenAPI pages of `healthbench serve` (``/docs``: Swagger UI, ``/redoc``: ReDoc) served from the
service itself: their scripts and styles come from the `fastapi-offline` package (installed with the
service), never from a CDN, so they work offline and no third-party script runs on the service's
origin. Each page carries a Content-Security-Policy that allows scripts from the service only, plus
Swagger UI's one inline start-up script by its hash. ``/favicon.ico`` is the same icon.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from healthbench.service.errors import ServiceError

DOCS_PATH, REDOC_PATH = "/docs", "/redoc"
ASSETS_PATH = "/docs/assets"  # public, as the pages are
FAVICON_PATH = "/favicon.ico"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def assets_folder() -> Path:
    """Where `fastapi-offline` keeps Swagger UI's and ReDoc's files."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def page_csp(html: str) -> str:
    """The policy of a docs page: scripts and styles from the service (and the page's inline
    scripts by their hash), requests to the service only (the spec, Swagger's "Try it out")."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode() + "'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src 'self' {hashes}".rstrip(),
            "style-src 'self' 'unsafe-inline'",  # Swagger UI and ReDoc set style attributes
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src blob:",  # ReDoc's search
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def mount_docs(app: FastAPI) -> None:
    """``/docs``, ``/redoc``, their assets and ``/favicon.ico`` (the app is made with ``docs_url`` and
    ``redoc_url`` None, so that FastAPI's CDN pages are not served)."""
    title = f"{app.title} - API"
    spec = app.openapi_url or "/openapi.json"
    folder = assets_folder()
    swagger = get_swagger_ui_html(
        openapi_url=spec,
        title=title,
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=FAVICON_PATH,
        oauth2_redirect_url=None,  # bearer tokens only: no OAuth2 flow
    ).body
    redoc = get_redoc_html(
        openapi_url=spec,
        title=title,
        redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
        redoc_favicon_url=FAVICON_PATH,
        with_google_fonts=False,
    ).body
    pages = {DOCS_PATH: bytes(swagger).decode("utf-8"), REDOC_PATH: bytes(redoc).decode("utf-8")}
    headers = {
        path: {"Content-Security-Policy": page_csp(html), "X-Content-Type-Options": "nosniff"}
        for path, html in pages.items()
    }

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_page() -> HTMLResponse:
        return HTMLResponse(pages[DOCS_PATH], headers=headers[DOCS_PATH])

    @app.get(REDOC_PATH, include_in_schema=False)
    def redoc_page() -> HTMLResponse:
        return HTMLResponse(pages[REDOC_PATH], headers=headers[REDOC_PATH])

    @app.get(f"{ASSETS_PATH}/{{file}}", include_in_schema=False)
    def docs_asset(file: str) -> Response:
        if file not in ASSETS:
            raise ServiceError(404, f"no docs file {file!r}")
        nosniff = {"X-Content-Type-Options": "nosniff"}
        return FileResponse(folder / file, media_type=ASSETS[file], headers=nosniff)

    @app.get(FAVICON_PATH, include_in_schema=False)
    def favicon() -> Response:
        return FileResponse(folder / "favicon.png", media_type="image/png")
