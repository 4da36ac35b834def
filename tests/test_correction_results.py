"""`healthbench results RUN --correct-with META_RUN` and `results.correction.corrected_scores`: a stored
run corrected with a stored meta-eval run of the same judge; another judge is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.errors import RunError
from healthbench.results.correction import corrected_scores
from healthbench.results.views import RunView
from healthbench.runner.meta_eval import prepare_meta_eval, row_id
from healthbench.scoring.stats import BootstrapOptions
from healthbench.store.runs import GradeRow, GradeStatus, RunStatus, Store

runner = CliRunner()
SE, SP = 0.8, 0.9  # the meta-eval labels below give exactly these


@pytest.fixture(scope="module")
def server():
    with fake_server_process() as url:
        yield url


def meta_rows(n_per_truth: int = 40) -> list[dict]:
    """Rows of one category: n with physicians saying met, n not met (our own text)."""
    rows = []
    for i in range(2 * n_per_truth):
        truth = i < n_per_truth
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"Question {i} about sleep hygiene."}],
                "completion": f"Answer {i}: keep a regular bedtime.",
                "rubric": f"Mentions a regular schedule ({i}).",
                "category": "cluster:sleep_advice",
                "binary_labels": [truth, truth, not truth],
                "anonymized_physician_ids": ["p1", "p2", "p3"],
                "prompt_id": f"m{i}",
                "completion_id": f"c{i}",
            }
        )
    return rows


def judge_says_met(index: int, n_per_truth: int = 40) -> bool:
    if index < n_per_truth:  # truth met: 32 of 40 met (Se 0.8)
        return index < round(SE * n_per_truth)
    return index - n_per_truth < round((1 - SP) * n_per_truth)  # truth not met: 4 of 40 met (Sp 0.9)


def stored_meta_run(store: Store, path: Path, judge: dict, name: str = "meta") -> None:
    config = build_config({"dataset": "meta_eval", "data": str(path), "judge": judge, "model": None})
    run = prepare_meta_eval(store, config.model_copy(update={"model": None}), name)
    records = RunView.of(store, run).meta_records()
    grades = [
        GradeRow(
            row_id(r),
            0,
            None,
            None,
            False,
            None,
            0,
            GradeStatus.MET if judge_says_met(int(r.prompt_id[1:])) else GradeStatus.NOT_MET,
            None,
            1,
            judge=config.judge.label,
        )
        for r in records
    ]
    store.put(run.id, grades=grades)
    store.set_status(run.id, RunStatus.FINISHED)


@pytest.fixture
def stored(server: str, tmp_path: Path, write_file) -> Path:
    db = tmp_path / "s.db"
    result = runner.invoke(
        app,
        [
            *("run", "--model", "cand", "--base-url", server, "--judge", "judge", "--judge-base-url", server),
            *("--store", str(db), "--name", "r", "--max-retries", "0"),
        ],
    )
    assert result.exit_code == 0, result.output
    path = write_file("meta.jsonl", "".join(json.dumps(r) + "\n" for r in meta_rows()))
    stored_meta_run(Store(db), path, {"spec": "judge", "base_url": server})
    stored_meta_run(Store(db), path, {"spec": "other-judge", "base_url": server}, name="meta-other")
    return db


def test_corrected_overall_by_hand(stored: Path) -> None:
    store = Store(stored)
    result = corrected_scores(store, "r", "meta", options=BootstrapOptions(n_resamples=200, seed=3))
    # no run criterion is in cluster:sleep_advice: every one uses the pooled Se 0.8, Sp 0.9
    assert result.model.used == ("cluster:sleep_advice",)
    expected = []
    for sample in RunView.open(store, "r").graded_samples():
        rubric = sample.conversation.rubrics
        possible = sum(i.points for i in rubric if i.points > 0)
        for_each = [
            (i.points / possible, v.criteria_met) for i, v in zip(rubric, sample.verdicts, strict=True)
        ]
        expected.append(sum(w * ((1.0 if met else 0.0) - (1 - SP)) / (SE + SP - 1) for w, met in for_each))
    overall = result.keys["overall_score"]
    assert overall.corrected == pytest.approx(min(1.0, max(0.0, sum(expected) / len(expected))), abs=1e-12)
    assert overall.n_samples == len(expected) == 8
    assert overall.ci_lower is not None and overall.ci_upper is not None
    assert overall.ci_lower <= overall.corrected <= overall.ci_upper
    metrics = result.metrics()
    assert metrics["judge_sensitivity:pooled"] == SE and metrics["judge_specificity:pooled"] == SP
    # the demo run's criteria are in categories the meta-eval never measured (or untagged): named
    samples = RunView.open(store, "r").graded_samples()
    criteria = [i for s in samples for i in s.conversation.rubrics]
    assert result.pooled and sum(u.n_criteria for u in result.pooled) == len(criteria)
    assert sum(u.criteria_share for u in result.pooled) == pytest.approx(1.0)
    assert sum(u.points_share for u in result.pooled) == pytest.approx(1.0)
    assert {u.reason for u in result.pooled} <= {"not in the meta-eval", "untagged criteria always use them"}


def test_cli_prints_raw_next_to_corrected_and_writes_the_keys(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    result = runner.invoke(
        app,
        ["results", "r", "--store", str(stored), "--correct-with", "meta", "--metrics-out", str(out)],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (
        "corrected with meta-eval run meta" in said and "pooled sensitivity 0.800, specificity 0.900" in said
    )
    assert "assumed: these run criteria are scored with the pooled rates" in said
    first = corrected_scores(Store(stored), "r", "meta").pooled[0]
    assert f"{first.category}: {first.criteria_share:.1%} of the run's criteria" in said
    written = json.loads(out.read_text())
    assert (
        written["corrected:overall_score"]
        == corrected_scores(Store(stored), "r", "meta").keys["overall_score"].corrected
    )
    assert "overall_score" in written and "corrected:overall_score:ci_upper" in written
    # the provenance of every metrics output, after the corrected keys (written once)
    provenance = RunView.open(Store(stored), "r").provenance()
    assert list(written)[-2:] == ["profile", "grader_template_sha256"]
    assert {k: written[k] for k in provenance} == provenance


def test_another_judge_is_refused_in_one_line(stored: Path, tmp_path: Path) -> None:
    with pytest.raises(
        RunError, match=r"measured another judge .*differs in judge: openai/other-judge vs openai/judge"
    ):
        corrected_scores(Store(stored), "r", "meta-other")
    out = tmp_path / "m.json"
    result = runner.invoke(
        app,
        ["results", "r", "--store", str(stored), "--correct-with", "meta-other", "--metrics-out", str(out)],
    )
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "same judge, settings and grader prompt" in result.stderr and not out.exists()
    swapped = runner.invoke(app, ["results", "r", "--store", str(stored), "--correct-with", "r"])
    assert swapped.exit_code == 1 and "needs a meta-eval run; 'r' is an eval run" in swapped.stderr
