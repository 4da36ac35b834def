"""The terminal summary of a run: overall score with its CI, then themes, then axes (then
HealthBench Professional's task tags), then the ungraded count. `summary_rows` gives the same content
as plain rows (for tests and other renderers)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import ERROR_RATE, LENGTH_ADJUSTED, RunScore

Section = Literal["overall", "theme", "axis", "use_case", "type", "difficulty", "specialty"]
# sections after the overall rows, by key prefix; the last four are HealthBench Professional's task tags
_SECTIONS: tuple[tuple[str, Section, str], ...] = (
    ("theme:", "theme", "By theme"),
    ("axis:", "axis", "By axis"),
    ("use_case:", "use_case", "By use case"),
    ("type:", "type", "By type"),
    ("difficulty:", "difficulty", "By difficulty"),
    ("specialty:", "specialty", "By specialty"),
)


@dataclass(frozen=True)
class SummaryRow:
    """One line of the summary: a metric's clipped mean, its bootstrap CI and how many samples."""

    section: Section
    key: str
    mean: float
    ci_lower: float
    ci_upper: float
    n_samples: int

    @property
    def label(self) -> str:
        return self.key.split(":", 1)[1] if self.section != "overall" else self.key


def summary_rows(run_score: RunScore) -> list[SummaryRow]:
    """Overall score (plus length-adjusted score and error rate when computed), then ``theme:*``,
    ``axis:*`` and HealthBench Professional's task-tag keys, each section sorted by name."""
    rows: list[SummaryRow] = []
    for key in (OVERALL, LENGTH_ADJUSTED):
        stats = run_score.stats.get(key)
        if stats is not None:
            rows.append(
                SummaryRow("overall", key, stats.mean, stats.ci_lower, stats.ci_upper, stats.n_samples)
            )
    overall = run_score.stats.get(OVERALL)
    if run_score.options.error_rate and overall is not None:
        rows.append(
            SummaryRow(
                "overall",
                ERROR_RATE,
                1.0 - overall.mean,
                1.0 - overall.ci_upper,
                1.0 - overall.ci_lower,
                overall.n_samples,
            )
        )
    for prefix, section, _ in _SECTIONS:
        for key in sorted(k for k in run_score.stats if k.startswith(prefix)):
            stats = run_score.stats[key]
            rows.append(SummaryRow(section, key, stats.mean, stats.ci_lower, stats.ci_upper, stats.n_samples))
    return rows


def ungraded_line(run_score: RunScore) -> str:
    return (
        f"ungraded: {run_score.ungraded_criteria} criteria in {run_score.ungraded_samples} of "
        f"{run_score.n_samples} samples (left out of every score)"
    )


def render_summary(run_score: RunScore, *, title: str, console: Console) -> None:
    """Print the summary tables and the ungraded line (red when anything is ungraded)."""
    level = f"{run_score.options.confidence:.0%} CI"
    rows = summary_rows(run_score)
    if not rows:
        console.print(Text(f"{title}: no graded samples, so no score", style="bold"))
    for section, heading in (("overall", title), *((name, heading) for _, name, heading in _SECTIONS)):
        chosen = [row for row in rows if row.section == section]
        if not chosen:
            continue
        table = Table(title=Text(heading), title_justify="left", title_style="bold")
        table.add_column("metric" if section == "overall" else section, overflow="fold")  # wrap, never cut
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column(level, justify="right", no_wrap=True)
        table.add_column("n", justify="right", no_wrap=True)
        for row in chosen:
            table.add_row(Text(row.label), f"{row.mean:.4f}", _interval(row), str(row.n_samples))
        console.print(table)
    style = "bold red" if run_score.ungraded_criteria > 0 else "green"
    console.print(Text(ungraded_line(run_score), style=style))


def _interval(row: SummaryRow) -> str:
    if math.isnan(row.ci_lower) or math.isnan(row.ci_upper):
        return "-"
    return f"[{row.ci_lower:.4f}, {row.ci_upper:.4f}]"
