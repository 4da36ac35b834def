"""Whether the service can do its work: the state of its job workers (`WorkerHealth`), what
``/health/ready`` answers, and how a store outage meets a request (503, logged once in a while).

Liveness is only "the process answers"; readiness is "the store answers and the job workers run".
What the probes say is public (Kubernetes sends no token), so it names no store, path, host or error
text: those go to the service's log.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from healthbench.errors import StoreError
from healthbench.store.jobs import JobStore

LOG = logging.getLogger("healthbench.service")
STORE_RETRY_AFTER = 5  # seconds a client is told to wait when the store does not answer (Retry-After)
OUTAGE_NOTE_EVERY = 30.0  # seconds between two log lines about requests refused for a store outage


@dataclass(frozen=True)
class WorkerHealth:
    """The job workers' state: ``running`` (their thread or process is alive), and while they cannot
    reach the store, that failure's one line (``store_error``) and since when (epoch seconds);
    ``starting``: their process is alive but has not said so yet."""

    running: bool
    store_error: str | None = None
    since: float | None = None
    starting: bool = False

    @property
    def healthy(self) -> bool:
        """Claiming and running jobs: alive and reaching the store."""
        return self.running and self.store_error is None

    @property
    def state(self) -> str:
        """Public words: running, waiting for the store, starting or stopped."""
        if not self.running:
            return "starting" if self.starting else "stopped"
        return "running" if self.store_error is None else "waiting for the store"


class HealthSource(Protocol):
    """What the HTTP app reads the workers' state from (`JobWorkers` or `WorkerProcess`)."""

    def health(self) -> WorkerHealth: ...


@dataclass(frozen=True)
class Readiness:
    store: str  # "ok" | "unreachable"
    workers: str  # WorkerHealth.state, or "none" (no workers in this process)

    @property
    def ready(self) -> bool:
        return self.store == "ok" and self.workers == "running"

    @property
    def reason(self) -> str:
        """Why not ready, in public words."""
        parts = []
        if self.store != "ok":
            parts.append("the store does not answer")
        if self.workers != "running":
            parts.append(f"job workers: {self.workers}")
        return "; ".join(parts)


def readiness(jobs: JobStore, workers: HealthSource | None, notes: OutageNotes) -> Readiness:
    """Ask the store (one trivial query) and the workers; a store failure goes to ``notes``."""
    try:
        jobs.ping()
        store = "ok"
    except StoreError as exc:
        notes.note(exc)
        store = "unreachable"
    return Readiness(store, workers.health().state if workers is not None else "none")


class OutageNotes:
    """Logs the HTTP process's store failures (a request refused with 503, a readiness probe): the
    first of an outage, then at most one line every ``every`` seconds (polling clients and probes
    must not flood the log)."""

    def __init__(self, every: float = OUTAGE_NOTE_EVERY) -> None:
        self._every = every
        self._last: float | None = None

    def note(self, exc: StoreError) -> None:
        now = time.monotonic()
        if self._last is None or now - self._last >= self._every:
            self._last = now
            LOG.warning("the store does not answer (%s): requests answer 503 meanwhile", exc)
