"""Runs that end badly: every error or interruption after a run was stored ends with the exact
command that continues it, and a run that has not answered every conversation never exits 0."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from healthbench.cli.app import fail
from healthbench.errors import HealthBenchError, StoreGoneError, Terminated
from healthbench.store import Store

if TYPE_CHECKING:
    from healthbench.executors.progress import ProgressSink, RunCounters


def resume_command(name: str, *, kind: str = "eval", store: str | Path | None = None) -> str:
    """The exact command line that continues run ``name``."""
    command = "meta-eval" if kind == "meta_eval" else "run"
    words = ["healthbench", command, "--resume", name]
    if store is not None:
        words += ["--store", str(store)]
    return shlex.join(words)


class Started:
    """Whether the run was seen executing (its progress was updated): it is stored then, even when the
    store cannot say so (a PostgreSQL server that stopped)."""

    def __init__(self) -> None:
        self.executing = False

    def watch(self, sink: ProgressSink) -> ProgressSink:
        """``sink``, noting that the run executes at its first update."""
        return _Watched(self, sink)


class _Watched:
    def __init__(self, started: Started, sink: ProgressSink) -> None:
        self.started, self.sink = started, sink

    def update(self, counters: RunCounters) -> None:
        self.started.executing = True
        self.sink.update(counters)


@contextmanager
def continuable(store: Store, name: str, *, kind: str, store_flag: str | Path | None) -> Iterator[Started]:
    """Errors and interruptions inside: one line that ends with how to continue the run (when it was
    stored; a start that failed before storing it, or a run whose store file was deleted, has nothing
    to continue). Progress given to ``.watch`` of what it yields tells a run that executed (and so
    was stored) when the store itself has failed."""
    started = Started()
    try:
        yield started
    except (HealthBenchError, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            message = "terminated" if isinstance(exc, Terminated) else "interrupted"
            code = Terminated.exit_code if isinstance(exc, Terminated) else 130
        else:
            message, code = str(exc), exc.exit_code
        stored = None if isinstance(exc, StoreGoneError) else _stored(store, name)
        if stored is None and started.executing and not isinstance(exc, StoreGoneError):
            stored = kind  # the store failed (it cannot say), but the run was executing: it is stored
        if stored is None:
            raise fail(message, code) from None
        if isinstance(exc, KeyboardInterrupt):
            message += "; everything finished so far is saved"
        command = resume_command(name, kind=stored, store=store_flag)  # the run's kind, not the command's
        raise fail(f"{message}; continue with: {command}", code) from None


def _stored(store: Store, name: str) -> str | None:
    """The kind of the stored run ``name`` (None: not stored)."""
    try:
        run = store.get_run(name)
    except Exception:  # the store itself failed: the original error is the one to show
        return None
    return None if run is None else run.kind
