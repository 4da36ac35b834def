"""HealthBench Professional: its schema read into conversations, upstream's defaults, its task tags as
example-level keys, its physician response as a baseline, and one-line errors for mixed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import judged_run_args
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.professional import (
    PROFESSIONAL_GROUP,
    professional_defaults,
    read_conversations,
    resolve_format,
)
from healthbench.errors import DataError

runner = CliRunner()
FIXTURE = "professional_small.jsonl"


def test_tasks_become_conversations_with_task_tags(fixtures_dir: Path) -> None:
    conversations = read_conversations(fixtures_dir / FIXTURE)
    assert [c.prompt_id for c in conversations] == ["pro-001", "pro-002", "pro-003", "pro-004"]
    second = conversations[1]
    assert second.example_tags == [
        "use_case:consult",
        "type:good_faith",
        "difficulty:difficult",
        "specialty:cardiology",
    ]
    assert [m.role for m in second.prompt] == ["user", "assistant", "user"]
    assert (second.rubrics[0].criterion, second.rubrics[0].points, second.rubrics[0].tags) == (
        "Advises continuing the statin perioperatively.",
        7,
        [],
    )
    data = second.ideal_completions_data
    assert data is not None and data["ideal_completions_group"] == PROFESSIONAL_GROUP
    assert data["ideal_completion"].startswith("Continue it.")
    assert conversations[2].ideal_completions_data["ideal_completion"] is None  # type: ignore[index]


def line(**fields: object) -> str:
    task = {
        "id": "t",
        "conversation": {"messages": [{"role": "user", "content": "q"}]},
        "rubric_items": [{"criterion_text": "c", "points": 5}],
        "use_case": "consult",
        "type": "good_faith",
        "difficulty": "typical",
        "specialty": "general",
    }
    task.update(fields)
    return json.dumps(task)


CLASSIC_ROW = json.dumps(
    {
        "prompt": [{"role": "user", "content": "q"}],
        "prompt_id": "c1",
        "rubrics": [{"criterion": "c", "points": 5}],
    }
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            line() + "\n" + CLASSIC_ROW + "\n",
            ":2: a classic HealthBench row in a HealthBench Professional file",
        ),
        (
            CLASSIC_ROW + "\n" + line() + "\n",
            ":2: a HealthBench Professional row in a classic HealthBench file",
        ),
        (line() + "\n" + line() + "\n", ":2 field 'id': duplicate 't' (first seen on line 1)"),
        (line(use_case=None), ":1 field 'use_case': expected a string, got null"),
        (
            line(rubric_items=[{"criterion_text": "c", "points": -3}]),
            ":1 field 'rubric_items': the rubric has no criterion with positive",
        ),
    ],
)
def test_bad_files_name_the_line(write_file, text: str, message: str) -> None:
    path = write_file("x.jsonl", text)
    with pytest.raises(DataError) as caught:
        read_conversations(path)
    assert message in str(caught.value) and len(str(caught.value).splitlines()) == 1


def test_format_is_detected_and_checked(fixtures_dir: Path) -> None:
    assert resolve_format(None, fixtures_dir / FIXTURE) == "professional"
    assert resolve_format(None, fixtures_dir / "small_dataset.jsonl") == "classic"
    assert resolve_format(None, None) == "classic"
    with pytest.raises(DataError, match="--format professional, but the file is in the classic HealthBench"):
        resolve_format("professional", fixtures_dir / "small_dataset.jsonl")
    with pytest.raises(DataError, match="needs --data PATH"):
        resolve_format("professional", None)


def test_data_validate_and_info_accept_professional_files(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / FIXTURE)
    for args in (["data", "validate", path], ["data", "validate", "--format", "professional", path]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() == "ok: 4 records (HealthBench Professional)"
    info = runner.invoke(app, ["data", "info", "--data", path])
    assert info.exit_code == 0, info.output
    said = " ".join(info.stdout.split())
    assert "format: HealthBench Professional" in said and "conversations: 4" in said
    assert "criteria: 13" in said and "use_case:consult │ 2" in said
    wrong = runner.invoke(app, ["data", "validate", "--format", "classic", path])
    assert wrong.exit_code == 1 and len(wrong.stderr.strip().splitlines()) == 1
    assert "--format classic, but the file is in the HealthBench Professional format" in wrong.stderr
    classic = runner.invoke(app, ["data", "validate", str(fixtures_dir / "small_dataset.jsonl")])
    assert classic.exit_code == 0 and "Professional" not in classic.stdout


def test_upstream_defaults_sit_below_the_users_settings() -> None:
    base = {"judge": {"spec": "local/smollm2"}}
    upstream = build_config(base, professional_defaults(judge_given=False))
    assert (upstream.judge.spec, upstream.judge.settings.reasoning_effort) == ("openai/gpt-5.4", "low")
    assert (upstream.scoring.length_center, upstream.scoring.length_penalty) == (2000.0, 0.0147)
    mine = build_config(
        base,
        professional_defaults(judge_given=True),
        {"judge": {"spec": "anthropic/x"}, "scoring": {"length_center": 100, "length_penalty": 0.5}},
    )
    assert (mine.judge.spec, mine.judge.settings.reasoning_effort) == ("anthropic/x", None)
    assert (mine.scoring.length_center, mine.scoring.length_penalty) == (100, 0.5)


def test_default_grader_is_said_in_the_output(fixtures_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["run", "--data", str(fixtures_dir / FIXTURE), "--store", str(tmp_path / "s.db"), "--dry-run"],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "HealthBench Professional: judge openai/gpt-5.4 at low reasoning effort" in said
    assert "center 2000 characters, 0.0147 per 500 characters" in said


def fake_run(url: str, store: Path, data: Path, *extra: str) -> list[str]:
    return judged_run_args(url, store, "--data", str(data), "--n-resamples", "20", *extra)


def test_professional_run_scores_task_tags_and_length_adjusted_by_hand(
    server: str, fixtures_dir: Path, tmp_path: Path
) -> None:
    metrics_path, export = tmp_path / "m.json", tmp_path / "x_allresults.json"
    args = fake_run(
        server, tmp_path / "s.db", fixtures_dir / FIXTURE, "--model", "cand", "--base-url", server
    )
    result = runner.invoke(app, [*args, "--metrics-out", str(metrics_path), "--allresults-out", str(export)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "HealthBench Professional: judge judge at default reasoning effort" in said
    assert all(f"By {name}" in said for name in ("use case", "type", "difficulty", "specialty"))
    assert "overall_score_length_adjusted" in said
    metrics = json.loads(metrics_path.read_text())
    examples = json.loads(export.read_text())["metadata"]["example_level_metadata"]
    scores = {e["prompt_id"]: e["score"] for e in examples}
    lengths = {e["prompt_id"]: len(e["completion"][0]["content"]) for e in examples}
    adjusted = [scores[p] - 0.0147 * (lengths[p] - 2000) / 500 for p in scores]
    assert metrics["overall_score_length_adjusted"] == pytest.approx(
        min(1.0, max(0.0, sum(adjusted) / 4)), abs=1e-12
    )
    assert metrics["use_case:consult"] == pytest.approx(
        min(1.0, max(0.0, (scores["pro-002"] + scores["pro-004"]) / 2)), abs=1e-12
    )
    assert metrics["use_case:consult:n_samples"] == 2
    assert metrics["type:red_teaming"] == pytest.approx(min(1.0, max(0.0, scores["pro-004"])), abs=1e-12)
    for key in ("difficulty:typical", "specialty:oncology", "use_case:writing", "use_case:research"):
        assert key in metrics


def test_physician_response_graded_as_a_baseline(server: str, fixtures_dir: Path, tmp_path: Path) -> None:
    metrics_path = tmp_path / "m.json"
    args = fake_run(server, tmp_path / "s.db", fixtures_dir / FIXTURE, "--completions", "physician")
    result = runner.invoke(app, [*args, "--name", "pros", "--metrics-out", str(metrics_path)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "pros-professional: physician completions of professional" in said
    assert "3 graded of 3 completions from 4 rows; 1 rows of the group have none (skipped)" in said
    metrics = json.loads(metrics_path.read_text())
    assert metrics["n_samples"] == 3 and "overall_score_length_adjusted" in metrics


def test_a_professional_file_named_in_a_config_file_gets_the_upstream_defaults(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(f'data = "{fixtures_dir / FIXTURE}"\n')
    result = runner.invoke(
        app, ["run", "--config", str(config), "--store", str(tmp_path / "s.db"), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "HealthBench Professional: judge openai/gpt-5.4" in " ".join(result.output.split())
