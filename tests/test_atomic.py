"""Atomic writes: whole or nothing, with the permissions the user's umask gives (not mkstemp's 0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from healthbench.atomic import atomic_writer
from healthbench.results.metrics_out import write_metrics


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_exported_files_get_the_umask_permissions(tmp_path: Path, umask_022: None) -> None:
    path = write_metrics(tmp_path / "out" / "m.json", {"overall_score": 0.5})
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == '{\n  "overall_score": 0.5\n}\n'


def test_a_failed_write_leaves_neither_the_target_nor_a_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write(b"new, half written")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
