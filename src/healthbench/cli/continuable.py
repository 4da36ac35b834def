"""Runs that end badly: every error or interruption after a run was stored ends with the exact
command that continues it, and a run that has not answered every conversation never exits 0."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from healthbench.cli.app import fail
from healthbench.errors import ConfigError, HealthBenchError, Terminated
from healthbench.store import Store

T = TypeVar("T")


def resume_command(name: str, *, kind: str = "eval", store: Path | None = None) -> str:
    """The exact command line that continues run ``name``."""
    command = "meta-eval" if kind == "meta_eval" else "run"
    words = ["healthbench", command, "--resume", name]
    if store is not None:
        words += ["--store", str(store)]
    return shlex.join(words)


@contextmanager
def continuable(store: Store, name: str, *, kind: str, store_flag: Path | None) -> Iterator[None]:
    """Errors and interruptions inside: one line that ends with how to continue the run (when it was
    stored; a start that failed before storing it has nothing to continue)."""
    try:
        yield
    except (HealthBenchError, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            message = "terminated" if isinstance(exc, Terminated) else "interrupted"
            message += "; everything finished so far is saved"
            code = Terminated.exit_code if isinstance(exc, Terminated) else 130
        else:
            message, code = str(exc), exc.exit_code
        if store.get_run(name) is None:
            raise fail(message, code) from None
        command = resume_command(name, kind=kind, store=store_flag)
        raise fail(f"{message}; continue with: {command}", code) from None


def call_continuable(
    store: Store, name: str, fn: Callable[[], T], *, kind: str, store_flag: Path | None
) -> T:
    with continuable(store, name, kind=kind, store_flag=store_flag):
        return fn()


def refuse_with_resume(flags: dict[str, Any]) -> None:
    """--resume continues a run with its stored settings: a flag that would change them is an error."""
    given = [flag for flag, value in flags.items() if value not in (None, [], False)]
    if given:
        raise ConfigError(
            f"--resume keeps the run's stored name and settings; drop {', '.join(given)} "
            "(or start a new run without --resume)"
        )
