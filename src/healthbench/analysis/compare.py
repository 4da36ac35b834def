"""Paired comparison of two runs (or models): B against A on the conversations both graded.

Overall, per theme and per axis: the difference of means ``B - A`` with a paired bootstrap 95% CI
and a two-sided p-value (`healthbench.scoring.paired`), and a verdict ``better / worse / no
difference`` at a margin. The theme rows and the axis rows are each a family: their verdicts use
Holm-adjusted p-values (`healthbench.scoring.multiplicity`), and a row with fewer than
``FEW_CONVERSATIONS`` paired conversations gets no verdict (``n too small``). The release gates
(`Comparison.gates`) decide on the overall row. Conversations are paired by prompt_id (repeats averaged, see
`healthbench.analysis.scores`); a conversation ungraded in either run, or whose rubric differs
between the runs, is left out and counted in the warnings. A flipped conversation passed (score at
or above ``flip_threshold``) in one run and failed in the other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from healthbench.analysis.inputs import LoadedRun, grading_setup_warning
from healthbench.analysis.scores import AXIS_PREFIX, THEME_PREFIX, ConversationScores, conversation_scores
from healthbench.errors import DataError
from healthbench.scoring.multiplicity import holm
from healthbench.scoring.paired import (
    WORSE,
    PairedDifference,
    paired_bootstrap,
    significance_level,
    verdict,
)
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.stats import BootstrapOptions

DEFAULT_MARGIN = 0.0
DEFAULT_FLIP_THRESHOLD = 0.5
SMALL_OVERLAP = 0.9  # warn when fewer than this share of the larger run's conversations are paired
FEW_CONVERSATIONS = 30  # warn when fewer are paired; theme / axis rows below this get no verdict
ALL = "all"
N_TOO_SMALL = "n too small"
FAIL_IF_WORSE_BY = "--fail-if-worse-by"
REQUIRE_NON_INFERIORITY = "--require-non-inferiority"


@dataclass(frozen=True)
class GroupComparison:
    """One row of a comparison: ``kind`` is ``all``, ``theme`` or ``axis``; ``name`` the theme or axis
    name (``all`` for the overall row)."""

    kind: str
    name: str
    result: PairedDifference
    verdict: str
    p_holm: float | None = None  # Holm-adjusted across the table's rows with a verdict (not overall)

    @property
    def group(self) -> str:
        """``all``, or ``theme:NAME`` / ``axis:NAME``."""
        return ALL if self.kind == ALL else f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class GateDecision:
    """One release gate on the overall row: ``option`` and its ``threshold`` D, whether it passed, and
    the ``rule`` that decided, in words with the numbers."""

    option: str
    threshold: float
    passed: bool
    rule: str


@dataclass(frozen=True)
class Flip:
    """A conversation that passed in one run and failed in the other (``improved``: B passed)."""

    prompt_id: str
    score_a: float
    score_b: float

    @property
    def improved(self) -> bool:
        return self.score_b > self.score_a


@dataclass(frozen=True)
class Comparison:
    a: str  # label (model/run_id) of the baseline
    b: str
    overall: GroupComparison
    themes: tuple[GroupComparison, ...]
    axes: tuple[GroupComparison, ...]
    flips: tuple[Flip, ...]
    n_a: int  # conversations with a score in A
    n_b: int
    margin: float
    seed: int
    n_resamples: int
    warnings: tuple[str, ...]

    @property
    def verdict(self) -> str:
        return self.overall.verdict

    @property
    def n_common(self) -> int:
        return self.overall.result.n

    @property
    def rows(self) -> tuple[GroupComparison, ...]:
        return (self.overall, *self.themes, *self.axes)

    @property
    def clipped_groups(self) -> tuple[str, ...]:
        """Rows where clipping to [0, 1] binds (their difference is of unclipped means)."""
        return tuple(row.group for row in self.rows if row.result.clipped)

    def worse_by(self, threshold: float) -> bool:
        """B is worse than A by more than ``threshold`` (and the CI lies below 0): a CI gate."""
        return verdict(self.overall.result, threshold) == WORSE

    def non_inferior(self, threshold: float) -> bool:
        """The CI's lower bound of B - A lies above ``-threshold``: B is at most ``threshold`` worse."""
        return self.overall.result.ci_lower > -threshold

    def gates(
        self, *, fail_if_worse_by: float | None = None, require_non_inferiority: float | None = None
    ) -> list[GateDecision]:
        """The decision of each gate asked for (docs/analysis.md), with the rule that decided."""
        r = self.overall.result
        numbers = f"B - A = {r.difference:+.4f}, 95% CI {r.ci_lower:+.4f} to {r.ci_upper:+.4f}"
        out: list[GateDecision] = []
        if fail_if_worse_by is not None:
            d = fail_if_worse_by
            worse = self.worse_by(d)
            rule = f"fails only when B - A < -{d:g} and the CI lies below 0 ({numbers}): " + (
                "both hold" if worse else _which_fails(r, d)
            )
            out.append(GateDecision(FAIL_IF_WORSE_BY, d, not worse, rule))
        if require_non_inferiority is not None:
            d = require_non_inferiority
            ok = self.non_inferior(d)
            rule = (
                f"passes only when the CI's lower bound is above -{d:g} ({numbers}): "
                f"{r.ci_lower:+.4f} is {'above' if ok else 'not above'} -{d:g}"
            )
            out.append(GateDecision(REQUIRE_NON_INFERIORITY, d, ok, rule))
        return out


def p_text(p_value: float | None, n_resamples: int, digits: int = 3) -> str:
    """A p-value as shown: ``-`` when there is none, ``< 1/B`` (e.g. ``< 0.001``) when no resampled
    difference fell on the other side of 0 (a bootstrap p-value is never below 1/B), else rounded."""
    if p_value is None or np.isnan(p_value):
        return "-"
    if p_value == 0 and n_resamples > 0:
        return f"< {1 / n_resamples:g}"
    return f"{p_value:.{digits}f}"


def _which_fails(r: PairedDifference, d: float) -> str:
    """Why the worse-by gate passed: which of its two conditions does not hold."""
    missing = [f"B - A is not below -{d:g}"] if not r.difference < -d else []
    if not r.ci_upper < 0:
        missing.append("the CI includes 0" if r.ci_lower <= 0 else "the CI lies above 0")
    return " and ".join(missing)


def compare_runs(
    a: LoadedRun,
    b: LoadedRun,
    options: BootstrapOptions | None = None,
    *,
    margin: float = DEFAULT_MARGIN,
    flip_threshold: float = DEFAULT_FLIP_THRESHOLD,
) -> Comparison:
    """B against A (module doc), CIs as ``options`` says (default `BootstrapOptions()`). A
    `DataError` when no conversation can be paired."""
    options = options or BootstrapOptions()
    scores_a, scores_b = conversation_scores(a.samples), conversation_scores(b.samples)
    warnings = [same_input_warning(a.source)] if a.source == b.source else []
    warnings += setup_warnings(a, b)
    common, mismatched = _paired_ids(scores_a, scores_b)
    if mismatched:
        warnings.append(
            f"{len(mismatched)} conversation(s) have different rubrics in the two runs (different "
            "dataset versions?) and are left out"
        )
    if not common:
        raise DataError(f"{a.label} and {b.label} have no graded conversation in common to compare")
    warnings.extend(_overlap_warnings(a, b, scores_a, scores_b, len(common)))

    def compare(kind: str, name: str, key: str, ids: list[str]) -> GroupComparison:
        values_a = np.array([scores_a.scores[i][key] for i in ids])
        values_b = np.array([scores_b.scores[i][key] for i in ids])
        result = paired_bootstrap(values_a, values_b, options)
        return GroupComparison(kind, name, result, verdict(result, margin))

    themes = sorted({t for i in common for t in scores_a.themes[i]})
    axes = sorted({k for i in common for k in scores_a.scores[i] if k.startswith(AXIS_PREFIX)})
    alpha = significance_level(options.confidence)
    return Comparison(
        a=a.label,
        b=b.label,
        overall=compare(ALL, ALL, OVERALL, common),
        themes=_family(
            [
                compare(
                    "theme",
                    t.removeprefix(THEME_PREFIX),
                    OVERALL,
                    [i for i in common if t in scores_a.themes[i]],
                )
                for t in themes
            ],
            margin,
            alpha,
        ),
        axes=_family(
            [
                compare(
                    "axis",
                    k.removeprefix(AXIS_PREFIX),
                    k,
                    [i for i in common if k in scores_a.scores[i] and k in scores_b.scores[i]],
                )
                for k in axes
                if any(k in scores_a.scores[i] and k in scores_b.scores[i] for i in common)
            ],
            margin,
            alpha,
        ),
        flips=_flips(scores_a, scores_b, common, flip_threshold),
        n_a=len(scores_a.scores),
        n_b=len(scores_b.scores),
        margin=margin,
        seed=options.seed,
        n_resamples=options.n_resamples,
        warnings=tuple(warnings),
    )


def _family(rows: list[GroupComparison], margin: float, alpha: float) -> tuple[GroupComparison, ...]:
    """A table's rows with Holm-adjusted p-values across those with at least `FEW_CONVERSATIONS`
    paired conversations, and their verdicts on the adjusted p-values (``p_holm < alpha``); the others
    get `N_TOO_SMALL`. Holm adjusts the rows' paired t-test p-values (`PairedDifference.p_t`): its
    first step reads the far tail (alpha / m), where the percentile bootstrap's p-values are too small
    (a family-wise error of 6-8% at 0.05 in simulation)."""
    tested = [row.result.n >= FEW_CONVERSATIONS for row in rows]
    adjusted = holm([r.result.p_t if t else float("nan") for r, t in zip(rows, tested, strict=True)])
    out = []
    for row, ok, p in zip(rows, tested, adjusted, strict=True):
        if not ok:
            out.append(replace(row, verdict=N_TOO_SMALL))
            continue
        p_holm = None if np.isnan(p) else p
        decided = (
            verdict(row.result, margin, p_value=p_holm, alpha=alpha) if p_holm is not None else row.verdict
        )
        out.append(replace(row, verdict=decided, p_holm=p_holm))
    return tuple(out)


def threshold_problem(value: float) -> str | None:
    """Why ``value`` cannot be a margin or a gate's threshold D (None: it can), the one rule of
    `healthbench compare` and the service's compare page: the difference of two scores in [0, 1] is
    below 1, so D must be from 0 up to (not incl.) 1 (a larger one, inf or nan could never decide)."""
    if 0.0 <= value < 1.0:
        return None
    return f"{value} is not a score difference; give a number from 0 up to (not incl.) 1"


def same_input_warning(source: str) -> str:
    """The warning of a comparison whose two sides are one input (every difference is 0)."""
    return f"A and B are the same input ({source}): every difference is 0 by construction"


def setup_warnings(a: LoadedRun, b: LoadedRun) -> list[str]:
    """One line per grading setting the two runs record differently (unrecorded ones are skipped)."""
    out: list[str] = []
    for what, first, second in (
        ("judges", a.judge, b.judge),
        ("grader prompts (template sha256)", a.grader_template_sha256, b.grader_template_sha256),
        ("dataset variants", a.dataset_variant, b.dataset_variant),
        ("dataset versions (sha256)", a.dataset_sha256, b.dataset_sha256),
        ("profiles", a.profile, b.profile),
    ):
        if first is not None and second is not None and first != second:
            out.append(f"the runs used different {what}: {first} vs {second}")
    setup = grading_setup_warning([a.grading_setup, b.grading_setup], ["A", "B"])
    if setup is not None:
        out.append(setup)
    return out


def _paired_ids(a: ConversationScores, b: ConversationScores) -> tuple[list[str], list[str]]:
    """Prompt ids graded in both runs with the same rubric (in A's order), and those whose rubric differs."""
    common: list[str] = []
    mismatched: list[str] = []
    for prompt_id in a.scores:
        if prompt_id in b.scores:
            (common if a.rubrics[prompt_id] == b.rubrics[prompt_id] else mismatched).append(prompt_id)
    return common, mismatched


def _overlap_warnings(
    a: LoadedRun, b: LoadedRun, scores_a: ConversationScores, scores_b: ConversationScores, n_common: int
) -> list[str]:
    out: list[str] = []
    largest = max(len(scores_a.rubrics), len(scores_b.rubrics))
    if n_common < SMALL_OVERLAP * largest:
        out.append(
            f"small overlap: {n_common} of {largest} conversations are graded in both runs "
            f"({a.label}: {len(scores_a.scores)}, {b.label}: {len(scores_b.scores)})"
        )
    if n_common < FEW_CONVERSATIONS:
        out.append(f"only {n_common} paired conversations: the CIs are rough")
    for run, scores in ((a, scores_a), (b, scores_b)):
        if scores.ungraded:
            out.append(f"{run.label}: {len(scores.ungraded)} conversation(s) ungraded, left out")
    return out


def _flips(
    a: ConversationScores, b: ConversationScores, common: list[str], threshold: float
) -> tuple[Flip, ...]:
    flips = [
        Flip(i, a.scores[i][OVERALL], b.scores[i][OVERALL])
        for i in common
        if (a.scores[i][OVERALL] >= threshold) != (b.scores[i][OVERALL] >= threshold)
    ]
    return tuple(sorted(flips, key=lambda f: (-abs(f.score_b - f.score_a), f.prompt_id)))
