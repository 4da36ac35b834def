"""A real PostgreSQL server for the tests, started once per session (loaded by conftest.py).

Fixtures:
- ``pg_server``: the session's server (initdb into a private temp folder, listening only on a unix
  socket there, so parallel test sessions never collide); skips when the binaries are absent.
- ``pg_url``: a fresh, empty database on it for one test, as a ``postgresql+psycopg://`` URL.
- ``store_target``: parametrized over both back ends: a SQLite file path, then a PostgreSQL URL.
  Take it instead of a path to run a test on both.

A test that stops or restarts its server (`PgServer.stop`, `start`, `restart`) starts its own with
`running_server`, so that the session's server stays up for the others.

Debian's server binaries live in /usr/lib/postgresql/<version>/bin (not on PATH), and the server refuses
to run as root: as root, every server command runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import importlib.util
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_USER = "postgres"
PG_PORT = 5432  # only names the socket file inside our private folder: no TCP port is opened
_database_numbers = itertools.count(1)


def pg_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: PATH, then Debian's versioned folders (newest first)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    return next((Path(c) for c in candidates if Path(c, "initdb").exists()), None)


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class PgServer:
    socket_dir: Path
    user: str
    data: Path | None = None  # the data folder (given by `running_server`: stop/start/restart)
    options: str = ""

    def _ctl(self, *args: str) -> None:
        bindir = pg_bindir()
        assert bindir is not None and self.data is not None
        prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
        command = [str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.socket_dir / "log")]
        subprocess.run([*prefix, *command, *args], check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: every connection is closed, the server is gone until `start`."""
        self._ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        self._ctl("-o", self.options, "-w", "start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is closed, the server answers again once done."""
        self._ctl("-m", "fast", "-o", self.options, "-w", "restart")

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.socket_dir}&port={PG_PORT}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host=str(self.socket_dir), port=PG_PORT, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql)  # type: ignore[arg-type]


def unavailable() -> str | None:
    """Why no server can be started here (None when one can)."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed: pip install 'healthbench[postgres]'"
    if pg_bindir() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's `postgresql`"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            return "running as root and there is no `postgres` user to run the PostgreSQL server"
    return None


@contextmanager
def running_server() -> Iterator[PgServer]:
    """Start a throw-away server (see `unavailable` first); stop it and delete its files on exit."""
    bindir = pg_bindir()
    assert bindir is not None, unavailable()
    prefix = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="healthbench-pg-"))
    if prefix:
        shutil.chown(root, PG_USER)
    data = root / "data"
    user = PG_USER if prefix else pwd.getpwuid(os.geteuid()).pw_name

    def run(*command: str) -> None:
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", user, "-E", "UTF8", "--no-sync")
        options = f"-k {root} -p {PG_PORT} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options, "-w", "start")
        yield PgServer(root, user, data, options)
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session; stopped and deleted at the end."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A new empty database for this test (dropped afterwards), as a SQLAlchemy URL."""
    name = f"test_{os.getpid()}_{next(_database_numbers)}"
    pg_server.admin(f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)
    finally:
        pg_server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives, once per back end: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return str(request.getfixturevalue("pg_url"))
