"""What the CLI used to compute itself, now library functions: the import join and its checks,
``--labels`` scoring, and dry-run totals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import join_datasets, read_records
from healthbench.errors import DataError
from healthbench.results.meta_results import score_label_file
from healthbench.results.rescore import agreement, rescore_allresults
from healthbench.runner.estimate import RoleEstimate, total_cost
from healthbench.scoring.meta import meta_metrics
from healthbench.scoring.run_score import ScoringOptions


def test_rescore_with_the_dataset_reproduces_every_number(fixtures_dir: Path) -> None:
    rescored = rescore_allresults(
        fixtures_dir / "small_allresults.json",
        data=[fixtures_dir / "small_dataset.jsonl"],
        options=ScoringOptions(n_resamples=0),
    )
    assert (rescored.agreement.equal, rescored.agreement.compared) == (23, 23)
    assert rescored.agreement.same_score and rescored.untagged == 0 and rescored.joined
    assert rescored.run_score.score == rescored.score


def test_rescore_without_a_dataset_counts_the_untagged_examples(fixtures_dir: Path) -> None:
    rescored = rescore_allresults(
        fixtures_dir / "small_allresults.json", options=ScoringOptions(n_resamples=0)
    )
    assert (rescored.agreement.equal, rescored.agreement.compared) == (15, 23)
    assert rescored.untagged == len(rescored.samples) and not rescored.joined


def test_join_refuses_a_prompt_id_with_two_rubrics(fixtures_dir: Path, tmp_path: Path) -> None:
    line = json.loads((fixtures_dir / "small_dataset.jsonl").read_text().splitlines()[0])
    line["rubrics"][0]["points"] = 1
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(line) + "\n")
    assert join_datasets([], None) is None
    with pytest.raises(DataError, match=f"prompt_id {line['prompt_id']} has a different rubric"):
        join_datasets([fixtures_dir / "small_dataset.jsonl", other], None)


def test_agreement_ignores_bootstrap_std_and_compares_the_score() -> None:
    stored = {"a": 0.5, "a:bootstrap_std": 0.1, "a:n_samples": 3, "b": 0.25}
    ours = {"a": 0.5, "a:bootstrap_std": 0.2, "a:n_samples": 3, "b": 0.3, "score": 0.5}
    got = agreement(0.5, stored, ours)
    assert (got.equal, got.compared, got.same_score) == (2, 3, True)
    assert not agreement(0.4, stored, ours).same_score


def test_label_file_scores_as_the_core_does(fixtures_dir: Path, tmp_path: Path) -> None:
    data = fixtures_dir / "meta_eval_small.jsonl"
    records = read_records(data, MetaEvalRecord)
    labels = [i % 3 != 0 for i in range(len(records))]
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "".join(
            json.dumps({"completion_id": r.completion_id, "rubric": r.rubric, "criteria_met": label}) + "\n"
            for r, label in zip(records, labels, strict=True)
        )
    )
    got = score_label_file(path, "meta_eval", data=data)
    assert got.metrics == meta_metrics(records, labels).metrics


def test_dry_run_total_is_unknown_when_a_model_has_no_price() -> None:
    rows = [RoleEstimate("candidate", "a", 1, 10, 5, 0.25), RoleEstimate("judge", "b", 2, 20, 4, 0.5)]
    assert total_cost(rows) == 0.75
    assert total_cost([*rows, RoleEstimate("judge", "c", 1, 1, 1, None)]) is None
    assert total_cost([]) == 0.0
