"""A system Chromium, headless and kept off the network, driven by Playwright (tests and benchmarks of
the HTML report and the console). Playwright's own browsers are never downloaded: the system one is
used, found as ``$HEALTHBENCH_CHROMIUM`` or else the first of `CHROMIUM_NAMES` on ``PATH``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM_ENV = "HEALTHBENCH_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
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


def find_chromium() -> Path | None:
    """``$HEALTHBENCH_CHROMIUM`` when set (an executable path), else the first Chromium on ``PATH``;
    None when there is none."""
    explicit = os.environ.get(CHROMIUM_ENV)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


CHROMIUM = find_chromium()
# why a browser test skips when CHROMIUM is None
NO_CHROMIUM = (
    f"no Chromium: set {CHROMIUM_ENV} or install one on PATH (Debian package chromium; "
    f"looked for {', '.join(CHROMIUM_NAMES)})"
)


@contextmanager
def chromium_context(profile: Path | str, **options: Any) -> Iterator[Any]:
    """A persistent browser context of `CHROMIUM` with its profile in ``profile``, driven by a
    Playwright started for it; ``options`` go to Playwright's ``launch_persistent_context`` (a
    viewport, ...). Closed, and Playwright stopped, at the end."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        raise RuntimeError(NO_CHROMIUM)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), **options
        )
        try:
            yield context
        finally:
            context.close()
