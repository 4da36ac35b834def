"""What a run reports while it works: the counters every caller gets (cli/progress.py draws them)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from healthbench.models.base import Messages, ModelSpec, Usage
from healthbench.models.tally import CallTally


@dataclass
class RunCounters:
    """Live totals of one engine pass (also the engine's report when it ends)."""

    samples_total: int = 0
    samples_done: int = 0
    samples_failed: int = 0
    criteria_total: int = 0
    criteria_done: int = 0
    ungraded: int = 0
    tally: CallTally = field(default_factory=CallTally)  # answered calls, real or from the cache
    judge: CallTally = field(default_factory=CallTally)  # the judge's calls among them
    members: dict[str, CallTally] = field(default_factory=dict)  # ... each panel member's, by label
    retrying: str | None = None  # an endpoint outage in progress (see ConnectionPool.outage_note)
    criteria_at_start: int = 0  # criteria already done when this session started (for the ETA)
    # resuming a session that died (killed driver): at most this many of this session's calls repeat
    # calls whose answers that session lost (Ray executor: its in-flight budget); None: nothing lost
    repeat_bound: int | None = None
    started: float = field(default_factory=time.monotonic)
    # --batch (executors/batching.py): live batches ("judge batch in_progress 120/500"), and what it took
    batches: str | None = None
    batch_events: list[str] = field(default_factory=list)  # one line per batch failed as a whole
    batches_submitted: int = 0  # provider batches created by this session
    batches_resumed: int = 0  # batches of an earlier session polled again
    batches_resubmitted: int = 0  # batches that failed as a whole and were submitted again
    batch_requests: int = 0  # requests put in batches (a retried request counts each time)
    batch_failed_requests: int = 0  # requests that came back errored, expired or canceled
    batch_retried: int = 0  # ... and were put in a later batch
    batch_online: int = 0  # ... and were asked online instead (--batch-fallback online)

    def count_call(
        self,
        usage: Usage,
        cost: float | None,
        *,
        judge: bool | str = False,
        parts: Mapping[str, float] | None = None,
    ) -> None:
        """One model call that answered: its tokens, and its cost (by kind of token: ``parts``) when
        the model has a price. ``judge``: a judge's call (True), or a panel member's (its label)."""
        tokens = usage.as_dict()
        for tally in self._tallies(judge):
            tally.count(tokens, cost, parts=parts)

    def count_cache_hit(self, usage: Usage, *, judge: bool | str = False) -> None:
        """One call answered from the call cache: its tokens (those of the call that made the answer)
        count, as in the stored run's usage (`RunView.usage_totals`); nothing is paid."""
        tokens = usage.as_dict()
        for tally in self._tallies(judge):
            tally.count(tokens, 0.0, cached=True)

    def _tallies(self, judge: bool | str) -> tuple[CallTally, ...]:
        if not judge:
            return (self.tally,)
        if isinstance(judge, str):
            return (self.tally, self.judge, self.members.setdefault(judge, CallTally()))
        return (self.tally, self.judge)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def calls_per_second(self) -> float:
        return self.tally.made / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at this session's pace of graded criteria; None before the first one."""
        done = self.criteria_done - self.criteria_at_start
        if done <= 0 or self.elapsed <= 0:
            return None
        return (self.criteria_total - self.criteria_done) * self.elapsed / done


@dataclass(frozen=True, slots=True)
class CallReport:
    """One call of the engine as it ended, as the engine counted it (`Ledger`): what observers
    (service/metrics.py, telemetry.py) read. ``outcome``: ok, cached (answered from the call cache or
    by another request's batch answer: no model was asked) or failed (no answer after the retries)."""

    role: str  # candidate | judge
    spec: ModelSpec
    outcome: str
    usage: Usage | None  # what the provider billed (a cached answer: the original call's usage)
    cost: float | None  # None: failed, or the model has no price
    started: float  # time.time() when the call started
    seconds: float | None  # the model call's wall time (None: no model was asked, or a batch answer)
    response_model: str | None = None
    error: str | None = None  # the failure's type (outcome failed)
    verdict: str | None = None  # a judge call's final verdict (met, not_met, ungraded)
    messages: Messages | None = None  # the request and the answer (for --otel-content only)
    text: str | None = None


class CallObserver(Protocol):
    """Told of every call the engine makes (metrics, traces); `Engine` takes one (None: no overhead)."""

    def call_ended(self, report: CallReport) -> None: ...

    def call_retried(self, role: str, spec: ModelSpec, reason: str) -> None:
        """A failed attempt that will be retried (``reason``: rate_limit, transient, unreachable)."""
        ...


def observing(*observers: CallObserver | None) -> CallObserver | None:
    """One observer for several (None where none is given)."""
    present = [o for o in observers if o is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return _Observers(present)


class _Observers:
    def __init__(self, observers: list[CallObserver]) -> None:
        self.observers = observers

    def call_ended(self, report: CallReport) -> None:
        for observer in self.observers:
            observer.call_ended(report)

    def call_retried(self, role: str, spec: ModelSpec, reason: str) -> None:
        for observer in self.observers:
            observer.call_retried(role, spec, reason)


class ProgressSink(Protocol):
    def update(self, counters: RunCounters) -> None: ...


class NoProgress:
    def update(self, counters: RunCounters) -> None:
        return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def counters_info(c: RunCounters) -> str:
    """Calls/s, calls, cache hits, tokens and spend: the text every progress display shows."""
    t = c.tally
    info = (
        f"{c.calls_per_second:.1f} calls/s · {t.made} calls · {t.cached_calls} cached · "
        f"{t.input_tokens + t.output_tokens:,} tok · ${t.cost:.4f}" + ("+?" if t.unpriced_calls else "")
    )
    if c.ungraded:
        info += f" · {c.ungraded} ungraded"
    if c.samples_failed:
        info += f" · {c.samples_failed} not sampled"
    if c.repeat_bound is not None:
        info += f" · ≤{c.repeat_bound} repeated"
    if c.batch_retried or c.batch_online or c.batches_resubmitted:
        info += (
            f" · batch retries {c.batch_retried} · online {c.batch_online} · "
            f"resubmitted {c.batches_resubmitted}"
        )
    return info


def activity(c: RunCounters) -> str:
    """What the run waits on: an endpoint outage, provider batches (states and counts), and the last
    batch event (a batch failed as a whole)."""
    parts = [part for part in (c.retrying, c.batches) if part]
    if c.batch_events:
        parts.append(c.batch_events[-1])
    return " · ".join(parts)


def plain_line(c: RunCounters, label: str) -> str:
    """One progress line for logs (the CLI without a terminal, a service job's log): done/total,
    calls/s, ETA (and an outage in progress)."""
    line = (
        f"{label} {c.samples_done}/{c.samples_total} · criteria graded {c.criteria_done}/"
        f"{c.criteria_total} · {counters_info(c)} · elapsed {_duration(c.elapsed)} · ETA {_duration(c.eta)}"
    )
    waiting = activity(c)
    if waiting:
        line += f" · {waiting}"
    return line


def resumed_note(c: RunCounters) -> str | None:
    """What the CLI and a job's log say when a session continued one that was interrupted."""
    if c.repeat_bound is None:
        return None
    return f"resumed after an interrupted session: at most {c.repeat_bound} calls repeated"
