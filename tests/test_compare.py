"""`healthbench.analysis.compare`: paired comparisons of two runs, checked against the definitions."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from synthetic_runs import conversations, graded, loaded, reference_scores

from healthbench.analysis.compare import N_TOO_SMALL, compare_runs
from healthbench.errors import DataError
from healthbench.scoring.multiplicity import holm
from healthbench.scoring.paired import BETTER, NO_DIFFERENCE, WORSE, paired_bootstrap
from healthbench.scoring.stats import BootstrapOptions


def per_conversation(samples):
    """prompt_id -> key -> mean over graded repeats, from the plain-Python reference."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sample, scores in zip(samples, reference_scores(samples), strict=True):
        if scores is not None:
            for key, value in scores.items():
                sums[sample.conversation.prompt_id][key].append(value)
    return {pid: {k: sum(v) / len(v) for k, v in keys.items()} for pid, keys in sums.items()}


def test_every_row_equals_the_definitions() -> None:
    convs = conversations(90)
    a, b = graded(convs, hit_rate=0.3, seed=1, repeats=2), graded(convs, hit_rate=0.8, seed=2, ungraded=0.02)
    result = compare_runs(loaded(a), loaded(b, run_id="run-2"), BootstrapOptions(seed=7, n_resamples=300))
    ref_a, ref_b = per_conversation(a), per_conversation(b)
    common = [c.prompt_id for c in convs if c.prompt_id in ref_a and c.prompt_id in ref_b]
    theme_of = {c.prompt_id: c.example_tags[0].removeprefix("theme:") for c in convs}
    expected = {("all", "all"): (common, "overall")}
    for theme in {theme_of[p] for p in common}:
        expected["theme", theme] = ([p for p in common if theme_of[p] == theme], "overall")
    for axis in ("accuracy", "completeness", "communication_quality"):
        ids = [p for p in common if f"axis:{axis}" in ref_a[p] and f"axis:{axis}" in ref_b[p]]
        expected["axis", axis] = (ids, f"axis:{axis}")
    assert {(r.kind, r.name) for r in result.rows} == set(expected)
    for row in result.rows:
        ids, key = expected[row.kind, row.name]
        direct = paired_bootstrap(
            [ref_a[p][key] for p in ids],
            [ref_b[p][key] for p in ids],
            BootstrapOptions(n_resamples=300, seed=7),
        )
        assert row.result.n == len(ids)
        assert row.result.difference == pytest.approx(direct.difference, abs=1e-12)
        assert row.result.ci_lower == pytest.approx(direct.ci_lower, abs=1e-12)
        assert row.result.ci_upper == pytest.approx(direct.ci_upper, abs=1e-12)
        assert row.result.p_value == pytest.approx(direct.p_value, abs=1e-12)
    assert result.n_common == len(common) < 90  # conversations ungraded in B are left out
    assert any("ungraded, left out" in w for w in result.warnings)
    assert result.verdict == BETTER


def test_flips_and_gate() -> None:
    convs = conversations(200)
    a, b = graded(convs, hit_rate=0.7, seed=1), graded(convs, hit_rate=0.5, seed=2)
    result = compare_runs(loaded(a), loaded(b, run_id="run-2"), BootstrapOptions(n_resamples=300))
    assert result.verdict == WORSE and result.worse_by(0.02) and not result.worse_by(0.9)
    ref_a, ref_b = per_conversation(a), per_conversation(b)
    flipped = {p for p in ref_a if (ref_a[p]["overall"] >= 0.5) != (ref_b[p]["overall"] >= 0.5)}
    assert {f.prompt_id for f in result.flips} == flipped
    assert sum(not f.improved for f in result.flips) > sum(f.improved for f in result.flips)
    assert result.warnings == ()  # same conversations, nothing recorded differently


def test_same_run_against_itself_is_no_difference() -> None:
    samples = graded(conversations(50))
    result = compare_runs(loaded(samples), loaded(samples, run_id="again"), BootstrapOptions(n_resamples=200))
    assert result.verdict == NO_DIFFERENCE and result.overall.result.p_value == 1.0 and not result.flips


def test_warns_about_different_grading_and_small_overlap() -> None:
    convs = conversations(60)
    a = loaded(graded(convs), judge="openai/gpt-4.1", grader_template_sha256="aaa", dataset_variant="full")
    b = loaded(
        graded(convs[:20], seed=3),
        run_id="run-2",
        judge="anthropic/claude",
        grader_template_sha256="bbb",
        dataset_variant="hard",
        profile="strict",
    )
    warnings = compare_runs(a, b, BootstrapOptions(n_resamples=50)).warnings
    assert "the runs used different judges: openai/gpt-4.1 vs anthropic/claude" in warnings
    assert "the runs used different grader prompts (template sha256): aaa vs bbb" in warnings
    assert "the runs used different dataset variants: full vs hard" in warnings
    assert not any("profiles" in w for w in warnings)  # unknown for A: nothing to compare
    assert any(w.startswith("small overlap: 20 of 60") for w in warnings)
    assert "only 20 paired conversations: the CIs are rough" in warnings


def test_different_rubrics_are_left_out_and_no_overlap_is_an_error() -> None:
    first, other = conversations(40, seed=0), conversations(40, seed=1)  # same ids, other rubrics
    mixed = first[:30] + other[30:]
    result = compare_runs(
        loaded(graded(first)), loaded(graded(mixed), run_id="x"), BootstrapOptions(n_resamples=50)
    )
    assert result.n_common == sum(f.rubrics == m.rubrics for f, m in zip(first, mixed, strict=True))
    assert any("different rubrics" in w for w in result.warnings)
    with pytest.raises(DataError, match="no graded conversation in common"):
        compare_runs(
            loaded(graded(first)), loaded(graded(other), run_id="x"), BootstrapOptions(n_resamples=50)
        )


def test_theme_and_axis_verdicts_use_holm_and_need_30_pairs() -> None:
    convs = conversations(100)  # 3 themes: 34, 33, 33 conversations
    a, b = graded(convs, hit_rate=0.55, seed=1), graded(convs, hit_rate=0.6, seed=2)
    result = compare_runs(loaded(a), loaded(b, run_id="run-2"), BootstrapOptions(n_resamples=400, seed=3))
    for table in (result.themes, result.axes):
        tested = [row for row in table if row.result.n >= 30]
        assert tested and [row.p_holm for row in tested] == pytest.approx(
            holm([row.result.p_t for row in tested])
        )
        for row in tested:
            assert row.p_holm is not None and row.p_holm >= row.result.p_t
            significant = row.p_holm < 0.05
            expected = (BETTER if row.result.difference > 0 else WORSE) if significant else NO_DIFFERENCE
            assert row.verdict == expected
    assert result.overall.p_holm is None  # the overall row is a single test
    small = compare_runs(
        loaded(graded(convs[:60])),
        loaded(graded(convs[:60], seed=5), run_id="x"),
        BootstrapOptions(n_resamples=50),
    )
    assert [row.verdict for row in small.themes] == [N_TOO_SMALL] * 3  # 20 pairs each
    assert all(row.p_holm is None for row in small.themes)
    assert small.overall.verdict != N_TOO_SMALL  # 60 pairs overall


def test_holm_can_withdraw_a_verdict_the_raw_ci_gives() -> None:
    """A theme whose raw CI excludes 0 but whose Holm-adjusted p does not reach 0.05 gets no verdict."""
    from healthbench.analysis.compare import GroupComparison, _family
    from healthbench.scoring.paired import PairedDifference

    rows = [
        GroupComparison(
            "theme",
            name,
            PairedDifference(40, 0.5, 0.6, 0.1, lo, 0.2, p, p_t=p),
            BETTER if lo > 0 else NO_DIFFERENCE,
        )
        for name, lo, p in (("x", 0.01, 0.03), ("y", 0.02, 0.02), ("z", -0.01, 0.4))
    ]
    family = _family(rows, 0.0, 0.05)
    assert [r.p_holm for r in family] == pytest.approx([0.06, 0.06, 0.4])
    assert [r.verdict for r in family] == [NO_DIFFERENCE] * 3


def test_holm_controls_the_family_wise_error_under_the_null() -> None:
    """2,000 simulated theme tables of 7 rows (40 paired conversations each, no true difference):
    some row gets a verdict in at most 5% of the tables (up to 2 Monte Carlo standard errors). Holm's
    first step needs p < 0.05 / 7, where bootstrap p-values were too small (FWER 8% with 1,000
    resamples); the rows' decisions read the paired t-test's p-values, so no resample is drawn here."""
    from healthbench.analysis.compare import GroupComparison, _family

    rng = np.random.default_rng(32)
    families = 2000
    wrong = 0
    for _ in range(families):
        rows = []
        for row in range(7):
            difficulty = rng.beta(2, 2, 40)
            a = np.clip(difficulty + rng.normal(0, 0.15, 40), -0.2, 1)
            b = np.clip(difficulty + rng.normal(0, 0.15, 40), -0.2, 1)
            result = paired_bootstrap(a, b, BootstrapOptions(n_resamples=0))
            rows.append(GroupComparison("theme", str(row), result, NO_DIFFERENCE))
        decided = _family(rows, 0.0, 0.05)
        assert all(r.p_holm is not None for r in decided)  # every row tested
        wrong += any(r.verdict != NO_DIFFERENCE for r in decided)
    assert wrong / families <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / families), wrong


def test_a_holm_p_of_exactly_alpha_gets_no_verdict() -> None:
    """Two rows with p = 0.025 each: Holm gives both exactly 0.05, which is not below 0.05."""
    from healthbench.analysis.compare import GroupComparison, _family
    from healthbench.scoring.paired import PairedDifference, significance_level

    rows = [
        GroupComparison("axis", n, PairedDifference(40, 0.5, 0.6, 0.1, 0.01, 0.2, 0.025, p_t=0.025), BETTER)
        for n in ("x", "y")
    ]
    family = _family(rows, 0.0, significance_level(0.95))
    assert [r.p_holm for r in family] == [0.05, 0.05]
    assert [r.verdict for r in family] == [NO_DIFFERENCE, NO_DIFFERENCE]


def test_the_gate_says_which_condition_fails() -> None:
    """fail-if-worse-by on a CI of +0.0248 to +0.0665: the CI lies above 0 (it does not include 0)."""
    from dataclasses import replace

    convs = conversations(200)
    a, b = graded(convs, hit_rate=0.5, seed=1), graded(convs, hit_rate=0.7, seed=2)
    result = compare_runs(loaded(a), loaded(b, run_id="run-2"), BootstrapOptions(n_resamples=300))
    overall = replace(result.overall.result, difference=0.0456, ci_lower=0.0248, ci_upper=0.0665)
    comparison = replace(result, overall=replace(result.overall, result=overall))
    (gate,) = comparison.gates(fail_if_worse_by=0.01)
    assert gate.passed and "includes 0" not in gate.rule
    assert gate.rule.endswith("B - A is not below -0.01 and the CI lies above 0")
    straddling = replace(overall, difference=-0.02, ci_lower=-0.04, ci_upper=0.001)
    comparison = replace(result, overall=replace(result.overall, result=straddling))
    (gate,) = comparison.gates(fail_if_worse_by=0.01)
    assert gate.passed and gate.rule.endswith(": the CI includes 0")
