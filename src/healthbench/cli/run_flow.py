"""The one start-resume-finish skeleton of the commands that call models (`run`, `regrade`,
`meta-eval`): open the store, start a run or continue a stored one under the progress display (an
error or interruption ends with the exact command that continues it), then the line of calls, tokens
and cost. Each command refuses what ``--resume`` cannot change (`refuse_with_resume`), says which run
it starts (`start_to_end`, `carry_out` for a regrade) or continues (`resume_to_end`), and how its
result is shown (`healthbench.cli.eval_report.finish_eval` for eval runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from healthbench.cli.app import console, err_console
from healthbench.cli.config_flags import resume_overrides
from healthbench.cli.continuable import continuable
from healthbench.cli.progress import DownloadBar, batch_summary, run_progress
from healthbench.executors.progress import resumed_note
from healthbench.models.tally import CallTally
from healthbench.telemetry import Tracing, maybe_span

if TYPE_CHECKING:
    from healthbench.config import RunConfig
    from healthbench.executors.progress import ProgressSink, RunCounters
    from healthbench.runner.run import RunKind, RunOutcome
    from healthbench.store import Store

# what the progress display counts, per stored run kind
PROGRESS_LABELS = {"eval": "conversations sampled", "meta_eval": "rows (fixed answers)"}


def carry_out(
    store: Store,
    name: str,
    step: Callable[[ProgressSink], RunOutcome],
    *,
    kind: str,
    store_flag: str | None,
    label: str | None = None,
    tracing: Tracing | None = None,
) -> RunOutcome:
    """Do ``step`` (start or continue run ``name``) under the progress display; an error or an
    interruption once the run is stored ends with the command that continues it (`continuable`).
    ``tracing``: the run is a span (telemetry.py), its model calls spans inside it."""
    with (
        continuable(store, name, kind=kind, store_flag=store_flag) as started,
        maybe_span(tracing, "healthbench run", **{"healthbench.run": name, "healthbench.run.kind": kind}),
        run_progress(console, label=label or PROGRESS_LABELS[kind]) as progress,
    ):
        return step(started.watch(progress))


def start_to_end(
    store: Store,
    config: RunConfig,
    name: str | None,
    run_kind: RunKind,
    *,
    store_flag: str | None,
    tracing: Tracing | None = None,
) -> RunOutcome:
    """Start run ``name`` (default generated) of ``run_kind`` with ``config`` and run it to the end."""
    from healthbench.runner.run import new_run_name

    name = name or new_run_name(run_kind.name_prefix)
    observer = None if tracing is None else tracing.observer()

    def step(progress: ProgressSink) -> RunOutcome:
        return run_kind.start(
            config,
            store=store,
            name=name,
            progress=progress,
            download_progress=DownloadBar(err_console),
            observer=observer,
        )

    return carry_out(store, name, step, kind=run_kind.kind, store_flag=store_flag, tracing=tracing)


def resume_to_end(
    ctx: typer.Context,
    store: Store,
    name: str,
    run_kind: RunKind,
    *,
    store_flag: str | None,
    tracing: Tracing | None = None,
) -> RunOutcome:
    """Continue the stored run ``name`` of ``run_kind`` to the end with its stored settings; the
    "how" flags given may change (`resume_overrides`). The command has refused the flags that would
    change the run (`refuse_with_resume`) first."""

    observer = None if tracing is None else tracing.observer()

    def step(progress: ProgressSink) -> RunOutcome:
        return run_kind.resume(
            name, store=store, overrides=resume_overrides(ctx.params), progress=progress, observer=observer
        )

    return carry_out(store, name, step, kind=run_kind.kind, store_flag=store_flag, tracing=tracing)


COST_PARTS = (
    ("input", "input"),
    ("cached_input", "cached input"),
    ("cache_write_input", "cache writes"),
    ("output", "output"),
)


def judge_cost_line(judge: CallTally) -> str | None:
    """``judge: 84% of input cached · $0.0412 input + $0.0210 cached input + $0.0890 output``: the
    judge's prompt-cache share and what each kind of token cost (None: no judge call made)."""
    if judge.made == 0 or not judge.input_tokens:
        return None
    share = judge.cached_share or 0.0
    line = f"judge: {share:.0%} of {judge.input_tokens:,} input tokens cached"
    if judge.cache_write_input_tokens:
        line += f" ({judge.cache_write_input_tokens:,} written to the cache)"
    parts = [f"${judge.cost_parts[k]:.4f} {label}" for k, label in COST_PARTS if judge.cost_parts.get(k)]
    if parts and not judge.unpriced_calls:
        line += " · " + " + ".join(parts)
    return line


def member_line(label: str, tally: CallTally) -> str:
    """``judge openai/gpt-4.1: 120 calls (40 from cache) · $0.0412``: one panel member's calls and cost."""
    cost = f"${tally.cost:.4f}" + (" + unknown (unpriced)" if tally.unpriced_calls else "")
    return f"judge {label}: {tally.made} calls ({tally.cached_calls} answered from cache) · {cost}"


def calls_line(counters: RunCounters, *, calls: str = "model calls") -> str:
    """What the run's calls took: calls (from cache), time, tokens, cost, failures; the batches on a
    second line when the run used any."""
    t = counters.tally
    line = (
        f"{t.made} {calls} ({t.cached_calls} answered from cache) in {counters.elapsed:.1f}s · "
        f"{t.input_tokens:,} input + {t.output_tokens:,} output tokens · ${t.cost:.4f}"
    )
    if t.unpriced_calls:
        line += f" + unknown cost of {t.unpriced_calls} calls to unpriced models (see --prices)"
    if counters.samples_failed:
        line += f" · {counters.samples_failed} conversations could not be sampled"
    if (note := resumed_note(counters)) is not None:
        line += f" · {note}"
    if (judge := judge_cost_line(counters.judge)) is not None:
        line += f"\n{judge}"
    if len(counters.members) > 1:  # a panel of judges: each member's calls and cost
        line += "".join(f"\n{member_line(label, t)}" for label, t in counters.members.items())
    batches = batch_summary(counters)
    return f"{line}\n{batches}" if batches else line
