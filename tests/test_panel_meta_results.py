"""The meta-eval of a stored run of several judges (`results.panel_meta_results`, `healthbench meta-eval`):
each member's and the majority panel's pairwise figures equal an independent loop over (judge label,
physician label) pairs; dollars per 1,000 criteria are exact from the stored costs; ``--judges-out`` and
the ``--metrics-out`` keys hold them; a single judge's meta-eval prints and writes what it did before."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from panel_meta_runs import M, N, U, as_meta_rows, drawn_verdicts, meta_rows, stored_panel_meta, write_rows
from support.panel_oracle import majority
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.results.calibration import load_calibration
from healthbench.results.panel_meta_results import (
    JUDGES_COLUMNS,
    judges_csv,
    meta_run_metrics,
    panel_meta_keys,
    score_panel_meta_run,
    theme_table,
)
from healthbench.scoring.meta import meta_metrics
from healthbench.scoring.panel_meta import panel_verdicts
from healthbench.scoring.verdict import Verdict
from healthbench.store.runs import Store

runner = CliRunner()
ROWS = meta_rows()
PANEL = {
    "judge-a": drawn_verdicts(ROWS, 0.1, 1),
    "judge-b": drawn_verdicts(ROWS, 0.25, 2),
    "judge-c": drawn_verdicts(ROWS, 0.4, 3),
}
# each member's cost per row: judge-a $0.002 a criterion, judge-b $0.0005 with every third answer from
# the call cache (stored at $0), judge-c unpriced on one row
USAGE_KEYS = ("cost_usd", "tokens:judge:")  # --metrics-out's cost and tokens of the judges' calls
COSTS = {
    "judge-a": [0.002] * len(ROWS),
    "judge-b": [0.0 if i % 3 == 0 else 0.0005 + 0.0001 * (i % 2) for i in range(len(ROWS))],
    "judge-c": [None if i == 5 else 0.001 for i in range(len(ROWS))],
}
CACHED = {"judge-b": [i % 3 == 0 for i in range(len(ROWS))]}


def pairwise(rows: list[dict], verdicts: list[Verdict], theme: str | None = None) -> dict[str, float | None]:
    """simple-evals' loop: the judge's label against every physician label of each graded row."""
    tp = fp = fn = tn = 0
    for row, verdict in zip(rows, verdicts, strict=True):
        if verdict is U or (theme and not row["category"].startswith(f"cluster:{theme}_")):
            continue
        for label in row["binary_labels"]:
            said = verdict is M
            tp, fp = tp + (said and label), fp + (said and not label)
            fn, tn = fn + (not said and label), tn + (not said and not label)
    p_pos, r_pos, p_neg, r_neg = tp / (tp + fp), tp / (tp + fn), tn / (tn + fn), tn / (tn + fp)
    f1_pos, f1_neg = 2 * p_pos * r_pos / (p_pos + r_pos), 2 * p_neg * r_neg / (p_neg + r_neg)
    return {
        "f1_balanced": (f1_pos + f1_neg) / 2,
        "f1_pos": f1_pos,
        "f1_neg": f1_neg,
        "precision_pos": p_pos,
        "recall_pos": r_pos,
        "precision_neg": p_neg,
        "recall_neg": r_neg,
    }


def expected_dollars(label: str) -> float | None:
    asked = [
        c
        for c, cached in zip(COSTS[label], CACHED.get(label, [False] * len(ROWS)), strict=True)
        if not cached
    ]
    return None if any(c is None for c in asked) else 1000 * math.fsum(asked) / len(asked)  # type: ignore[arg-type]


MAJORITY = [majority(votes) for votes in zip(*PANEL.values(), strict=True)]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "s.db")
    path = write_rows(tmp_path / "meta.jsonl", ROWS)
    stored_panel_meta(s, path, PANEL, costs=COSTS, cached=CACHED)
    return s


def test_members_and_majority_equal_an_independent_pairwise_computation(store: Store) -> None:
    measured = score_panel_meta_run(store, store.require_run("meta"))
    names = [e.name for e in measured.result.entries]
    assert names == [*PANEL, "panel:majority", "panel:unanimous", "panel:any", "panel:calibrated"]
    assert measured.rule == "majority" and measured.calibration == "cross-fitted"
    for name, verdicts in {**PANEL, "panel:majority": MAJORITY}.items():
        metrics = measured.result.entry(name).result.metrics
        for key, value in pairwise(ROWS, verdicts).items():
            assert metrics[f"pairwise_model_{key}"] == pytest.approx(value, abs=1e-12), (name, key)
        assert metrics["ungraded_rows"] == sum(v is U for v in verdicts)
        for theme in ("sleep", "hedging"):
            want = pairwise(ROWS, verdicts, theme)["f1_balanced"]
            assert metrics[f"theme:{theme}: pairwise_model_f1_balanced"] == pytest.approx(want, abs=1e-12)
    assert measured.headline == measured.result.entry("panel:majority").result
    # the paper's Table 5: every entry's balanced F1 by theme beside the physicians' own agreement
    table = theme_table(measured)
    assert [row["scope"] for row in table] == ["overall", "theme:hedging", "theme:sleep"]
    physicians = meta_metrics(as_meta_rows(ROWS), [True] * len(ROWS)).metrics
    assert table[1]["physicians"] == physicians["theme:hedging: physician_f1_balanced_mean"]
    assert table[2]["judge-b"] == pytest.approx(pairwise(ROWS, PANEL["judge-b"], "sleep")["f1_balanced"])


def test_dollars_per_thousand_criteria_from_the_stored_costs(store: Store) -> None:
    measured = score_panel_meta_run(store, store.require_run("meta"))
    dollars = {e.name: e.dollars_per_1000 for e in measured.result.entries}
    assert dollars["judge-a"] == pytest.approx(2.0, abs=1e-12)
    # judge-b: the 60 rows it asked (every third answered from the call cache), $0.0005 or $0.0006
    asked = [0.0005 + 0.0001 * (i % 2) for i in range(len(ROWS)) if i % 3]
    assert (
        dollars["judge-b"] == pytest.approx(1000 * sum(asked) / 60, abs=1e-12) == expected_dollars("judge-b")
    )
    assert dollars["judge-c"] is None  # one call without a price: unknown, never guessed
    assert all(dollars[f"panel:{rule}"] is None for rule in ("majority", "any"))


def test_a_panel_costs_the_sum_of_its_members(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    two = {label: PANEL[label] for label in ("judge-a", "judge-b")}
    stored_panel_meta(s, write_rows(tmp_path / "m.jsonl", ROWS), two, costs=COSTS, cached=CACHED)
    measured = score_panel_meta_run(s, s.require_run("meta"))
    panel = expected_dollars("judge-a") + expected_dollars("judge-b")  # type: ignore[operator]
    for rule in ("majority", "unanimous", "any", "calibrated"):
        assert measured.result.entry(f"panel:{rule}").dollars_per_1000 == pytest.approx(panel, abs=1e-12)


def test_calibrate_with_another_run_weighs_the_calibrated_rule(store: Store, tmp_path: Path) -> None:
    other = meta_rows(seed=11)
    errors = zip(PANEL, (0.1, 0.25, 0.4), strict=True)
    votes = {label: drawn_verdicts(other, e, k) for k, (label, e) in enumerate(errors, 4)}
    stored_panel_meta(store, write_rows(tmp_path / "other.jsonl", other), votes, name="other")
    calibration = load_calibration(store, ["other"])
    measured = score_panel_meta_run(
        store, store.require_run("meta"), calibration=calibration, calibrate_with=["other"]
    )
    assert measured.calibration == "given" and "meta-eval run(s) other" in measured.calibration_line()
    from healthbench.scoring.meta import MetaRow

    rows = [
        MetaRow(r["category"], tuple(r["binary_labels"]), tuple(r["anonymized_physician_ids"])) for r in ROWS
    ]
    combined = panel_verdicts(rows, PANEL, "calibrated", calibration=calibration)
    got = measured.result.entry("panel:calibrated").result.metrics["pairwise_model_f1_balanced"]
    assert got == pytest.approx(pairwise(ROWS, combined)["f1_balanced"], abs=1e-12)


def test_judges_csv_and_metrics_keys(store: Store) -> None:
    measured = score_panel_meta_run(store, store.require_run("meta"))
    lines = list(csv.DictReader(io.StringIO(judges_csv(measured))))
    assert judges_csv(measured).splitlines()[0] == ",".join(JUDGES_COLUMNS)
    assert [(r["name"], r["kind"]) for r in lines] == [
        ("judge-a", "member"),
        ("judge-b", "member"),
        ("judge-c", "member"),
        ("panel:majority", "panel"),
        ("panel:unanimous", "panel"),
        ("panel:any", "panel"),
        ("panel:calibrated", "panel"),
    ]
    for line, (name, verdicts) in zip(lines[:4], {**PANEL, "panel:majority": MAJORITY}.items(), strict=True):
        want = pairwise(ROWS, verdicts)
        for column in JUDGES_COLUMNS[2:9]:
            assert float(line[column]) == pytest.approx(want[column], abs=1e-12), (name, column)
        assert int(line["graded_rows"]) + int(line["ungraded_rows"]) == len(ROWS)
        assert int(line["ungraded_rows"]) == sum(v is U for v in verdicts)
        dollars = expected_dollars(name) if name in PANEL else None
        cell = line["dollars_per_1000_criteria"]
        assert (cell == "") if dollars is None else (float(cell) == pytest.approx(dollars, abs=1e-12))
    keys = panel_meta_keys(measured)
    assert (
        keys["pairwise_model_f1_balanced"]
        == measured.result.entry("panel:majority").result.metrics["pairwise_model_f1_balanced"]
    )
    assert keys["judge:judge-a:pairwise_model_f1_balanced"] == pytest.approx(
        pairwise(ROWS, PANEL["judge-a"])["f1_balanced"]
    )
    assert keys["judge:judge-a:dollars_per_1000_criteria"] == pytest.approx(2.0)
    assert keys["panel:any:dollars_per_1000_criteria"] is None
    assert keys["panel_rule"] == "majority" and keys["panel_calibration"] == "cross-fitted"
    assert "judge:judge-a:cluster:sleep_advice: pairwise_model_f1_pos" in keys
    assert not any(k.startswith("judge:") and "physician" in k for k in keys)  # the baseline is once


@pytest.fixture
def graded_store(tmp_path: Path) -> Path:
    """A panel run with every row graded by every member (resuming it asks nothing)."""
    rows = ROWS[:40]
    votes = {label: [N if v is U else v for v in verdicts[:40]] for label, verdicts in PANEL.items()}
    costs = {label: [0.001 * (k + 1)] * 40 for k, label in enumerate(PANEL)}
    stored_panel_meta(Store(tmp_path / "g.db"), write_rows(tmp_path / "g.jsonl", rows), votes, costs=costs)
    return tmp_path / "g.db"


def test_cli_prints_the_side_by_side_table_and_writes_both_files(graded_store: Path, tmp_path: Path) -> None:
    judges, metrics = tmp_path / "judges.csv", tmp_path / "m.json"
    args = ["meta-eval", "--resume", "meta", "--store", str(graded_store)]
    result = runner.invoke(app, [*args, "--judges-out", str(judges), "--metrics-out", str(metrics)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "3 judges" in said and "panel:majority" in said and "pairwise balanced F1 by theme" in said
    assert "panel:calibrated is cross-fitted" in said
    measured = score_panel_meta_run(Store(graded_store), Store(graded_store).require_run("meta"))
    assert judges.read_text() == judges_csv(measured)
    assert [line.split(",")[-4] for line in judges.read_text().splitlines()[1:4]] == ["1.0", "2.0", "3.0"]
    assert judges.read_text().splitlines()[4].split(",")[-4] == "6.0"  # the panel: the sum
    written = json.loads(metrics.read_text())
    provenance = {"profile", "grader_template_sha256"}
    usage = {k for k in written if k.startswith(USAGE_KEYS)}  # the members' calls, as one judge's
    assert {k: v for k, v in written.items() if k not in provenance | usage} == panel_meta_keys(measured)
    assert written["cost_usd:judge"] == written["cost_usd"] == pytest.approx(40 * (0.001 + 0.002 + 0.003))


def test_a_single_judge_writes_what_it_did(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    one = [N if v is U else v for v in PANEL["judge-a"]]
    stored_panel_meta(s, write_rows(tmp_path / "m.jsonl", ROWS), {"judge-a": one}, costs=COSTS)
    judges, metrics = tmp_path / "judges.csv", tmp_path / "m.json"
    args = ["meta-eval", "--resume", "meta", "--store", str(tmp_path / "s.db")]
    result = runner.invoke(app, [*args, "--judges-out", str(judges), "--metrics-out", str(metrics)])
    assert result.exit_code == 0, result.output
    assert "judge judge-a" in result.output and "panel:" not in result.output
    expected = meta_metrics(as_meta_rows(ROWS), [v.criteria_met for v in one]).metrics
    written = json.loads(metrics.read_text())
    usage = {k for k in written if k.startswith(USAGE_KEYS)}
    assert {k: written[k] for k in expected} == expected and set(written) - usage == {
        *expected,
        "profile",
        "grader_template_sha256",
    }
    assert written["cost_usd:judge"] == pytest.approx(sum(COSTS["judge-a"]))
    lines = judges.read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith("judge-a,member,")
    assert float(lines[1].split(",")[-4]) == pytest.approx(2.0)


def test_the_services_metrics_of_a_panel_run_are_the_metrics_out_keys(store: Store) -> None:
    run = store.require_run("meta")
    assert meta_run_metrics(store, run) == panel_meta_keys(score_panel_meta_run(store, run))
