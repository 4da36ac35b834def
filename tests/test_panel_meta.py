"""The meta-eval of a panel (`healthbench.scoring.panel_meta`): each member and each rule measured against
physicians equals an independent, simple-evals-style loop over (judge label, physician label) pairs;
dollars per 1,000 criteria; the calibrated rule with a given calibration and cross-fitted."""

from __future__ import annotations

import random

import pytest

from healthbench.scoring.meta import MetaRow, meta_metrics
from healthbench.scoring.panel import Calibration, MemberRates, combine
from healthbench.scoring.panel_meta import dollars_per_1000, panel_meta_metrics, panel_verdicts
from healthbench.scoring.verdict import Verdict

M, N, U = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED


def row(category: str, labels: str) -> MetaRow:
    return MetaRow(category, tuple(c == "T" for c in labels), tuple(f"phys-{i}" for i in range(len(labels))))


ROWS = [
    row("cluster:alpha_one", "TFTT"),
    row("cluster:alpha_one", "FF"),
    row("cluster:beta_two", "T"),
    row("cluster:beta_two", "TTFFT"),
    row("cluster:beta_two", "FTFFF"),
    row("cluster:alpha_one", "TT"),
]
JUDGES = {
    "a": [M, N, N, U, N, M],
    "b": [M, M, M, M, N, N],
    "c": [N, N, M, U, M, N],
}
# by hand, per row (a b c): MMN NMN NMM UMU NNM MNN; row 3 has one graded member of three: ungraded
MAJORITY = [M, N, M, U, N, N]
UNANIMOUS = [N, N, N, U, N, N]
ANY = [M, M, M, U, M, M]


def ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 0.0 if precision == recall == 0 else 2 * precision * recall / (precision + recall)


def pairwise(rows: list[MetaRow], judge: list[Verdict]) -> dict[str, float | None]:
    """simple-evals' loop: the judge's label against every physician label of each graded row."""
    tp = fp = fn = tn = 0
    for r, verdict in zip(rows, judge, strict=True):
        if verdict is U:
            continue
        for label in r.labels:
            said = verdict is M
            tp += said and label
            fp += said and not label
            fn += (not said) and label
            tn += (not said) and (not label)
    precision_pos, recall_pos = ratio(tp, tp + fp), ratio(tp, tp + fn)
    precision_neg, recall_neg = ratio(tn, tn + fn), ratio(tn, tn + fp)
    f1_pos, f1_neg = f1(precision_pos, recall_pos), f1(precision_neg, recall_neg)
    balanced = None if f1_pos is None or f1_neg is None else (f1_pos + f1_neg) / 2
    return {
        "pairwise_model_precision_pos": precision_pos,
        "pairwise_model_recall_pos": recall_pos,
        "pairwise_model_recall_neg": recall_neg,
        "pairwise_model_f1_pos": f1_pos,
        "pairwise_model_f1_neg": f1_neg,
        "pairwise_model_f1_balanced": balanced,
    }


def test_rules_by_hand() -> None:
    for rule, expected in (("majority", MAJORITY), ("unanimous", UNANIMOUS), ("any", ANY)):
        assert panel_verdicts(ROWS, JUDGES, rule) == expected, rule  # type: ignore[arg-type]


def test_members_and_rules_equal_an_independent_pairwise_computation() -> None:
    result = panel_meta_metrics(ROWS, JUDGES, rules=("majority", "unanimous", "any"))
    assert [e.name for e in result.entries] == [
        "a",
        "b",
        "c",
        "panel:majority",
        "panel:unanimous",
        "panel:any",
    ]
    assert [e.kind for e in result.entries] == ["member"] * 3 + ["panel"] * 3
    assert result.calibration is None
    expected = {**JUDGES, "panel:majority": MAJORITY, "panel:unanimous": UNANIMOUS, "panel:any": ANY}
    for name, verdicts in expected.items():
        metrics = result.entry(name).result.metrics
        for key, value in pairwise(ROWS, verdicts).items():
            assert metrics[key] == (None if value is None else pytest.approx(value, abs=1e-12)), (name, key)
        assert metrics["ungraded_rows"] == sum(v is U for v in verdicts)
        # and the whole result is the one set of meta-eval metrics, physicians' baseline included
        assert metrics == meta_metrics(ROWS, [v.criteria_met for v in verdicts]).metrics
    with pytest.raises(KeyError):
        result.entry("panel:calibrated")


def test_dollars_per_thousand_criteria() -> None:
    assert dollars_per_1000(0.03, 6) == pytest.approx(5.0)
    assert dollars_per_1000(None, 6) is None
    assert dollars_per_1000(1.0, 0) is None
    result = panel_meta_metrics(ROWS, JUDGES, rules=("majority",), costs={"a": 0.006, "b": 0.012, "c": 0.0})
    assert [e.dollars_per_1000 for e in result.entries] == pytest.approx([1.0, 2.0, 0.0, 3.0])
    unknown = panel_meta_metrics(ROWS, JUDGES, rules=("any",), costs={"a": 0.006})
    assert [e.dollars_per_1000 for e in unknown.entries] == [pytest.approx(1.0), None, None, None]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one judge"):
        panel_meta_metrics(ROWS, {})
    with pytest.raises(ValueError, match="judge 'a' has 2 verdicts for 6"):
        panel_meta_metrics(ROWS, {"a": [M, N]})
    with pytest.raises(ValueError, match="unknown panel rule"):
        panel_meta_metrics(ROWS, JUDGES, rules=("mean",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="6 rows, 7 folds"):
        panel_meta_metrics(ROWS, JUDGES, rules=("calibrated",), folds=7)


def test_calibrated_with_a_given_calibration() -> None:
    rates = {label: {None: MemberRates(0.6, 0.6, 9, 9)} for label in ("b", "c")}
    calibration = Calibration({**rates, "a": {None: MemberRates(0.95, 0.95, 9, 9)}}, {None: 0.5})
    result = panel_meta_metrics(ROWS, JUDGES, rules=("calibrated",), calibration=calibration)
    assert result.calibration == "given"
    labels = list(JUDGES)
    expected = [
        combine(votes, "calibrated", labels=labels, calibration=calibration, category=r.category)
        for votes, r in zip(zip(*JUDGES.values(), strict=True), ROWS, strict=True)
    ]
    # a is the accurate one: the panel says what a says wherever a graded
    assert [v for v, a in zip(expected, JUDGES["a"], strict=True) if a is not U] == [M, N, N, N, M]
    got = result.entry("panel:calibrated").result.metrics
    assert got == meta_metrics(ROWS, [v.criteria_met for v in expected]).metrics


def test_cross_fitted_calibration_finds_the_accurate_judge() -> None:
    rng = random.Random(5)
    truth = [rng.random() < 0.4 for _ in range(1500)]
    rows = [row("cluster:sim_x", "T" if t else "F") for t in truth]
    rates = {"poor1": 0.4, "good": 0.05, "poor2": 0.4}
    judges = {label: [Verdict.of(t != (rng.random() < p)) for t in truth] for label, p in rates.items()}
    result = panel_meta_metrics(rows, judges, rules=("majority", "calibrated"))
    assert result.calibration == "cross-fitted"
    assert panel_verdicts(rows, judges, "calibrated") == judges["good"]
    f1 = {e.name: e.result.metrics["pairwise_model_f1_balanced"] for e in result.entries}
    assert f1["panel:calibrated"] == f1["good"]
    assert f1["panel:majority"] < f1["good"] - 0.05  # the two poor judges outvote the good one
