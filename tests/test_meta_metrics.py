"""Meta-eval metrics: hand-computed values, an independent per-label loop, the fixture and bad rows.

Pair counts are written (tp, fp, fn, tn) with the rater (judge or physician) as the prediction and the
other label as the truth. Useful identities: f1_pos = 2tp / (2tp + fp + fn), f1_neg = 2tn / (2tn + fn + fp),
and simple-evals' n of f1_balanced = tp + tn + 2(fp + fn).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import pytest

from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.errors import DataError
from healthbench.scoring.meta import MetaRow, meta_metrics, physician_percentile

FIXTURE = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"
T, F = True, False


def approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


def row(category: str, labels: str, ids: str) -> MetaRow:
    """row("cluster:x_y", "TF", "AB") -> physician A said True, B said False."""
    return MetaRow(category, tuple(c == "T" for c in labels), tuple(ids))


# Five rows, two categories; row 3 is ungraded. Rows 2 and 3/4 have 1 and 5 labels.
HAND_ROWS = [
    row("cluster:alpha_one", "TFTT", "ABCD"),  # judge T
    row("cluster:alpha_one", "FF", "AB"),  # judge F
    row("cluster:beta_two", "T", "C"),  # judge F
    row("cluster:beta_two", "TTFFT", "ABCDE"),  # ungraded
    row("cluster:beta_two", "FTFFF", "ABCDE"),  # judge F
]
HAND_JUDGE = [T, F, F, None, F]


def test_judge_metrics_by_hand() -> None:
    m = meta_metrics(HAND_ROWS, HAND_JUDGE).metrics
    # row 0 (judge T, labels TFTT): tp 3, fp 1.  row 1 (F, FF): tn 2.  row 2 (F, T): fn 1.
    # row 3 ungraded: nothing.  row 4 (F, FTFFF): fn 1, tn 4.  Total tp 3, fp 1, fn 2, tn 6.
    assert m["pairwise_model_precision_pos"] == approx(3 / 4)
    assert m["pairwise_model_precision_pos:n_samples"] == 4
    assert m["pairwise_model_recall_pos"] == approx(3 / 5)
    assert m["pairwise_model_recall_pos:n_samples"] == 5
    assert m["pairwise_model_precision_neg"] == approx(6 / 8)
    assert m["pairwise_model_recall_neg"] == approx(6 / 7)
    assert m["pairwise_model_recall_neg:n_samples"] == 7
    # f1_pos = 6 / (6 + 1 + 2) = 2/3, n = 3 + 1 + 2 = 6; f1_neg = 12 / (12 + 2 + 1) = 4/5, n = 9
    assert m["pairwise_model_f1_pos"] == approx(2 / 3)
    assert m["pairwise_model_f1_pos:n_samples"] == 6
    assert m["pairwise_model_f1_neg"] == approx(4 / 5)
    assert m["pairwise_model_f1_neg:n_samples"] == 9
    assert m["pairwise_model_f1_balanced"] == approx((2 / 3 + 4 / 5) / 2)  # = 11/15
    assert m["pairwise_model_f1_balanced:n_samples"] == 15
    assert m["pairwise_model_precision_balanced"] == approx(3 / 4)
    assert m["pairwise_model_precision_balanced:n_samples"] == 12
    assert m["pairwise_model_recall_balanced"] == approx((3 / 5 + 6 / 7) / 2)
    # ungraded row 3 is out of every judge number and counted
    assert (m["rows"], m["graded_rows"], m["ungraded_rows"]) == (5, 4, 1)
    assert m["cluster:beta_two: ungraded_rows"] == 1
    # per-row means over the 4 graded rows: labels 4, 2, 1, 5; positive share 3/4, 0, 1, 1/5
    assert m["num_physician_labels"] == approx(12 / 4)
    assert m["percent_physician_pos"] == approx((3 / 4 + 0 + 1 + 1 / 5) / 4)
    assert m["model_predicted_positive"] == approx(1 / 4)
    assert m["model_predicted_positive:n_samples"] == 4


def test_category_where_the_judge_always_says_false() -> None:
    m = meta_metrics(HAND_ROWS, HAND_JUDGE).metrics
    # alpha_one: tp 3, fp 1, tn 2, fn 0 -> f1_pos 6/7, f1_neg 4/5
    assert m["cluster:alpha_one: pairwise_model_f1_pos"] == approx(6 / 7)
    assert m["cluster:alpha_one: pairwise_model_recall_pos"] == approx(1.0)
    assert m["cluster:alpha_one: pairwise_model_f1_balanced"] == approx((6 / 7 + 4 / 5) / 2)
    # beta_two (rows 2 and 4 graded, judge F on both): fn 2, tn 4, no pair where the judge said True.
    assert m["cluster:beta_two: pairwise_model_precision_pos"] is None
    assert m["cluster:beta_two: pairwise_model_precision_pos:n_samples"] == 0
    assert m["cluster:beta_two: pairwise_model_recall_pos"] == 0.0  # 0 of 2 physician-True pairs
    assert m["cluster:beta_two: pairwise_model_f1_pos"] is None  # precision undefined
    assert m["cluster:beta_two: pairwise_model_f1_pos:n_samples"] == 2  # tp + fp + fn
    assert m["cluster:beta_two: pairwise_model_precision_neg"] == approx(4 / 6)
    assert m["cluster:beta_two: pairwise_model_f1_neg"] == approx(8 / 10)
    assert m["cluster:beta_two: pairwise_model_precision_balanced"] is None
    assert m["cluster:beta_two: pairwise_model_recall_balanced"] == approx((0 + 1) / 2)
    assert m["cluster:beta_two: pairwise_model_f1_balanced"] is None
    assert m["cluster:beta_two: pairwise_model_f1_balanced:n_samples"] == 2 + 6  # f1_neg n: tn4 + fn2
    assert m["cluster:beta_two: model_f1_balanced_percentile"] is None
    json.dumps(m, allow_nan=False)  # None, never NaN


# Each physician against the other labels on its rows (row 2, a single label, gives nothing):
#   A: row0 T vs TTF (tp2 fp1), row1 F vs F (tn1), row3 T vs TFFT (tp2 fp2), row4 F vs TFFF (fn1 tn3)
#      -> tp4 fp3 fn1 tn4: f1_pos 8/12, f1_neg 8/12, balanced 2/3, n 4+4+2*4 = 16
#   B: row0 F vs TTT (fn3), row1 tn1, row3 T vs TFFT (tp2 fp2), row4 T vs FFFF (fp4)
#      -> tp2 fp6 fn3 tn1: f1_pos 4/13, f1_neg 2/11, balanced 35/143, n 2+1+18 = 21
#   C: row0 T vs TFT (tp2 fp1), row3 F vs TTFT (fn3 tn1), row4 F vs FTFF (fn1 tn3)
#      -> tp2 fp1 fn4 tn4: f1_pos 4/9, f1_neg 8/13, balanced 62/117, n 2+4+10 = 16;  D: same as C
#   E: row3 T vs TTFF (tp2 fp2), row4 F vs FTFF (fn1 tn3) -> f1_pos 4/7, f1_neg 6/9: 13/21, n 11
PHYSICIANS = {
    "A": (2 / 3, 16),
    "B": (35 / 143, 21),
    "C": (62 / 117, 16),
    "D": (62 / 117, 16),
    "E": (13 / 21, 11),
}


def weighted(names: str) -> float:
    return sum(PHYSICIANS[p][0] * PHYSICIANS[p][1] for p in names) / sum(PHYSICIANS[p][1] for p in names)


def test_physician_baseline_by_hand() -> None:
    result = meta_metrics(HAND_ROWS, HAND_JUDGE, min_physician_ratings=15)
    details = result.physician_metrics()
    for physician, (value, n) in PHYSICIANS.items():
        assert details[physician]["pairwise_physician_f1_balanced"] == approx(value), physician
        assert details[physician]["pairwise_physician_f1_balanced:n_samples"] == n, physician
    m = result.metrics
    # n > 15 keeps A, B, C, D; E (n 11) is left out of the mean but not out of the "all" mean
    assert m["physician_count"] == 4
    assert m["physician_f1_balanced_mean"] == approx(weighted("ABCD"))
    assert m["physician_f1_balanced_mean_all"] == approx(weighted("ABCDE"))
    # judge 11/15 = 0.733 is above all four qualifying physicians
    assert m["model_f1_balanced_percentile"] == 100.0
    assert result.overall.percentile == 100.0 and result.overall.physician_count == 4


def test_threshold_is_strict() -> None:
    m = meta_metrics(HAND_ROWS, HAND_JUDGE, min_physician_ratings=16).metrics
    # n must be > 16: only B (n 21) qualifies
    assert m["physician_count"] == 1
    assert m["physician_f1_balanced_mean"] == approx(35 / 143)
    m = meta_metrics(HAND_ROWS, HAND_JUDGE, min_physician_ratings=21).metrics
    assert m["physician_count"] == 0
    assert m["physician_f1_balanced_mean"] is None and m["model_f1_balanced_percentile"] is None
    assert m["physician_f1_balanced_mean_all"] == approx(weighted("ABCDE"))


def test_undefined_physician_values_are_left_out_per_category() -> None:
    m = meta_metrics(HAND_ROWS, HAND_JUDGE, min_physician_ratings=0).metrics
    # alpha_one: A tp2 fp1 tn1 -> f1_pos 4/5, f1_neg 2/3 -> 11/15 (n 5); B fn3 tn1 has no True of its
    # own (precision_pos undefined); C and D have only tp2 fp1 (precision_neg undefined).
    assert m["cluster:alpha_one: physician_count"] == 1
    assert m["cluster:alpha_one: physician_f1_balanced_mean"] == approx(11 / 15)
    # judge on alpha_one: (6/7 + 4/5) / 2 = 29/35 > 11/15
    assert m["cluster:alpha_one: model_f1_balanced_percentile"] == 100.0
    # beta_two: A and E (tp2 fp2 fn1 tn3 each) -> 13/21, n 11; B, C, D undefined there
    assert m["cluster:beta_two: physician_count"] == 2
    assert m["cluster:beta_two: physician_f1_balanced_mean"] == approx(13 / 21)


def test_category_with_a_single_physician() -> None:
    rows = [
        row("cluster:solo_only", "T", "S"),
        row("cluster:solo_only", "F", "S"),
        row("cluster:pair_both", "TT", "XY"),
        row("cluster:pair_both", "FT", "XY"),
    ]
    result = meta_metrics(rows, [T, F, T, F], min_physician_ratings=0)
    m = result.metrics
    # judge on solo_only: tp1 tn1 -> 1.0; nobody to compare S with, so no baseline there
    assert m["cluster:solo_only: pairwise_model_f1_balanced"] == 1.0
    assert m["cluster:solo_only: physician_count"] == 0
    assert m["cluster:solo_only: physician_f1_balanced_mean"] is None
    assert m["cluster:solo_only: physician_f1_balanced_mean_all"] is None
    assert m["cluster:solo_only: model_f1_balanced_percentile"] is None
    assert m["physicians"] == 3
    # S has no pairs at all: undefined overall, absent from simple-evals' per-physician lists
    assert result.physician_metrics()["S"]["pairwise_physician_f1_balanced"] is None
    lists = result.simple_evals_metadata()["physician_agreement_metric_lists"]
    assert all("S" not in by_physician for by_physician in lists.values())


def test_percentile_ties_count_half() -> None:
    rows = [
        row("cluster:tie_case", "TT", "XY"),  # judge T
        row("cluster:tie_case", "FF", "XY"),  # judge F
        row("cluster:tie_case", "TF", "UV"),  # ungraded: baseline only
        row("cluster:tie_case", "TT", "UV"),  # ungraded
        row("cluster:tie_case", "FF", "UV"),  # ungraded
    ]
    m = meta_metrics(rows, [T, F, None, None, None], min_physician_ratings=0).metrics
    # judge: tp2 tn2 -> 1.0.  X, Y: tp1 tn1 -> 1.0 (n 2).  U: fp1 tp1 tn1 -> f1 2/3 both -> 2/3;
    # V: fn1 tp1 tn1 -> 2/3.  Percentile = (2 below + 0.5 * 2 tied) / 4 * 100 = 75.
    assert m["pairwise_model_f1_balanced"] == 1.0
    assert m["model_f1_balanced_percentile"] == 75.0
    assert physician_percentile([0.2, 0.5, 0.5, 0.9], 0.5) == 50.0  # (1 + 0.5 * 2) / 4
    assert physician_percentile([0.5], 0.5) == 50.0
    assert physician_percentile([], 0.5) is None


def test_theme_is_the_weighted_mean_of_its_categories() -> None:
    rows = [
        row("cluster:gamma_a", "TT", "PQ"),  # judge T: tp2
        row("cluster:gamma_a", "FF", "PQ"),  # judge F: tn2
        row("cluster:gamma_b", "TF", "PQ"),  # judge T: tp1 fp1
        row("cluster:gamma_b", "FF", "PQ"),  # judge F: tn2
    ]
    result = meta_metrics(rows, [T, F, T, F], min_physician_ratings=0)
    m = result.metrics
    # gamma_a: 1.0 with n 4; gamma_b: f1_pos 2/3, f1_neg 4/5 -> 11/15 with n 2 + 3 = 5
    assert m["cluster:gamma_b: pairwise_model_f1_balanced"] == approx(11 / 15)
    # theme gamma = (1.0 * 4 + 11/15 * 5) / 9 = 23/27, unlike the pooled overall (6/7 + 8/9) / 2 = 55/63
    assert m["theme:gamma: pairwise_model_f1_balanced"] == approx(23 / 27)
    assert m["theme:gamma: pairwise_model_f1_balanced:n_samples"] == 9
    assert m["pairwise_model_f1_balanced"] == approx(55 / 63)
    # P and Q: 1.0 on gamma_a (tp1 tn1); on gamma_b P has fp1 tn1 and Q fn1 tn1, both undefined there.
    assert m["theme:gamma: physician_f1_balanced_mean"] == 1.0
    assert m["theme:gamma: physician_count"] == 2
    assert m["theme:gamma: model_f1_balanced_percentile"] == 0.0
    assert [s.name for s in result.themes] == ["theme:gamma"]
    assert result.themes[0].judge_f1_balanced == approx(23 / 27)


def test_simple_evals_metadata_leaves_out_undefined_keys() -> None:
    meta = meta_metrics(HAND_ROWS, HAND_JUDGE).simple_evals_metadata()
    model = meta["model_agreement_metrics"]
    assert model["pairwise_model_precision_pos"] == {"n": 4, "value": 0.75}
    assert "cluster:beta_two: pairwise_model_precision_pos" not in model
    assert "cluster:beta_two: pairwise_model_recall_pos" in model
    by_physician = meta["physician_agreement_metric_lists"]["pairwise_physician_f1_balanced"]
    assert sorted(by_physician) == list("ABCDE")
    assert by_physician["B"]["n"] == 21


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="2 judge labels for 5 meta-eval rows"):
        meta_metrics(HAND_ROWS, [T, F])
    with pytest.raises(ValueError, match="judge label 1 is 'yes'"):
        meta_metrics(HAND_ROWS, [T, "yes", F, F, F])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no meta-eval rows"):
        meta_metrics([], [])
    with pytest.raises(ValueError, match="min_physician_ratings"):
        meta_metrics(HAND_ROWS, HAND_JUDGE, min_physician_ratings=-1)
    with pytest.raises(ValueError, match="2 labels but 1 physician ids"):
        MetaRow("c", (T, F), ("A",))
    with pytest.raises(ValueError, match="at least one"):
        MetaRow("c", (), ())
    with pytest.raises(ValueError, match="True or False"):
        MetaRow("c", (1,), ("A",))  # type: ignore[arg-type]


# --- an independent, straightforward per-label implementation ----------------------------------------


def _theme(category: str) -> str:
    return category.removeprefix("cluster:").split("_", 1)[0]


def _rates(pairs: list[tuple[bool, bool]]) -> dict[str, tuple[float | None, int]]:
    """pairs of (rater, other) -> metric name -> (value, n), one pair at a time."""

    def agreement(selected: list[tuple[bool, bool]]) -> tuple[float | None, int]:
        hits = [rater == other for rater, other in selected]
        return (sum(hits) / len(hits) if hits else None), len(hits)

    out = {
        "precision_pos": agreement([p for p in pairs if p[0]]),
        "precision_neg": agreement([p for p in pairs if not p[0]]),
        "recall_pos": agreement([p for p in pairs if p[1]]),
        "recall_neg": agreement([p for p in pairs if not p[1]]),
    }
    for cls, wanted in (("pos", True), ("neg", False)):
        precision, recall = out[f"precision_{cls}"][0], out[f"recall_{cls}"][0]
        n = sum(1 for rater, other in pairs if wanted in (rater, other))
        if precision is None or recall is None:
            out[f"f1_{cls}"] = (None, n)
        elif precision == 0 and recall == 0:
            out[f"f1_{cls}"] = (0.0, n)
        else:
            out[f"f1_{cls}"] = (2 * (precision * recall) / (precision + recall), n)
    for stem in ("precision", "recall", "f1"):
        (pos, n_pos), (neg, n_neg) = out[f"{stem}_pos"], out[f"{stem}_neg"]
        out[f"{stem}_balanced"] = (None if pos is None or neg is None else (pos + neg) / 2, n_pos + n_neg)
    return out


def _pooled(parts: list[tuple[float | None, int]]) -> tuple[float | None, int]:
    defined = [(value, n) for value, n in parts if value is not None]
    total = sum(n for _, n in defined)
    return (sum(value * n for value, n in defined) / total if total else None), total


def reference_metrics(rows: list[MetaRow], judge: list[bool | None], threshold: int) -> dict[str, object]:
    categories = sorted({r.category for r in rows})
    themes = sorted({_theme(c) for c in categories})
    physicians = sorted({p for r in rows for p in r.physician_ids})
    judge_pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    physician_pairs: dict[str, dict[str, list[tuple[bool, bool]]]] = defaultdict(lambda: defaultdict(list))
    for r, verdict in zip(rows, judge, strict=True):
        for i, (physician, label) in enumerate(zip(r.physician_ids, r.labels, strict=True)):
            if verdict is not None:
                judge_pairs[""].append((verdict, label))
                judge_pairs[r.category].append((verdict, label))
            for j, other in enumerate(r.labels):
                if j != i:
                    physician_pairs[physician][""].append((label, other))
                    physician_pairs[physician][r.category].append((label, other))
    judge_f1 = {s: _rates(judge_pairs[s])["f1_balanced"] for s in ["", *categories]}
    phys_f1 = {
        p: {s: _rates(physician_pairs[p][s])["f1_balanced"] for s in ["", *categories]} for p in physicians
    }
    for t in themes:
        members = [c for c in categories if _theme(c) == t]
        judge_f1[f"theme:{t}"] = _pooled([judge_f1[c] for c in members])
        for p in physicians:
            phys_f1[p][f"theme:{t}"] = _pooled([phys_f1[p][c] for c in members])

    out: dict[str, object] = {
        "rows": len(rows),
        "physician_labels": sum(len(r.labels) for r in rows),
        "physicians": len(physicians),
        "min_physician_ratings": threshold,
    }
    for scope in ["", *categories, *(f"theme:{t}" for t in themes)]:
        prefix = f"{scope}: " if scope else ""
        in_scope = [
            (r, v)
            for r, v in zip(rows, judge, strict=True)
            if scope in ("", r.category) or scope == f"theme:{_theme(r.category)}"
        ]
        graded = [(r, v) for r, v in in_scope if v is not None]
        out[f"{prefix}graded_rows"] = len(graded)
        out[f"{prefix}ungraded_rows"] = len(in_scope) - len(graded)
        if scope.startswith("theme:"):
            judge_entries = {"f1_balanced": judge_f1[scope]}
        else:
            judge_entries = _rates(judge_pairs[scope])
        for name, (value, n) in judge_entries.items():
            out[f"{prefix}pairwise_model_{name}"] = value
            out[f"{prefix}pairwise_model_{name}:n_samples"] = n
        per_row: dict[str, list[float]] = {
            "num_physician_labels": [float(len(r.labels)) for r, _ in graded],
            "percent_physician_pos": [sum(r.labels) / len(r.labels) for r, _ in graded],
            "model_predicted_positive": [float(bool(v)) for _, v in graded],
        }
        for key, values in per_row.items():
            out[f"{prefix}{key}"] = sum(values) / len(values) if values else None
            out[f"{prefix}{key}:n_samples"] = len(values)
        defined = [(v, n) for v, n in (phys_f1[p][scope] for p in physicians) if v is not None]
        qualifying = [(value, n) for value, n in defined if n > threshold]
        judge_value = judge_f1[scope][0]
        out[f"{prefix}physician_f1_balanced_mean"] = _pooled(list(qualifying))[0]
        out[f"{prefix}physician_f1_balanced_mean_all"] = _pooled(list(defined))[0]
        out[f"{prefix}physician_count"] = len(qualifying)
        if judge_value is None or not qualifying:
            out[f"{prefix}model_f1_balanced_percentile"] = None
        else:
            below = sum(1 for value, _ in qualifying if value < judge_value)
            tied = sum(1 for value, _ in qualifying if value == judge_value)
            out[f"{prefix}model_f1_balanced_percentile"] = (below + 0.5 * tied) / len(qualifying) * 100
    return out


def assert_same_metrics(actual: Mapping[str, object], expected: Mapping[str, object]) -> None:
    assert actual.keys() == expected.keys()
    for key, want in expected.items():
        got = actual[key]
        if want is None:
            assert got is None, key
        else:
            assert got is not None and abs(got - want) <= 1e-12, (key, got, want)  # type: ignore[operator]


def random_dataset(seed: int, n_rows: int) -> tuple[list[MetaRow], list[bool | None]]:
    rng = random.Random(seed)
    categories = [f"cluster:{theme}_{sub}" for theme in ("red", "green", "blue") for sub in ("x", "y-z")]
    categories.append("no_cluster_prefix")
    physicians = [f"doc{i:02d}" for i in range(14)]
    rows, judge = [], []
    for _ in range(n_rows):
        k = rng.choice([1, 1, 2, 2, 2, 3, 3, 4, 5])
        ids = rng.sample(physicians, k)
        if rng.random() < 0.03:
            ids[-1] = ids[0]  # the same physician twice on a row: paired with their other label
        bias = rng.random()
        rows.append(MetaRow(rng.choice(categories), tuple(rng.random() < bias for _ in ids), tuple(ids)))
        judge.append(None if rng.random() < 0.05 else rng.random() < bias)
    return rows, judge


@pytest.mark.parametrize(("seed", "threshold"), [(0, 0), (1, 10), (2, 50), (3, 25)])
def test_vectorized_matches_per_label_loop(seed: int, threshold: int) -> None:
    rows, judge = random_dataset(seed, 600)
    result = meta_metrics(rows, judge, min_physician_ratings=threshold)
    assert_same_metrics(result.metrics, reference_metrics(rows, judge, threshold))


def test_all_judge_labels_equal_on_random_data() -> None:
    rows, _ = random_dataset(7, 200)
    for verdict in (True, False):
        judge: list[bool | None] = [verdict] * len(rows)
        m = meta_metrics(rows, judge, min_physician_ratings=5).metrics
        assert_same_metrics(m, reference_metrics(rows, judge, 5))
        missing = "neg" if verdict else "pos"
        assert m[f"pairwise_model_precision_{missing}"] is None
        assert m["pairwise_model_f1_balanced"] is None
        assert m["model_f1_balanced_percentile"] is None


def test_all_rows_ungraded() -> None:
    rows, _ = random_dataset(8, 50)
    m = meta_metrics(rows, [None] * len(rows), min_physician_ratings=0).metrics
    assert m["graded_rows"] == 0 and m["ungraded_rows"] == 50
    assert m["pairwise_model_f1_balanced"] is None and m["num_physician_labels"] is None
    assert m["physician_f1_balanced_mean_all"] is not None  # the baseline does not need the judge


# --- the fixture file and bad rows ---------------------------------------------------------------------


def fixture_lines() -> list[str]:
    return FIXTURE.read_text(encoding="utf-8").splitlines()


def test_fixture_parses_and_scores() -> None:
    records = read_records(FIXTURE, MetaEvalRecord)
    assert len(records) == 16
    rows = [MetaRow.from_record(record) for record in records]
    assert {len(r.labels) for r in rows} == {1, 2, 3, 4, 5}
    judge: list[bool | None] = [sum(r.labels) * 2 >= len(r.labels) for r in rows]
    judge[3] = None
    result = meta_metrics(records, judge, min_physician_ratings=3)  # records are accepted as rows too
    assert_same_metrics(result.metrics, reference_metrics(rows, judge, 3))
    assert [s.name for s in result.themes] == ["theme:context", "theme:emergency", "theme:hedging"]
    json.dumps(result.metrics, allow_nan=False)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(anonymized_physician_ids=r["anonymized_physician_ids"][:-1]), "ids"),
        (lambda r: r.update(binary_labels=[], anonymized_physician_ids=[]), "binary_labels is empty"),
        (lambda r: r.update(binary_labels=[1] * len(r["binary_labels"])), "boolean"),
        (lambda r: r.update(binary_labels=["true"] * len(r["binary_labels"])), "boolean"),
    ],
)
def test_bad_rows_name_the_line(change: object, message: str) -> None:
    lines = fixture_lines()
    record = json.loads(lines[2])
    change(record)  # type: ignore[operator]
    lines[2] = json.dumps(record)
    with pytest.raises(DataError) as caught:
        read_records("\n".join(lines).encode(), MetaEvalRecord, name="meta.jsonl")
    assert caught.value.line == 3
    assert str(caught.value).startswith("meta.jsonl:3")
    assert message in str(caught.value)
