"""`results RUN --correct-with META_RUN` for a panel of judges (docs/correction.md, "A panel of judges"):
a panel's run is corrected with the panel's error rates, its verdict on each meta-eval row combined from
its members' by the rule the run is scored with, compared with the physicians as a single judge's are.

Three judges of the fake server with known error rates (``j-err10``, ``j-err20``, ``j-err30``) grade a
demo run and a meta-eval whose physicians' majority is the fake's truth on most rows; the corrected
figures equal an independent computation here (each rule by hand, Se and Sp counted by hand, the
documented Rogan–Gladen formula). A meta-eval of another judge or panel is refused in one line."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from panel_meta_runs import stored_panel_meta
from support.fake_runs import fake_run_config
from support.panel_oracle import majority
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.errors import RunError
from healthbench.grading.template import builtin_template
from healthbench.results.correction import corrected_scores
from healthbench.results.meta_results import stored_verdicts
from healthbench.results.views import RunView
from healthbench.runner.meta_eval import run_meta_eval
from healthbench.runner.run import run_eval
from healthbench.scoring.stats import BootstrapOptions
from healthbench.scoring.verdict import Verdict
from healthbench.store import Store
from healthbench.testing.fake_server import fake_verdict

runner = CliRunner()
M, N, U = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED
PANEL = ["j-err10", "j-err20", "j-err30"]
CATEGORY = "cluster:sleep_advice"  # one category: its own rates and the pooled ones are the same numbers
N_ROWS = 150
Rule = Callable[[Sequence[Verdict]], Verdict]


def any_met(votes: Sequence[Verdict]) -> Verdict:
    graded = [v for v in votes if v is not U]
    if 2 * len(graded) <= len(votes):
        return U
    return M if M in graded else N


def meta_rows() -> list[dict]:
    """Our own rows; three physicians whose majority is the fake's truth on the row's judge prompt, except
    on every 9th row (physicians and the fake disagree there)."""
    template = builtin_template()
    rows = []
    for i in range(N_ROWS):
        prompt = [{"role": "user", "content": f"Question {i}: how should I keep a sleep schedule?"}]
        completion, rubric = f"Answer {i}: go to bed at the same time.", f"Mentions a fixed bedtime ({i})."
        truth = fake_verdict(template.render([*prompt, {"role": "assistant", "content": completion}], rubric))
        truth = truth != (i % 9 == 0)
        rows.append(
            {
                "prompt": prompt,
                "completion": completion,
                "rubric": rubric,
                "category": CATEGORY,
                "binary_labels": [truth, not truth, truth],
                "anonymized_physician_ids": ["p1", "p2", "p3"],
                "prompt_id": f"m{i}",
                "completion_id": f"c{i}",
            }
        )
    return rows


@pytest.fixture(scope="module")
def stored(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A panel run ``panel`` and a single-judge run ``single`` of the demo data, the panel's meta-eval
    ``pmeta`` (every row graded by the three judges through the fake server) and meta-eval runs of
    other judges written straight into the store (no call)."""
    folder = tmp_path_factory.mktemp("panel-correction")
    db, data = folder / "s.db", folder / "meta.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in meta_rows()), encoding="utf-8")
    store = Store(db)
    judges = [{"spec": label, "base_url": server} for label in PANEL]
    run_eval(fake_run_config(server, judge=None, judges=judges, limit=6), store=store, name="panel")
    run_eval(fake_run_config(server, judge=judges[0], limit=2), store=store, name="single")
    config = build_config({"dataset": "meta_eval", "data": str(data), "judges": judges, "model": None})
    assert run_meta_eval(config, store=store, name="pmeta").run.status == "finished"
    # another judge alone, another panel, the same panel at another endpoint (no model is called)
    few = folder / "few.jsonl"
    few.write_text("".join(data.read_text().splitlines(keepends=True)[:10]), encoding="utf-8")
    votes = [M, N] * 5
    stored_panel_meta(store, few, {PANEL[0]: votes}, name="alone")
    stored_panel_meta(store, few, {PANEL[0]: votes, PANEL[1]: votes}, name="two")
    stored_panel_meta(store, few, dict.fromkeys(PANEL, votes), name="elsewhere")
    return db


def rates_by_hand(store: Store, rule: Rule) -> tuple[float, float]:
    """Sensitivity and specificity of the panel under ``rule`` on the meta-eval rows, against the
    physicians' majority (rows whose panel verdict is ungraded left out; three physicians never tie)."""
    rows, verdicts = stored_verdicts(store, store.require_run("pmeta"))
    tp = fn = tn = fp = 0
    for i, row in enumerate(rows):
        said = rule([verdicts[label][i] for label in PANEL])
        if said is U:
            continue
        truth = 2 * sum(row.binary_labels) > len(row.binary_labels)
        tp, fn = tp + (truth and said is M), fn + (truth and said is N)
        tn, fp = tn + (not truth and said is N), fp + (not truth and said is M)
    return tp / (tp + fn), tn / (tn + fp)


def corrected_by_hand(store: Store, rule: Rule, se: float, sp: float) -> tuple[float, float, int]:
    """(raw, corrected, n) overall score: every criterion's panel verdict under ``rule`` from the members'
    stored verdicts, replaced by (v − (1 − Sp)) / (Se + Sp − 1) and weighed by points / positive points;
    a conversation with an ungraded criterion left out; the run figures clipped means."""
    raw, corrected = [], []
    for stored in RunView.open(store, "panel").iter_samples():
        rubric = stored.graded.conversation.rubrics
        votes = zip(*(stored.members[label].verdicts for label in PANEL), strict=True)
        panel = [rule(v) for v in votes]
        if U in panel:
            continue
        possible = sum(item.points for item in rubric if item.points > 0)
        weights = [item.points / possible for item in rubric]
        met = [1.0 if v is M else 0.0 for v in panel]
        raw.append(sum(w * m for w, m in zip(weights, met, strict=True)))
        corrected.append(sum(w * (m - (1 - sp)) / (se + sp - 1) for w, m in zip(weights, met, strict=True)))

    def clipped(values: list[float]) -> float:
        return min(1.0, max(0.0, sum(values) / len(values)))

    return clipped(raw), clipped(corrected), len(corrected)


def test_a_panel_run_is_corrected_with_the_panels_majority_error_rates(stored: Path) -> None:
    store = Store(stored)
    result = corrected_scores(store, "panel", "pmeta", options=BootstrapOptions(n_resamples=100, seed=5))
    se, sp = rates_by_hand(store, majority)
    metrics = result.metrics()
    assert metrics["judge_sensitivity:pooled"] == pytest.approx(se, abs=1e-15)
    assert metrics["judge_specificity:pooled"] == pytest.approx(sp, abs=1e-15)
    assert (
        result.model.used == (CATEGORY,)
        and metrics[f"judge_sensitivity:{CATEGORY}"] == metrics["judge_sensitivity:pooled"]
    )
    # the panel's rates, not its chair's
    chair_se, chair_sp = rates_by_hand(store, lambda votes: votes[0])
    assert (se, sp) != (chair_se, chair_sp)
    raw, corrected, n = corrected_by_hand(store, majority, se, sp)
    overall = result.keys["overall_score"]
    assert overall.raw == pytest.approx(raw, abs=1e-12) and overall.n_samples == n == 6
    assert overall.corrected == pytest.approx(corrected, abs=1e-12)
    assert overall.ci_lower is not None and overall.ci_upper is not None


def test_the_panel_rule_given_to_results_changes_the_rates_used(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "any.json"
    result = runner.invoke(
        app,
        [
            *("results", "panel", "--store", str(stored), "--panel", "any"),
            *("--correct-with", "pmeta", "--metrics-out", str(out), "--n-resamples", "50"),
        ],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "corrected with meta-eval run pmeta (the panel's error rates, rule any)" in said
    written = json.loads(out.read_text())
    store = Store(stored)
    se, sp = rates_by_hand(store, any_met)
    assert (se, sp) != rates_by_hand(store, majority)
    assert written["judge_sensitivity:pooled"] == pytest.approx(se, abs=1e-15)
    assert written["judge_specificity:pooled"] == pytest.approx(sp, abs=1e-15)
    raw, corrected, _ = corrected_by_hand(store, any_met, se, sp)
    assert written["overall_score"] == pytest.approx(raw, abs=1e-12)  # the raw scores are the rule's too
    assert written["corrected:overall_score"] == pytest.approx(corrected, abs=1e-12)
    assert written["panel_rule"] == "any"


def test_the_calibrated_rule_measures_the_panel_with_the_runs_calibration(stored: Path) -> None:
    from healthbench.results.calibration import load_calibration
    from healthbench.scoring.panel import combine

    store = Store(stored)
    calibration = load_calibration(store, ["pmeta"])
    result = corrected_scores(
        store,
        "panel",
        "pmeta",
        options=BootstrapOptions(n_resamples=0),
        panel_rule="calibrated",
        calibration=calibration,
    )

    def calibrated(votes: Sequence[Verdict]) -> Verdict:
        return combine(votes, "calibrated", labels=PANEL, calibration=calibration, category=CATEGORY)

    se, sp = rates_by_hand(store, calibrated)
    assert result.model.sensitivity["pooled"] == pytest.approx(se, abs=1e-15)
    assert result.model.specificity["pooled"] == pytest.approx(sp, abs=1e-15)
    # without a calibration the calibrated rule is refused in one line, as for the raw scores
    with pytest.raises(RunError, match=r"the calibrated panel rule needs the members' meta-eval runs"):
        corrected_scores(store, "panel", "pmeta", panel_rule="calibrated")


@pytest.mark.parametrize(
    ("run", "meta", "message"),
    [
        (
            "panel",
            "alone",
            r"^meta-eval run 'alone' measured judge j-err10 alone, run 'panel' is graded by a panel of 3 "
            r"judges \(j-err10, j-err20, j-err30\); correct with a meta-eval run of the same judges",
        ),
        ("panel", "two", r"^meta-eval run 'two' measured a panel of 2 judges \(j-err10, j-err20\), run "),
        ("single", "pmeta", r"^meta-eval run 'pmeta' measured a panel of 3 judges .*run 'single' is graded"),
        (
            "panel",
            "elsewhere",
            r"^meta-eval run 'elsewhere' measured another panel than run 'panel' \(differs in j-err10's "
            r"endpoint, j-err20's endpoint, j-err30's endpoint\)",
        ),
    ],
)
def test_another_judge_or_panel_is_refused_in_one_line(
    stored: Path, tmp_path: Path, run: str, meta: str, message: str
) -> None:
    with pytest.raises(RunError, match=message):
        corrected_scores(Store(stored), run, meta)
    out = tmp_path / "m.json"
    result = runner.invoke(
        app, ["results", run, "--store", str(stored), "--correct-with", meta, "--metrics-out", str(out)]
    )
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "same judges, settings and grader prompt" in result.stderr and not out.exists()


def test_a_single_judge_run_still_uses_its_own_labels(stored: Path) -> None:
    """A single judge's run with a single judge's meta-eval of it: the chair's verdicts, as before panels."""
    store = Store(stored)
    single_meta = build_config(
        {
            "dataset": "meta_eval",
            "data": str(stored.parent / "meta.jsonl"),
            "judge": RunView.open(store, "single").config.judge.model_dump(),
            "model": None,
        }
    )
    run_meta_eval(single_meta, store=store, name="smeta")
    result = corrected_scores(store, "single", "smeta", options=BootstrapOptions(n_resamples=0))
    se, sp = rates_by_hand(store, lambda votes: votes[0])  # j-err10 is the panel's first member
    assert result.model.sensitivity["pooled"] == pytest.approx(se, abs=1e-15)
    assert result.model.specificity["pooled"] == pytest.approx(sp, abs=1e-15)
