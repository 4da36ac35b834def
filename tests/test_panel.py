"""Judge panels' pure core (`healthbench.scoring.panel`): every rule on hand-made votes (ties and
ungraded members included), the calibrated rule by hand and on simulated judges where its answer is
known, the calibration's counting, and agreement and the kappas against textbook computations."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from healthbench.defaults import DEFAULT_PANEL_RULE, PANEL_RULES
from healthbench.scoring.meta import MetaRow
from healthbench.scoring.panel import (
    Calibration,
    MemberRates,
    PanelRule,
    agreement,
    calibrated_log_odds,
    calibration_from_meta,
    cohen_kappa,
    combine,
    criterion_category,
    fleiss_kappa,
    merge_calibrations,
    pairwise_cohen_kappa,
)
from healthbench.scoring.verdict import Verdict

M, N, U = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED
SIMPLE_RULES: tuple[PanelRule, ...] = ("majority", "unanimous", "any")


def votes(text: str) -> list[Verdict]:
    """votes("MNU") -> [MET, NOT_MET, UNGRADED]."""
    return [{"M": M, "N": N, "U": U}[c] for c in text]


def test_rule_names_are_defined_once() -> None:
    assert get_args(PanelRule) == PANEL_RULES
    assert DEFAULT_PANEL_RULE == "majority"


@pytest.mark.parametrize(
    ("text", "majority", "unanimous", "any_"),
    [
        ("MMN", M, N, M),
        ("NNM", N, N, M),
        ("MMM", M, M, M),
        ("NNN", N, N, N),
        ("MN", M, N, M),  # a tie: the chair's vote
        ("NM", N, N, M),
        ("MNMN", M, N, M),
        ("NMNM", N, N, M),
        ("UNM", N, N, M),  # 2 of 3 graded: a tie goes to the first graded member
        ("UMN", M, N, M),
        ("NUMM", M, N, M),  # 3 of 4 graded
        ("MUMMN", M, N, M),
        ("MUM", M, M, M),
        ("NUN", N, N, N),
    ],
)
def test_simple_rules_by_hand(text: str, majority: Verdict, unanimous: Verdict, any_: Verdict) -> None:
    got = {rule: combine(votes(text), rule) for rule in SIMPLE_RULES}
    assert got == {"majority": majority, "unanimous": unanimous, "any": any_}


@pytest.mark.parametrize("text", ["U", "MU", "UM", "UUM", "MNUU", "UUUMM", "NUNUU"])
def test_a_panel_with_half_or_fewer_members_graded_leaves_the_criterion_ungraded(text: str) -> None:
    for rule in SIMPLE_RULES:
        assert combine(votes(text), rule) is U
    calibration = Calibration({"a": {None: MemberRates(0.9, 0.9, 10, 10)}}, {None: 0.5})
    labels = ["a"] * len(text)
    assert combine(votes(text), "calibrated", labels=labels, calibration=calibration) is U


@pytest.mark.parametrize("rule", SIMPLE_RULES)
@pytest.mark.parametrize("vote", [M, N, U])
def test_a_single_judge_is_its_own_panel(rule: PanelRule, vote: Verdict) -> None:
    assert combine([vote], rule) is vote


def test_bad_calls_fail_clearly() -> None:
    with pytest.raises(ValueError, match="at least one"):
        combine([], "majority")
    with pytest.raises(ValueError, match="unknown panel rule 'mean'"):
        combine([M], "mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a calibration"):
        combine([M, N], "calibrated")
    calibration = Calibration({"a": {None: MemberRates(0.9, 0.9, 10, 10)}}, {None: 0.5})
    with pytest.raises(ValueError, match="one label per vote"):
        combine([M, N], "calibrated", labels=["a"], calibration=calibration)
    with pytest.raises(ValueError, match="no calibration for judge 'b'"):
        combine([M, N], "calibrated", labels=["a", "b"], calibration=calibration)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        MemberRates(1.0, 0.5, 3, 3)
    with pytest.raises(ValueError, match="pooled base rate"):
        Calibration({}, {"cluster:x": 0.5})
    with pytest.raises(ValueError, match="no pooled rates"):
        Calibration({"a": {"cluster:x": MemberRates(0.9, 0.9, 1, 1)}}, {None: 0.5})


# ---------------------------------------------------------------- calibrated, by hand

ACCURATE, POOR = MemberRates(0.95, 0.95, 100, 100), MemberRates(0.6, 0.6, 100, 100)


def calibration(base: float = 0.5) -> Calibration:
    return Calibration({"good": {None: ACCURATE}, "p1": {None: POOR}, "p2": {None: POOR}}, {None: base})


def test_calibrated_log_odds_by_hand() -> None:
    labels = ["good", "p1", "p2"]
    # logit(0.5) = 0; good says not met: log(0.05 / 0.95); each poor one says met: log(0.6 / 0.4)
    expected = math.log(0.05 / 0.95) + 2 * math.log(0.6 / 0.4)
    assert calibrated_log_odds(votes("NMM"), labels, calibration(), None) == pytest.approx(
        expected, abs=1e-12
    )
    assert combine(votes("NMM"), "calibrated", labels=labels, calibration=calibration()) is N
    assert combine(votes("NMM"), "majority") is M  # the majority follows the two poor judges
    assert combine(votes("MNN"), "calibrated", labels=labels, calibration=calibration()) is M
    # an ungraded poor judge adds no evidence
    expected = math.log(0.95 / 0.05) + math.log(0.4 / 0.6)
    assert calibrated_log_odds(votes("MNU"), labels, calibration(), None) == pytest.approx(
        expected, abs=1e-12
    )


def test_calibrated_prior_is_the_base_rate() -> None:
    rates = Calibration({"a": {None: MemberRates(0.8, 0.8, 50, 50)}}, {None: 0.9})
    # logit(0.9) = log 9 = 2.197 outweighs one 80 % judge's "not met" (log 0.25 = -1.386)
    assert calibrated_log_odds([N], ["a"], rates, None) == pytest.approx(math.log(9) + math.log(0.25))
    assert combine([N], "calibrated", labels=["a"], calibration=rates) is M
    strong = Calibration({"a": {None: MemberRates(0.99, 0.99, 50, 50)}}, {None: 0.9})
    assert combine([N], "calibrated", labels=["a"], calibration=strong) is N


def test_a_calibrated_tie_goes_to_the_majority_rule() -> None:
    # two equally good members disagreeing at a base rate of 0.5: log 4 + log 1/4 = 0 (up to rounding)
    rates = Calibration(
        {"a": {None: MemberRates(0.8, 0.8, 5, 5)}, "b": {None: MemberRates(0.8, 0.8, 5, 5)}}, {None: 0.5}
    )
    assert abs(calibrated_log_odds(votes("MN"), ["a", "b"], rates, None)) < 1e-9
    assert combine(votes("MN"), "calibrated", labels=["a", "b"], calibration=rates) is M  # the chair
    assert combine(votes("NM"), "calibrated", labels=["a", "b"], calibration=rates) is N


def test_a_member_worse_than_chance_counts_against_its_vote() -> None:
    rates = Calibration({"a": {None: MemberRates(0.2, 0.2, 50, 50)}}, {None: 0.5})
    assert combine([M], "calibrated", labels=["a"], calibration=rates) is N


def test_category_rates_and_the_pooled_fallback() -> None:
    cat = "cluster:emergency_referrals_x"
    rates = Calibration(
        {"a": {None: MemberRates(0.7, 0.7, 80, 80), cat: MemberRates(0.9, 0.6, 40, 40)}},
        {None: 0.5, cat: 0.2},
    )
    assert rates.member_rates("a", cat) == (MemberRates(0.9, 0.6, 40, 40), False)
    assert rates.member_rates("a", "cluster:other") == (MemberRates(0.7, 0.7, 80, 80), True)
    assert rates.member_rates("a", None)[1] is True
    assert rates.prior(cat) == (0.2, False) and rates.prior("cluster:other") == (0.5, True)
    got = calibrated_log_odds([M], ["a"], rates, cat)
    assert got == pytest.approx(math.log(0.2 / 0.8) + math.log(0.9 / 0.4))
    got = calibrated_log_odds([M], ["a"], rates, None)
    assert got == pytest.approx(math.log(0.7 / 0.3))


def test_criterion_category() -> None:
    assert criterion_category(["axis:accuracy", "cluster:hedging_x", "cluster:later"]) == "cluster:hedging_x"
    assert criterion_category(["level:example", "axis:completeness"]) is None
    assert criterion_category([]) is None


# ---------------------------------------------------------------- calibration from a meta-eval


def row(category: str, labels: str) -> MetaRow:
    return MetaRow(category, tuple(c == "T" for c in labels), tuple(f"p{i}" for i in range(len(labels))))


def test_calibration_counts_rows_by_the_physicians_majority() -> None:
    rows = [
        row("cluster:a_x", "TTF"),  # truth met
        row("cluster:a_x", "T"),  # truth met
        row("cluster:a_x", "FFT"),  # truth not met
        row("cluster:a_x", "TF"),  # a split: no truth, left out
        row("cluster:b_y", "F"),  # truth not met
        row("cluster:b_y", "TTTF"),  # truth met
    ]
    judge = votes("MNNMMU")  # tp, fn, tn, (split), fp, (ungraded)
    calibration = calibration_from_meta(rows, {"j": judge}, min_rows=1)
    # pooled: tp 1, fn 1, tn 1, fp 1 -> Se = (1+1)/(2+2), Sp = (1+1)/(2+2)
    assert calibration.rates["j"][None] == MemberRates(0.5, 0.5, 2, 2)
    # cluster:a_x: tp 1, fn 1, tn 1, fp 0 -> Se 2/4, Sp 2/3
    assert calibration.rates["j"]["cluster:a_x"] == MemberRates(2 / 4, 2 / 3, 2, 1)
    # cluster:b_y: the judge graded one row (fp): no truth-met row, so pooled rates
    assert "cluster:b_y" not in calibration.rates["j"]
    # base rate over every row with a truth (the judge's ungraded row included): 3 met, 2 not met
    assert calibration.base_rate[None] == (3 + 1) / (5 + 2)
    assert calibration.base_rate["cluster:a_x"] == (2 + 1) / (3 + 2)
    assert calibration.base_rate["cluster:b_y"] == (1 + 1) / (2 + 2)
    # the default minimum (30 rows of each truth) leaves these small categories pooled
    default = calibration_from_meta(rows, {"j": judge})
    assert set(default.rates["j"]) == {None} and set(default.base_rate) == {None}


def test_calibration_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no meta-eval rows"):
        calibration_from_meta([], {})
    with pytest.raises(ValueError, match="2 verdicts for 1 meta-eval rows"):
        calibration_from_meta([row("cluster:a", "T")], {"j": [M, N]})
    with pytest.raises(ValueError, match="majority"):
        calibration_from_meta([row("cluster:a", "TF")], {"j": [M]})


def test_calibrations_of_several_meta_eval_runs_merge() -> None:
    first = Calibration({"a": {None: ACCURATE}}, {None: 0.4, "cluster:x": 0.3})
    second = Calibration({"b": {None: POOR}, "c": {None: POOR}}, {None: 0.6})
    merged = merge_calibrations([first, second])
    assert merged.rates == {"a": {None: ACCURATE}, "b": {None: POOR}, "c": {None: POOR}}
    assert merged.base_rate == {None: 0.4, "cluster:x": 0.3}
    with pytest.raises(ValueError, match="judge 'a' is calibrated by two"):
        merge_calibrations([first, first])
    with pytest.raises(ValueError, match="no calibration"):
        merge_calibrations([])


def simulated(
    n: int, error_rates: dict[str, float], seed: int
) -> tuple[list[bool], dict[str, list[Verdict]]]:
    """``n`` truths (met with probability 0.5) and each judge's verdicts, each flipping the truth
    independently with its error rate."""
    rng = random.Random(seed)
    truth = [rng.random() < 0.5 for _ in range(n)]
    judges = {
        label: [Verdict.of(t != (rng.random() < rate)) for t in truth] for label, rate in error_rates.items()
    }
    return truth, judges


def test_calibrated_follows_an_accurate_judge_that_two_poor_ones_outvote() -> None:
    rates = {"good": 0.05, "poor1": 0.4, "poor2": 0.4}
    meta_truth, meta_judges = simulated(2000, rates, seed=1)
    rows = [row("cluster:sim", "T" if t else "F") for t in meta_truth]
    calibration = calibration_from_meta(rows, meta_judges)
    good = calibration.rates["good"]["cluster:sim"]
    assert good.sensitivity > 0.9 and good.specificity > 0.9
    truth, judges = simulated(5000, rates, seed=2)
    labels = list(rates)
    panel = list(zip(*judges.values(), strict=True))
    calibrated = [
        combine(v, "calibrated", labels=labels, calibration=calibration, category="cluster:sim")
        for v in panel
    ]
    majority = [combine(v, "majority") for v in panel]
    assert calibrated == judges["good"]  # 2 poor votes never outweigh the good one's
    assert majority != judges["good"]

    def errors(verdicts: list[Verdict]) -> float:
        return sum(v.criteria_met != t for v, t in zip(verdicts, truth, strict=True)) / len(truth)

    # majority errs when both poor judges err or one of them and the good one: 0.1635 in theory
    theory = 0.05 * 0.4 * 0.6 * 2 + 0.4 * 0.4 * 0.95 + 0.05 * 0.4 * 0.4
    assert errors(majority) == pytest.approx(theory, abs=4 * math.sqrt(theory * (1 - theory) / len(truth)))
    assert errors(calibrated) < 0.07 < errors(majority)


# ---------------------------------------------------------------- agreement and kappas


def test_agreement_is_the_share_of_fully_graded_criteria_with_one_verdict() -> None:
    panel = [votes(t) for t in ["MMM", "MNM", "NNN", "UMM", "NNM", "MMU"]]
    assert agreement(panel) == 2 / 4  # four graded by all, two unanimous
    assert agreement([votes("UMM")]) is None
    assert agreement([]) is None
    with pytest.raises(ValueError, match="one vote per member"):
        agreement([votes("MM"), votes("MMM")])


def test_cohen_kappa_textbook_example() -> None:
    # Cohen's kappa's classic worked example (Wikipedia): 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no
    a = [M] * 20 + [M] * 5 + [N] * 10 + [N] * 15
    b = [M] * 20 + [N] * 5 + [M] * 10 + [N] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)  # p_o 0.7, p_e 0.5
    assert cohen_kappa([*a, U], [*b, M]) == pytest.approx(0.4, abs=1e-12)  # an ungraded pair left out
    assert cohen_kappa([M, M], [M, M]) is None  # p_e = 1
    assert cohen_kappa([U], [M]) is None
    with pytest.raises(ValueError, match="same criteria"):
        cohen_kappa([M], [M, N])


verdict_lists = st.lists(st.sampled_from([M, N, U]), min_size=1, max_size=40)


@given(st.lists(st.tuples(st.sampled_from([M, N, U]), st.sampled_from([M, N, U])), min_size=1, max_size=60))
def test_cohen_kappa_equals_the_two_by_two_table_formula(pairs: list[tuple[Verdict, Verdict]]) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    graded = [(x, y) for x, y in pairs if U not in (x, y)]
    both = Fraction(sum(x is M and y is M for x, y in graded))  # the 2x2 table a b / c d
    only_a = Fraction(sum(x is M and y is N for x, y in graded))
    only_b = Fraction(sum(x is N and y is M for x, y in graded))
    neither = Fraction(sum(x is N and y is N for x, y in graded))
    denominator = (both + only_a) * (only_a + neither) + (both + only_b) * (only_b + neither)
    got = cohen_kappa(a, b)
    if denominator == 0:  # no pair, or every pair met/met (or not met/not met): p_e = 1
        assert got is None
        return
    # kappa = 2 (ad - bc) / ((a + b)(b + d) + (a + c)(c + d))
    expected = 2 * (both * neither - only_a * only_b) / denominator
    assert got == pytest.approx(float(expected), abs=1e-9)


def test_fleiss_kappa_by_hand() -> None:
    # 4 criteria, 3 members; met votes 3, 2, 0, 1
    panel = [votes(t) for t in ["MMM", "MMN", "NNN", "NMN"]]
    # P_i = (x^2 + (3-x)^2 - 3) / 6: 1, 1/3, 1, 1/3 -> P̄ = 2/3; p_met = 6/12 -> P̄e = 1/2
    assert fleiss_kappa(panel) == pytest.approx((2 / 3 - 1 / 2) / (1 - 1 / 2), abs=1e-12)
    assert fleiss_kappa([*panel, votes("UMM")]) == fleiss_kappa(panel)  # not graded by all: left out
    assert fleiss_kappa([votes("MMM"), votes("MMM")]) is None  # every vote the same
    assert fleiss_kappa([votes("M"), votes("N")]) is None  # one member
    assert fleiss_kappa([votes("UM")]) is None


@given(
    st.integers(2, 6).flatmap(
        lambda n: st.lists(st.integers(0, n), min_size=1, max_size=30).map(lambda xs: (n, xs))
    )
)
def test_fleiss_kappa_equals_the_two_category_formula(case: tuple[int, list[int]]) -> None:
    # Fleiss (1971), two categories: kappa = 1 - Σ x_i (n - x_i) / (N n (n - 1) p q)
    n, met_counts = case
    panel = [[M] * x + [N] * (n - x) for x in met_counts]
    big_n = len(met_counts)
    p = Fraction(sum(met_counts), big_n * n)
    got = fleiss_kappa(panel)
    if p in (0, 1):
        assert got is None
        return
    expected = 1 - Fraction(sum(x * (n - x) for x in met_counts)) / (big_n * n * (n - 1) * p * (1 - p))
    assert got == pytest.approx(float(expected), abs=1e-9)


def test_pairwise_cohen_kappa() -> None:
    panel = [votes(t) for t in ["MMN", "NNN", "MNM", "NMM", "MMU"]]
    got = pairwise_cohen_kappa(["a", "b", "c"], panel)
    assert list(got) == [("a", "b"), ("a", "c"), ("b", "c")]
    columns = list(zip(*panel, strict=True))
    assert got[("a", "c")] == cohen_kappa(columns[0], columns[2])
    assert pairwise_cohen_kappa(["a"], panel[:0]) == {}
    with pytest.raises(ValueError, match="one vote per member"):
        pairwise_cohen_kappa(["a", "b"], panel)
