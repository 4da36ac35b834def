"""What `healthbench serve` checks before it says it serves: that its port is free, and that a SQLite
store is private to the service's user (docs/service.md, "What an operator must protect")."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from healthbench.errors import ConfigError


def check_port(host: str, port: int) -> None:
    """A `ConfigError` naming the address when nothing can listen on it (another server has it): the
    service then never says "serving on" (uvicorn alone would fail only after that line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.create_server((host, port), family=family):  # SO_REUSEADDR, as uvicorn binds
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigError(f"cannot serve on {host}:{port}: {reason} (taken? try another --port)") from None


def private_store(path: Path) -> list[str]:
    """Make a new SQLite store file mode 0600 (in a folder made 0700), before SQLite would create it
    with the umask's 0644; SQLite gives its ``-wal`` and ``-shm`` files the same mode. For a store that
    exists, the warnings to print: a file others can read, or a folder others can write."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # SQLite takes an empty file
    warnings: list[str] = []
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        warnings.append(
            f"the store {path} is open to other users (mode {mode:04o}); it holds every workspace's "
            f"jobs and the token hashes: chmod 600 {path}"
        )
    folder_mode = path.resolve().parent.stat().st_mode
    if stat.S_IMODE(folder_mode) & 0o022 and not folder_mode & stat.S_ISVTX:
        warnings.append(
            f"the store's folder {folder} is writable by other users (mode "
            f"{stat.S_IMODE(folder_mode):04o}): they can replace the store; chmod go-w {folder}"
        )
    return warnings
