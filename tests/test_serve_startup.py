"""`healthbench serve` before it serves (issue 32): a busy port is a one-line error before any
"serving on" line, and a new SQLite store is private to the service's user (0600, with its -wal and
-shm files), an existing one open to others is warned of."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from helpers import one_line_error
from support.service_process import service_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.service.startup import private_store

runner = CliRunner()


def test_a_busy_port_fails_before_serving_and_creates_nothing(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        store = tmp_path / "s.db"
        result = runner.invoke(
            app, ["serve", "--store", str(store), "--host", "127.0.0.1", "--port", str(port)]
        )
        assert one_line_error(result) == (
            f"error: cannot serve on 127.0.0.1:{port}: Address already in use (taken? try another --port)"
        )
        assert "serving on" not in result.stdout and not store.exists()


def test_serve_makes_its_sqlite_store_private(tmp_path: Path) -> None:
    store = tmp_path / "new" / "s.db"
    old = os.umask(0o022)  # the usual umask: files 0644 unless made otherwise
    try:
        with service_process(str(store)):
            pass
    finally:
        os.umask(old)
    made = [store, *(p for p in (Path(f"{store}-wal"), Path(f"{store}-shm")) if p.exists())]
    assert {stat.S_IMODE(p.stat().st_mode) for p in made} == {0o600}
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700


def test_an_open_store_or_folder_is_warned_of(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    store.write_bytes(b"")
    store.chmod(0o644)
    tmp_path.chmod(0o777)
    try:
        first, second = private_store(store)
    finally:
        tmp_path.chmod(0o700)
    assert first == (
        f"the store {store} is open to other users (mode 0644); it holds every workspace's jobs and "
        f"the token hashes: chmod 600 {store}"
    )
    assert second == (
        f"the store's folder {tmp_path} is writable by other users (mode 0777): they can replace the "
        f"store; chmod go-w {tmp_path}"
    )
    store.chmod(0o600)
    assert private_store(store) == []
