"""The OpenAPI pages (`/docs`, `/redoc`) from the service's own files, under a CSP, and `/favicon.ico`
without a token (issue 32: `/docs` loaded Swagger UI from a CDN, blank offline; the icon was a 401).
The pages in a browser, offline: tests/test_console_browser.py."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any


def test_docs_pages_load_only_the_services_own_files(http: Any) -> None:
    for path in ("/docs", "/redoc"):
        page = http.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/") for s in sources), sources  # nothing from elsewhere
        assert "cdn" not in page.text.lower() and "fonts.googleapis" not in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp
        scripts = csp.split("script-src ")[1].split(";")[0].split()
        inline = re.findall(r"<script>(.*?)</script>", page.text, flags=re.DOTALL)
        digests = [
            "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in inline
        ]
        assert scripts == ["'self'", *digests]  # no 'unsafe-inline', no other origin
        for source in sources:
            asset = http.get(source)
            assert asset.status_code == 200 and len(asset.content) > 0, source
    bundle = http.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert b"SwaggerUIBundle" in bundle.content
    missing = http.get("/docs/assets/secrets.txt")
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "no docs file 'secrets.txt'"


def test_favicon_answers_without_a_token(http: Any) -> None:
    icon = http.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/png"
    assert icon.content.startswith(b"\x89PNG")
