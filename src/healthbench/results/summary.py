"""The content of a run's summary: overall score with its CI, then themes, then axes (then
HealthBench Professional's task tags), then the ungraded count, as plain rows (`summary_rows`), all
of it in a `Summary` (`summary_of`). The terminal rendering is
`healthbench.cli.summary_view.render_summary`.

Importing this module loads no numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from healthbench.scoring.run_score import RunScore

Section = Literal["overall", "theme", "axis", "use_case", "type", "difficulty", "specialty"]
# sections after the overall rows, by key prefix; the last four are HealthBench Professional's task tags
SECTIONS: tuple[tuple[str, Section, str], ...] = (
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
    from healthbench.scoring.rubric import OVERALL
    from healthbench.scoring.run_score import ERROR_RATE, LENGTH_ADJUSTED

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
    for prefix, section, _ in SECTIONS:
        for key in sorted(k for k in run_score.stats if k.startswith(prefix)):
            stats = run_score.stats[key]
            rows.append(SummaryRow(section, key, stats.mean, stats.ci_lower, stats.ci_upper, stats.n_samples))
    return rows


def ci_unit(n_answers: int, n_conversations: int) -> str:
    """What a CI (or a count) is over: ``80 conversations`` with one answer each, else ``80
    conversations × 3 answers`` (``× 2.5 answers on average`` when not whole): the bootstrap then
    draws conversations with all their answers."""
    if n_answers == n_conversations or n_conversations == 0:
        return f"{n_conversations:,} conversations"
    per = n_answers / n_conversations
    each = f"{per:g} answers" if per == int(per) else f"{per:.1f} answers on average"
    return f"{n_conversations:,} conversations × {each}"


def unit_line(run_score: RunScore) -> str | None:
    """``CIs over 80 conversations × 3 answers (...)`` when some conversation has several graded
    answers (repeats), else None (the CI is over answers, which are the conversations)."""
    from healthbench.scoring.rubric import OVERALL

    overall = run_score.stats.get(OVERALL)
    if overall is None or overall.n_conversations == overall.n_samples:
        return None
    return (
        f"CIs over {ci_unit(overall.n_samples, overall.n_conversations)} (overall): each bootstrap draw "
        "takes a conversation with all its answers; the means are over answers"
    )


def ungraded_line(run_score: RunScore | Summary) -> str:
    return (
        f"ungraded: {run_score.ungraded_criteria} criteria in {run_score.ungraded_samples} of "
        f"{run_score.n_samples} samples (left out of every score)"
    )


@dataclass(frozen=True)
class Summary:
    """Everything a run's summary shows: its rows (`summary_rows`), the CI level, what the CIs are
    over (`unit_line`) and the ungraded counts."""

    rows: tuple[SummaryRow, ...]
    confidence: float
    unit: str | None
    n_samples: int
    ungraded_criteria: int
    ungraded_samples: int


def summary_of(run_score: RunScore) -> Summary:
    """The `Summary` of a scored run."""
    return Summary(
        rows=tuple(summary_rows(run_score)),
        confidence=run_score.options.confidence,
        unit=unit_line(run_score),
        n_samples=run_score.n_samples,
        ungraded_criteria=run_score.ungraded_criteria,
        ungraded_samples=run_score.ungraded_samples,
    )
