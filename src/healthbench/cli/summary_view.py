"""The terminal rendering of a run's summary (`healthbench.results.summary.Summary`): one rich
table per section, then the ungraded line."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table
from rich.text import Text

from healthbench.results.summary import SECTIONS, Summary, SummaryRow, ungraded_line


def literal(text: str) -> str:
    """User text (a run name, a theme) as it is shown on a terminal: every character that is not
    printable (ESC and the other control characters, bidi overrides) as its Python escape, e.g.
    ``\\x1b[2J``, so that a name can neither clear the screen nor disguise itself."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def render_summary(summary: Summary, *, title: str, console: Console) -> None:
    """Print the summary tables and the ungraded line (red when anything is ungraded)."""
    level = f"{summary.confidence:.0%} CI"
    rows = summary.rows
    if not rows:
        console.print(Text(f"{literal(title)}: no graded samples, so no score", style="bold"))
    for section, heading in (("overall", title), *((name, heading) for _, name, heading in SECTIONS)):
        chosen = [row for row in rows if row.section == section]
        if not chosen:
            continue
        table = Table(title=Text(literal(heading)), title_justify="left", title_style="bold")
        table.add_column("metric" if section == "overall" else section, overflow="fold")  # wrap, never cut
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column(level, justify="right", no_wrap=True)
        table.add_column("n", justify="right", no_wrap=True)
        for row in chosen:
            table.add_row(Text(literal(row.label)), f"{row.mean:.4f}", _interval(row), str(row.n_samples))
        console.print(table)
    if summary.judges:
        _render_judges(summary, level, console)
    if summary.unit is not None:
        console.print(Text(summary.unit))
    style = "bold red" if summary.ungraded_criteria > 0 else "green"
    console.print(Text(ungraded_line(summary), style=style))


def _render_judges(summary: Summary, level: str, console: Console) -> None:
    """A panel's members, each with its own score, CI and n; then their axis scores (an axis a row, a
    member a column: a table that fits a terminal's width, whatever the number of axes); then the
    agreement line."""
    table = Table(
        title=Text("By judge (each member's own verdicts)"), title_justify="left", title_style="bold"
    )
    table.add_column("judge", overflow="fold")
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column(level, justify="right", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for judge in summary.judges:
        row = judge.overall
        table.add_row(
            Text(literal(judge.label)),
            f"{row.mean:.4f}" if row is not None else "-",
            _interval(row) if row is not None else "-",
            str(row.n_samples) if row is not None else "0",
        )
    console.print(table)
    axes = sorted({axis for judge in summary.judges for axis, _ in judge.axes})
    if axes:
        by_axis = Table(title=Text("By judge and axis"), title_justify="left", title_style="bold")
        by_axis.add_column("axis", overflow="fold")
        for judge in summary.judges:
            by_axis.add_column(Text(literal(judge.label)), justify="right", overflow="fold", min_width=6)
        scores = [dict(judge.axes) for judge in summary.judges]
        for axis in axes:
            by_axis.add_row(Text(literal(axis)), *(f"{s[axis]:.4f}" if axis in s else "-" for s in scores))
        console.print(by_axis)
    for line in (summary.panel or "").splitlines():
        console.print(Text(literal(line)))


def _interval(row: SummaryRow) -> str:
    if math.isnan(row.ci_lower) or math.isnan(row.ci_upper):
        return "-"
    return f"[{row.ci_lower:.4f}, {row.ci_upper:.4f}]"
