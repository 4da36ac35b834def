"""The content of a run's summary: overall score with its CI, then themes, then axes (then
HealthBench Professional's task tags), then the ungraded count, as plain rows (`summary_rows`), and
for a panel of judges each member's own scores and the members' agreement (`JudgeRow`, `panel_line`),
all of it in a `Summary` (`summary_of`). The terminal rendering is
`healthbench.cli.summary_view.render_summary`.

Importing this module loads no numpy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from healthbench.results.panel_scores import PanelFigures
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
class JudgeRow:
    """One member of a panel: its own overall score (``judge:<label>:overall_score``) with its CI, and
    its axis scores (``judge:<label>:axis:<axis>``), from its own verdicts."""

    label: str
    overall: SummaryRow | None  # None when the member graded nothing
    axes: tuple[tuple[str, float], ...]  # (axis name, score), by name


def judge_rows(panel: PanelFigures) -> list[JudgeRow]:
    """The members' rows, in panel order (the chair first)."""
    from healthbench.scoring.rubric import OVERALL

    rows = []
    for label in panel.members:
        stats = panel.scores[label].stats
        overall = stats.get(OVERALL)
        row = None
        if overall is not None:
            key = f"judge:{label}:{OVERALL}"
            row = SummaryRow(
                "overall", key, overall.mean, overall.ci_lower, overall.ci_upper, overall.n_samples
            )
        axes = tuple(
            (key.split(":", 1)[1], stats[key].mean)
            for key in sorted(k for k in stats if k.startswith("axis:") and k.count(":") == 1)
        )
        rows.append(JudgeRow(label, row, axes))
    return rows


def panel_line(panel: PanelFigures) -> str:
    """``panel of 3 judges, rule majority · judge_agreement 0.8125 over 96 criteria graded by every
    member · judge_fleiss_kappa 0.6012`` (``-`` where undefined)."""

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    return (
        f"panel of {len(panel.members)} judges, rule {panel.rule} · judge_agreement "
        f"{shown(panel.agreement)} over {panel.graded_by_all:,} criteria graded by every member · "
        f"judge_fleiss_kappa {shown(panel.fleiss_kappa)}"
    )


@dataclass(frozen=True)
class Summary:
    """Everything a run's summary shows: its rows (`summary_rows`), the CI level, what the CIs are
    over (`unit_line`) and the ungraded counts; for a panel, its members' rows and agreement."""

    rows: tuple[SummaryRow, ...]
    confidence: float
    unit: str | None
    n_samples: int
    ungraded_criteria: int
    ungraded_samples: int
    judges: tuple[JudgeRow, ...] = ()  # a panel's members (empty for a single judge)
    panel: str | None = None  # `panel_line`, then the calibrated rule's pooled line, if any


def summary_of(run_score: RunScore, panel: PanelFigures | None = None) -> Summary:
    """The `Summary` of a scored run (with ``panel``: its members and agreement)."""
    lines = [panel_line(panel), panel.pooled_line()] if panel is not None else []
    return Summary(
        rows=tuple(summary_rows(run_score)),
        confidence=run_score.options.confidence,
        unit=unit_line(run_score),
        n_samples=run_score.n_samples,
        ungraded_criteria=run_score.ungraded_criteria,
        ungraded_samples=run_score.ungraded_samples,
        judges=tuple(judge_rows(panel)) if panel is not None else (),
        panel="\n".join(line for line in lines if line) or None,
    )
