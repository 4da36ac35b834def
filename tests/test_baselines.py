"""Baselines (`healthbench run --completions physician|references`): simple-evals' row selection on
the shared 527-row fragment, and the stored completions graded through the same engine and scoring."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import judged_run_args, one_line_error
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.analysis.inputs import load_inputs
from healthbench.cli.app import app
from healthbench.cli.run_cmd import suffixed
from healthbench.config import build_config
from healthbench.data.schema import Conversation
from healthbench.data.sources import read_records
from healthbench.errors import ConfigError
from healthbench.grading.template import load_template
from healthbench.runner.baselines import PHYSICIAN, REFERENCES, baseline_rows, find_group
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run
from healthbench.store.db import grades, samples
from healthbench.store.runs import Store
from healthbench.testing.fake_server import fake_verdict, fetch_stats, reset_stats

runner = CliRunner()
SAMPLE = "eval/oss_eval_sample527.jsonl"


def raw_rows(shared: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (shared / SAMPLE).read_text().splitlines() if line.strip()]


def simple_evals_examples(rows: list[dict[str, Any]], group: str, references: bool) -> list[tuple[str, str]]:
    """(prompt_id, completion) as simple-evals' HealthBenchEval builds its physician examples."""
    matching = [
        r
        for r in rows
        if r["ideal_completions_data"] is not None
        and r["ideal_completions_data"]["ideal_completions_group"] == group
    ]
    if references:
        out = [
            (r["prompt_id"], c)
            for r in matching
            for c in r["ideal_completions_data"]["ideal_completions_ref_completions"]
        ]
        assert len(out) == 4 * len(matching)
        return out
    return [(r["prompt_id"], r["ideal_completions_data"]["ideal_completion"]) for r in matching]


@pytest.mark.parametrize(
    ("mode", "group", "expected_rows", "expected_completions"),
    [
        (PHYSICIAN, "Group 1", 153, 153),
        (PHYSICIAN, "Group 2", 154, 154),
        (PHYSICIAN, "Group 3", 147, 147),
        (REFERENCES, "Group 2", 154, 616),
        (REFERENCES, "Group 3", 147, 588),
    ],
)
def test_row_selection_and_counts_equal_simple_evals(
    shared_data: Path, mode: str, group: str, expected_rows: int, expected_completions: int
) -> None:
    conversations = read_records(shared_data / SAMPLE, Conversation)
    selection = baseline_rows(conversations, mode, find_group(group))
    assert (selection.matching, len(selection.rows), selection.skipped) == (
        expected_rows,
        expected_completions,
        0,
    )
    ours = [(row.prompt_id, row.completion) for row in selection.rows]
    assert ours == simple_evals_examples(raw_rows(shared_data), group, mode == REFERENCES)
    assert len({row.item_id for row in selection.rows}) == len(selection.rows)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("X_allresults.json", "X-no_reference_allresults.json"),
        (
            "healthbench_m_20260101_000000_allresults.json",
            "healthbench_m_20260101_000000-no_reference_allresults.json",
        ),
        ("metrics.json", "metrics-no_reference.json"),
    ],
)
def test_per_group_outputs_keep_the_allresults_suffix(name: str, expected: str, tmp_path: Path) -> None:
    assert suffixed(tmp_path / name, "no_reference") == tmp_path / expected
    assert suffixed(tmp_path / name, "") == tmp_path / name


def test_group_names_and_group_without_references() -> None:
    assert find_group("1").name == find_group("no_reference").name == find_group("group 1").name == "Group 1"
    assert find_group("apr_2025_reference").name == "Group 3"
    with pytest.raises(ConfigError, match="unknown physician group 'Group 9'"):
        find_group("Group 9")
    with pytest.raises(ConfigError, match="Group 1 \\(no_reference\\) has no reference completions"):
        baseline_rows([], REFERENCES, find_group("Group 1"))


def test_rows_without_completions_are_skipped_and_counted(make_conversation) -> None:
    with_refs = make_conversation([(5, [])], prompt_id="a").model_copy(
        update={
            "ideal_completions_data": {
                "ideal_completions_group": "Group 2",
                "ideal_completion": "ideal",
                "ideal_completions_ref_completions": ["r0", "r1", "r2", "r3"],
            }
        }
    )
    no_refs = make_conversation([(5, [])], prompt_id="b").model_copy(
        update={"ideal_completions_data": {"ideal_completions_group": "Group 2", "ideal_completion": None}}
    )
    selection = baseline_rows([with_refs, no_refs], REFERENCES, find_group("Group 2"))
    assert [r.item_id for r in selection.rows] == ["a#ref0", "a#ref1", "a#ref2", "a#ref3"]
    assert (selection.matching, selection.skipped) == (2, 1)
    assert baseline_rows([with_refs, no_refs], PHYSICIAN, find_group("2")).skipped == 1


def expected_metrics(rows: list[tuple[Conversation, str]], n_resamples: int) -> dict[str, Any]:
    """The scores of `rows` with the fake judge's verdicts computed here, independently of the store."""
    template = load_template(None)
    samples = []
    for conversation, completion in rows:
        messages = [
            *(m.model_dump() for m in conversation.prompt),
            {"role": "assistant", "content": completion},
        ]
        verdicts = tuple(
            Verdict.of(fake_verdict(template.render(messages, str(item)))) for item in conversation.rubrics
        )
        samples.append(GradedSample(conversation, completion, verdicts))
    return score_run(samples, ScoringOptions(n_resamples=n_resamples)).metrics()


def baseline_args(url: str, store: Path, data: Path, *extra: str) -> list[str]:
    return judged_run_args(url, store, "--data", str(data), "--n-resamples", "50", *extra)


def test_physician_baseline_scores_equal_the_core_on_the_fake_verdicts(
    server: str, shared_data: Path, tmp_path: Path
) -> None:
    data = shared_data / SAMPLE
    metrics_path = tmp_path / "m.json"
    reset_stats(server)
    args = baseline_args(
        server, tmp_path / "s.db", data, "--completions", "physician", "--group", "Group 1", "--name", "phys"
    )
    result = runner.invoke(app, [*args, "--metrics-out", str(metrics_path)])
    assert result.exit_code == 0, result.output
    stats = fetch_stats(server)
    assert stats["candidate"] == 0 and stats["judge"] == 1948  # every criterion of the 153 rows, no sampling
    conversations = read_records(data, Conversation)
    rows = [
        (row.conversation, row.completion)
        for row in baseline_rows(conversations, PHYSICIAN, find_group("1")).rows
    ]
    written = json.loads(metrics_path.read_text())
    expected = expected_metrics(rows, 50)
    for key in ("overall_score", "overall_score:n_samples", "n_samples", "theme:emergency_referrals"):
        assert written[key] == pytest.approx(expected[key], abs=1e-12), key
    assert written["n_samples"] == 153
    assert "153 graded of 153 completions from 153 rows; 0 rows of the group have none" in " ".join(
        result.output.split()
    )
    # the same command again continues the same run: no call; its dry run has nothing left to do
    reset_stats(server)
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    by_short_name = [*args[:-4], "--group", "no_reference", "--name", "phys"]  # the same group
    assert runner.invoke(app, by_short_name).exit_code == 0
    resumed = runner.invoke(app, ["run", "--resume", "phys", "--store", str(tmp_path / "s.db")])
    assert resumed.exit_code == 0, resumed.output
    assert "overall_score" in resumed.output
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert fetch_stats(server)["requests"] == 0
    assert "dry run of phys: 153 completions" in " ".join(dry.output.split())
    # (the judge's model name may wrap in the 80-column test terminal: its first part is matched)
    assert re.search(r"│ judge +│ openai\S* +│ +0 │", dry.output), dry.output


def test_dry_run_counts_every_criterion_of_the_group(server: str, shared_data: Path, tmp_path: Path) -> None:
    args = baseline_args(server, tmp_path / "s.db", shared_data / SAMPLE, "--completions", "physician")
    reset_stats(server)
    result = runner.invoke(app, [*args, "--name", "p", "--dry-run"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    for run, calls in (
        ("p-no_reference", "1,948"),
        ("p-aug_2024_reference", "1,932"),
        ("p-apr_2025_reference", "1,853"),
    ):
        assert f"dry run of {run}" in said
        assert re.search(rf"│ judge │ openai\S* │ {calls} │", said), said
    assert fetch_stats(server)["requests"] == 0


def test_reference_baselines_one_run_per_group_with_limit(
    server: str, shared_data: Path, tmp_path: Path
) -> None:
    data = shared_data / SAMPLE
    metrics_path = tmp_path / "refs.json"
    store = tmp_path / "s.db"
    args = baseline_args(server, store, data, "--completions", "references", "--limit", "6", "--name", "refs")
    export = tmp_path / "exports" / "healthbench_refs_20260101_000000_allresults.json"
    export.parent.mkdir()
    result = runner.invoke(app, [*args, "--metrics-out", str(metrics_path), "--allresults-out", str(export)])
    assert result.exit_code == 0, result.output
    # the exports end in _allresults.json, so `analyze DIR` picks both up
    loaded = load_inputs([export.parent])
    assert sorted(r.run_id for r in loaded) == [
        "20260101_000000-apr_2025_reference",
        "20260101_000000-aug_2024_reference",
    ]
    conversations = read_records(data, Conversation)
    for short, group in (("aug_2024_reference", "Group 2"), ("apr_2025_reference", "Group 3")):
        rows = baseline_rows(conversations, REFERENCES, find_group(group)).rows
        chosen = random.Random(0).sample(rows, 6)  # simple-evals: the limit samples the expanded list
        written = json.loads((tmp_path / f"refs-{short}.json").read_text())
        expected = expected_metrics([(r.conversation, r.completion) for r in chosen], 50)
        assert written["n_samples"] == 6
        assert written["overall_score"] == pytest.approx(expected["overall_score"], abs=1e-12)
        total = len(rows)
        assert f"refs-{short}: references completions of {group} ({short}): 6 graded of {total}" in " ".join(
            result.output.split()
        )
    runs = {run.name: run for run in Store(store).list_runs()}
    assert sorted(runs) == ["refs-apr_2025_reference", "refs-aug_2024_reference"]
    assert runs["refs-apr_2025_reference"].config["dataset"]["group"] == "Group 3"
    assert runs["refs-apr_2025_reference"].config["run"]["model"] is None


def test_bad_baseline_requests_are_one_line_errors(server: str, tmp_path: Path, fixtures_dir: Path) -> None:
    data = fixtures_dir / "small_dataset.jsonl"  # rows without ideal_completions_data
    store = tmp_path / "s.db"
    missing = runner.invoke(app, baseline_args(server, store, data, "--completions", "physician"))
    assert "no row of the dataset has physician completions" in one_line_error(missing)
    group = runner.invoke(
        app, baseline_args(server, store, data, "--completions", "physician", "--group", "2")
    )
    assert "no row has physician completions for Group 2" in one_line_error(group)
    with_model = runner.invoke(
        app, baseline_args(server, store, data, "--completions", "physician", "--model", "cand")
    )
    assert "no --model" in one_line_error(with_model)
    # the rule is build_config's, so a config file, the Python API and a service job meet it too
    for model in ({"spec": "openai/x"}, {"base_url": "http://m"}):
        with pytest.raises(ConfigError, match="no --model or --base-url"):
            build_config({"completions": "physician", "model": model})
    assert build_config({"completions": "physician"}).completions == "physician"
    refs = runner.invoke(
        app, baseline_args(server, store, data, "--completions", "references", "--group", "1")
    )
    assert "has no reference completions" in one_line_error(refs)


def test_a_baseline_run_stopped_before_its_completions_were_stored_continues(
    server: str, shared_data: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    args = baseline_args(
        server, db, shared_data / SAMPLE, "--completions", "physician", "--group", "3", "--limit", "4"
    )
    assert runner.invoke(app, [*args, "--name", "b"]).exit_code == 0
    store = Store(db)
    run = store.require_run("b")
    with store.engine.begin() as conn:  # as if killed between creating the run and storing its samples
        conn.execute(samples.delete().where(samples.c.run_id == run.id))
        conn.execute(grades.delete().where(grades.c.run_id == run.id))
    again = runner.invoke(app, [*args, "--name", "b", "--metrics-out", str(tmp_path / "m.json")])
    assert again.exit_code == 0, again.output
    assert json.loads((tmp_path / "m.json").read_text())["overall_score:n_samples"] == 4
