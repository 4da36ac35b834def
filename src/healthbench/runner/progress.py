"""What a run reports while it works: counters every caller gets, and a rich progress display."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


@dataclass
class RunCounters:
    """Live totals of one engine pass (also the engine's report when it ends)."""

    samples_total: int = 0
    samples_done: int = 0
    samples_failed: int = 0
    criteria_total: int = 0
    criteria_done: int = 0
    ungraded: int = 0
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0  # calls to a model with no known price: their cost is unknown
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.elapsed if self.elapsed > 0 else 0.0


class ProgressSink(Protocol):
    def update(self, counters: RunCounters) -> None: ...


class NoProgress:
    def update(self, counters: RunCounters) -> None:
        return None


class RichProgress:
    """Two bars (conversations sampled, criteria graded) and a line of calls/s, tokens and spend."""

    def __init__(self, console: Console | None = None, *, label: str = "conversations sampled") -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=False,
        )
        self._label = label
        self._samples: TaskID | None = None
        self._criteria: TaskID | None = None

    def __enter__(self) -> RichProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._samples is not None:
            self._progress.stop()

    def _start(self) -> None:
        """Shown from the first update on, so an error found before any work (bad data, a missing
        key) is not preceded by empty bars."""
        self._progress.start()
        self._samples = self._progress.add_task(self._label, total=None, info="")
        self._criteria = self._progress.add_task("criteria graded", total=None, info="")

    def update(self, counters: RunCounters) -> None:
        if self._samples is None:
            self._start()
        assert self._samples is not None and self._criteria is not None
        self._progress.update(
            self._samples,
            total=counters.samples_total,
            completed=counters.samples_done,
            info=f"[red]{counters.samples_failed} failed[/]" if counters.samples_failed else "",
        )
        info = (
            f"{counters.calls_per_second:6.1f} calls/s · {counters.calls} calls · "
            f"{counters.cache_hits} cached · {counters.input_tokens + counters.output_tokens:,} tok · "
            f"${counters.cost:.4f}" + ("+?" if counters.unpriced_calls else "")
        )
        if counters.ungraded:
            info += f" · [red]{counters.ungraded} ungraded[/]"
        self._progress.update(
            self._criteria, total=counters.criteria_total, completed=counters.criteria_done, info=info
        )
