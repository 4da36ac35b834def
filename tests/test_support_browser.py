"""tests/support/browser.py finds Chromium as ``$HEALTHBENCH_CHROMIUM`` or on ``PATH``, never at a
hard-coded path."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from support.browser import CHROMIUM_ENV, find_chromium


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_environment_variable_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = _executable(tmp_path / "my-chromium")
    monkeypatch.setenv(CHROMIUM_ENV, str(browser))
    monkeypatch.setenv("PATH", "")
    assert find_chromium() == browser
    monkeypatch.setenv(CHROMIUM_ENV, str(tmp_path / "missing"))
    assert find_chromium() is None  # a wrong path is not silently replaced by another browser


def test_path_is_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHROMIUM_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_chromium() is None
    browser = _executable(tmp_path / "chromium-browser")
    assert find_chromium() == browser
