"""Atomic file writes: a temporary file next to the target, renamed over it when complete.

The temporary file is created with mode 0o666 minus the umask, like any file the user creates
(`tempfile.mkstemp` would make every export and download 0600), and is removed if writing fails.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_writer(target: str | os.PathLike[str], *, suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """``with atomic_writer(path) as out: out.write(b"...")``: ``path`` appears whole or not at all."""
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = final.parent / f".{final.name}.{secrets.token_hex(4)}{suffix}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        os.replace(temp, final)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
