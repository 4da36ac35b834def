"""Where the store is: a SQLAlchemy URL (``sqlite:///rel.db``, ``sqlite:////abs.db``,
``postgresql+psycopg://user:pass@host/db``) or a plain SQLite file path, from ``--store``, else
``$HEALTHBENCH_STORE``, else ``healthbench.db`` in the user data folder. URLs are only ever shown with
their password hidden (`shown`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from healthbench.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

STORE_ENV = "HEALTHBENCH_STORE"
SUPPORTED = ("sqlite", "postgresql")
_MANGLED_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")  # two letters or more: not a drive letter


def default_store_path() -> Path:
    return Path(platformdirs.user_data_dir("healthbench")) / "healthbench.db"


def store_url(target: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> URL:
    """The SQLAlchemy URL of a store given as a URL or a path (None: the environment, then the default)."""
    from sqlalchemy.engine import URL, make_url  # (imported when needed: ~0.2 s)
    from sqlalchemy.exc import ArgumentError

    text = _store_text(target, environ)
    path = _sqlite_path(text)
    if path is not None:
        return URL.create("sqlite", database=str(path))
    try:
        url = make_url(text)
    except ArgumentError:
        raise StoreError(f"--store: cannot parse {hide_password(text)!r} as a URL or a path") from None
    if url.drivername == "postgresql":  # SQLAlchemy's default driver would be psycopg2; we use psycopg 3
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() not in SUPPORTED:
        raise StoreError(
            f"--store: unsupported database {url.get_backend_name()!r} in {shown(url)}; "
            "use a SQLite path, sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DB"
        )
    return url


def _store_text(target: str | os.PathLike[str] | None, environ: Mapping[str, str] | None) -> str:
    env = os.environ if environ is None else environ
    return os.fspath(target) if target is not None else env.get(STORE_ENV) or str(default_store_path())


def _sqlite_path(text: str) -> Path | None:
    """The absolute file of a store given as a plain path (None: ``text`` is a URL)."""
    if "://" in text:
        return None
    if _MANGLED_URL.match(text):  # Path("postgresql+psycopg://u@h/db") gives "postgresql+psycopg:/u@h/db"
        raise StoreError(
            f"--store: {hide_password(text)!r} looks like a URL with a slash missing after the "
            "scheme (SCHEME://...); a SQLite file path has no 'scheme:' in front"
        )
    return Path(text).expanduser().absolute()


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite store (None for PostgreSQL and in-memory SQLite)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` (None: no file there): a SQLite store deleted or
    replaced while it is open keeps being written by SQLite, so this is how it is noticed."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def store_file(target: str | os.PathLike[str] | None = None) -> Path | None:
    """The SQLite file a ``--store`` value names (None for PostgreSQL), e.g. to keep outputs off it;
    a plain path is answered without loading SQLAlchemy."""
    path = _sqlite_path(_store_text(target, None))
    return path if path is not None else sqlite_file(store_url(target))


def shown(url: URL) -> str:
    """The URL as printed: password hidden."""
    return url.render_as_string(hide_password=True)


def hide_password(text: str) -> str:
    """``text`` with the password of any URL in it hidden (for messages built from user input)."""
    return re.sub(r"(://?[^:/@]*:)[^@/]*@", r"\1***@", text)
