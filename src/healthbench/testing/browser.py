"""Debian's Chromium, headless and kept off the network, driven by Playwright (tests and benchmarks of
the HTML report). Playwright's own browsers are never downloaded: the system one is used."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextmanager
def chromium_context(playwright: Any, profile: Path | str, **options: Any) -> Iterator[Any]:
    """A persistent browser context of `CHROMIUM` with its profile in ``profile``; ``options`` go to
    Playwright's ``launch_persistent_context`` (a viewport, ...). Closed at the end."""
    context = playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), **options
    )
    try:
        yield context
    finally:
        context.close()
