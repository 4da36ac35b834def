"""Terminal views of `healthbench analyze` and `healthbench compare` (rich tables; user text literal)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from rich import box
from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from healthbench.analysis.analyze import Analysis
from healthbench.analysis.compare import FEW_CONVERSATIONS, Comparison, GateDecision, p_text
from healthbench.analysis.tables import ALL
from healthbench.results.summary import ci_unit

FLIPS_SHOWN = 10


def _num(value: float | None, digits: int = 4, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _warn(console: Console, lines: Sequence[str]) -> None:
    for line in lines:
        console.print(Text(f"warning: {line}", style="yellow"), soft_wrap=True)


def render_analysis(analysis: Analysis, console: Console) -> None:
    runs = Table(title="Overall score per run (95% bootstrap CI over conversations)", title_justify="left")
    for name in ("model", "run", "score", "95% CI", "CI over"):
        runs.add_column(
            name,
            justify="right" if name == "score" else "left",
            no_wrap=name in ("95% CI", "CI over"),
            overflow="fold",  # wrap names, never cut them
        )
    for row in analysis.themes.filter(analysis.themes["theme"] == ALL).iter_rows(named=True):
        runs.add_row(
            Text(row["model"]),
            Text(row["run_id"]),
            _num(row["mean"]),
            f"{_num(row['lower_ci'])} - {_num(row['upper_ci'])}",
            ci_unit(row["n_samples"], row["n_conversations"]),
        )
    console.print(runs)
    models = Table(title="Per model across runs", title_justify="left")
    for name in ("model", "runs", "mean", "std", "min", "max"):
        models.add_column(name, justify="left" if name == "model" else "right")
    for row in analysis.models.iter_rows(named=True):
        models.add_row(
            Text(row["model"]),
            str(row["n_runs"]),
            _num(row["mean"]),
            _num(row["std"]),
            _num(row["min"]),
            _num(row["max"]),
        )
    console.print(models)
    worst = analysis.worst_at_k
    if worst.height:
        curves = Table(
            title="Worst-at-k (expected worst of k answers per conversation; 95% CI over conversations)",
            title_justify="left",
        )
        for name in ("model", "run", "k", "worst-at-k", "95% CI", "conversations"):
            curves.add_column(
                name,
                justify="left" if name in ("model", "run", "95% CI") else "right",
                no_wrap=name != "model",
                overflow="fold",
            )
        for row in worst.iter_rows(named=True):
            curves.add_row(
                Text(row["model"]),
                Text(row["run_id"]),
                str(row["k"]),
                _num(row["worst_at_k"]),
                f"{_num(row['lower_ci'])} - {_num(row['upper_ci'])}",
                str(row["n_conversations"]),
            )
        console.print(curves)
    _warn(console, analysis.warnings)


def print_whole(console: Console, table: RenderableType) -> None:
    """A table on a terminal at the terminal's width; in a pipe or a file (no terminal, no
    ``COLUMNS``) at its own width, so that no column is folded to fit 80 characters."""
    if console.is_terminal or "COLUMNS" in os.environ:
        console.print(table)
        return
    needed = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if needed <= console.width:
        console.print(table)
        return
    wide = type(console)(file=console.file, width=needed, no_color=console.no_color, highlight=False)
    wide.print(table)  # (the same class: a reader that stops early is handled the same way)


def render_comparison(
    comparison: Comparison,
    console: Console,
    *,
    extra_warnings: Sequence[str] = (),
    gates: Sequence[GateDecision] = (),
) -> None:
    overall = comparison.overall.result
    title = Text(
        f"B = {comparison.b} ({overall.mean_b:.4f}) vs A = {comparison.a} ({overall.mean_a:.4f}): "
        "B - A with paired bootstrap 95% CIs"
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("group", overflow="fold")
    columns = (("n", 5), ("B - A", 6), ("95% CI", 14), ("p", 7), ("p (Holm)", 8), ("verdict", 13))
    for name, width in columns:
        table.add_column(
            name, justify="left" if name == "verdict" else "right", min_width=width, no_wrap=True
        )
    for row in comparison.rows:
        r = row.result
        style = {"better": "green", "worse": "red"}.get(row.verdict)
        table.add_row(
            Text(row.group + (" *" if r.clipped else "")),
            str(r.n),
            _num(r.difference, 3, signed=True),
            f"{_num(r.ci_lower, 3, signed=True)}..{_num(r.ci_upper, 3, signed=True)}",
            p_text(r.p_value, comparison.n_resamples),
            "" if row.kind == ALL else p_text(row.p_holm, comparison.n_resamples),
            Text(row.verdict, style=style or ""),
        )
    print_whole(console, table)
    console.print(
        Text(
            "theme and axis verdicts use Holm-adjusted p-values within their table; "
            f"rows with fewer than {FEW_CONVERSATIONS} paired conversations get none (n too small)"
        ),
        soft_wrap=True,
    )
    if comparison.clipped_groups:
        console.print(
            Text(
                "* clipping to [0, 1] binds on "
                + ", ".join(comparison.clipped_groups)
                + ": B - A, its CI and p are of the unclipped means; the scores shown are clipped"
            ),
            soft_wrap=True,
        )
    flips = comparison.flips
    improved = sum(f.improved for f in flips)
    console.print(
        Text(
            f"{len(flips)} conversation(s) flipped at score 0.5: {improved} now pass, "
            f"{len(flips) - improved} now fail"
        )
    )
    for flip in flips[:FLIPS_SHOWN]:
        console.print(Text(f"  {flip.prompt_id}: {flip.score_a:.3f} -> {flip.score_b:.3f}"), soft_wrap=True)
    margin = f" at margin {comparison.margin}" if comparison.margin else ""
    console.print(Text(f"verdict{margin}: {comparison.verdict}", style="bold"))
    for gate in gates:
        outcome = "pass" if gate.passed else "FAIL"
        console.print(
            Text(f"gate {gate.option} {gate.threshold:g}: {outcome} - {gate.rule}", style="bold"),
            soft_wrap=True,
        )
    _warn(console, [*extra_warnings, *comparison.warnings])
