"""`healthbench data ...` and `healthbench import` through typer's CliRunner."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers every command on the app)
from healthbench.cli.app import app
from healthbench.data.sources import OFFICIAL_URLS, load_conversations
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run

runner = CliRunner()


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_import_writes_metrics_with_the_exact_overall_score(fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "metrics.json"
    code, stdout, stderr = invoke(
        "import", fixtures_dir / "small_allresults.json", "--data", fixtures_dir / "small_dataset.jsonl",
        "--metrics-out", out, "--n-resamples", "50",
    )  # fmt: skip
    assert code == 0, stderr
    metrics = json.loads(out.read_text())
    # fixture-a: 5 met of 10 possible = 0.5; fixture-b: (4 + 6) met of (4 + 6 + 5) possible = 10/15
    assert metrics["overall_score"] == (0.5 + 10 / 15) / 2
    assert metrics["theme:emergency_referrals"] == 0.5 and metrics["theme:hedging"] == 10 / 15
    assert metrics["axis:context_awareness"] == 6 / 11  # 6 met of 6 + 5
    assert metrics["overall_score:n_samples"] == 2 and metrics["ungraded_criteria"] == 0
    assert "agreement with the file: 23/23 means and n_samples equal, top-level score equal" in stdout
    assert f"metrics: {out}" in stdout


def test_import_without_a_dataset_says_what_is_missing(fixtures_dir: Path) -> None:
    code, stdout, _ = invoke("import", fixtures_dir / "small_allresults.json", "--n-resamples", "0")
    assert code == 0
    assert "2 of 2 examples have no dataset entry" in stdout
    # 12 metrics: 11 means (score's is the top-level value) + 12 n_samples; 4 of them are example tags
    assert "agreement with the file: 15/23 means and n_samples equal" in stdout


def test_import_export_round_trips(fixtures_dir: Path, tmp_path: Path) -> None:
    export = tmp_path / "again_allresults.json"
    dataset = fixtures_dir / "small_dataset.jsonl"
    code, _, stderr = invoke(
        "import", fixtures_dir / "small_allresults.json", "--data", dataset, "--export", export
    )
    assert code == 0, stderr
    original = json.loads((fixtures_dir / "small_allresults.json").read_text())
    exported = json.loads(export.read_text())
    assert exported["score"] == original["score"] and exported["htmls"] == []
    assert exported["convos"] == original["convos"]
    code, stdout, _ = invoke("import", export, "--data", dataset, "--n-resamples", "0")
    assert code == 0 and "23/23 means and n_samples equal" in stdout


def test_import_joins_a_dataset_variant(tmp_path: Path) -> None:
    _, conversations = load_conversations("demo")
    samples = [
        GradedSample(
            conversation=c,
            completion=f"answer {i}",
            verdicts=tuple(Verdict.of(j % 2 == 0) for j in range(len(c.rubrics))),
        )
        for i, c in enumerate(conversations)
    ]
    expected = score_run(samples, ScoringOptions(n_resamples=30, seed=4)).metrics()
    run_file = write_allresults(tmp_path / "demo_allresults.json", samples, score_run(samples))
    out = tmp_path / "metrics.json"
    code, _, stderr = invoke(
        "import", run_file, "--dataset", "demo", "--metrics-out", out, "--n-resamples", "30", "--seed", "4"
    )
    assert code == 0, stderr
    assert json.loads(out.read_text()) == json.loads(json.dumps(expected))


def test_import_of_a_malformed_file_is_one_line(fixtures_dir: Path) -> None:
    code, _, stderr = invoke("import", fixtures_dir / "bad_allresults.json")
    assert_one_line_error(
        code, stderr, "bad_allresults.json",
        "field 'metadata.example_level_metadata[1].rubric_items[0].criteria_met'",
        "expected true, false or null, got a string",
    )  # fmt: skip


def test_import_of_a_missing_file_is_one_line(tmp_path: Path) -> None:
    code, _, stderr = invoke("import", tmp_path / "nope_allresults.json")
    assert_one_line_error(code, stderr, "nope_allresults.json", "No such file")


def test_import_refuses_an_incomplete_join(fixtures_dir: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial.jsonl"
    partial.write_text((fixtures_dir / "small_dataset.jsonl").read_text().splitlines()[0] + "\n")
    code, _, stderr = invoke("import", fixtures_dir / "small_allresults.json", "--data", partial)
    assert_one_line_error(
        code, stderr, "1 prompt_id(s) are not in the dataset given (fixture-b)", "--allow-untagged"
    )
    code, stdout, _ = invoke(
        "import", fixtures_dir / "small_allresults.json", "--data", partial, "--allow-untagged"
    )
    assert code == 0 and "1 of 2 examples have no dataset entry" in stdout


def test_validate_names_the_bad_line(fixtures_dir: Path) -> None:
    code, _, stderr = invoke("data", "validate", fixtures_dir / "bad_points.jsonl")
    assert_one_line_error(
        code, stderr, "bad_points.jsonl:2 field 'rubrics.0.points'", "expected a number, got a string"
    )


def test_validate_ok(fixtures_dir: Path) -> None:
    code, stdout, _ = invoke("data", "validate", fixtures_dir / "small_dataset.jsonl")
    assert (code, stdout.strip()) == (0, "ok: 2 records")


def test_validate_meta_eval(tmp_path: Path) -> None:
    demo_meta = Path(str(load_conversations("demo")[0].path)).with_name("demo_meta_eval.jsonl")
    code, stdout, _ = invoke("data", "validate", demo_meta, "--meta-eval")
    assert (code, stdout.strip()) == (0, "ok: 24 records (meta-eval)")
    code, stdout, _ = invoke("data", "validate", demo_meta)  # detected as `data info` detects it
    assert (code, stdout.strip()) == (0, "ok: 24 records (meta-eval)")
    code, _, stderr = invoke("data", "validate", demo_meta, "--format", "classic")  # as asked
    assert_one_line_error(code, stderr, "demo_meta_eval.jsonl:1 field 'rubrics': missing field")


def test_info_on_a_local_file(fixtures_dir: Path) -> None:
    path = fixtures_dir / "small_dataset.jsonl"
    code, stdout, _ = invoke("data", "info", "--data", path)
    assert code == 0
    assert f"sha256: {hashlib.sha256(path.read_bytes()).hexdigest()}" in stdout
    assert "conversations: 2" in stdout and "criteria: 7" in stdout
    assert "emergency_referrals" in stdout and "hedging" in stdout


def test_info_on_the_demo_meta_eval() -> None:
    code, stdout, _ = invoke("data", "info", "demo_meta_eval")
    assert code == 0 and "rows: 24" in stdout and "source: demo" in stdout


def test_info_without_arguments_lists_variants(tmp_path: Path) -> None:
    code, stdout, _ = invoke("data", "info", "--cache-dir", tmp_path)
    assert code == 0
    for variant in [*OFFICIAL_URLS, "demo", "demo_meta_eval"]:
        assert variant in stdout


def test_download_uses_the_cache_without_network(fixtures_dir: Path, tmp_path: Path) -> None:
    cached = tmp_path / OFFICIAL_URLS["hard"].rsplit("/", 1)[1]
    shutil.copy(fixtures_dir / "small_dataset.jsonl", cached)
    code, stdout, stderr = invoke("data", "download", "hard", "--cache-dir", tmp_path)
    assert code == 0, stderr
    assert f"hard: {cached}" in stdout and "records: 2" in stdout
    assert f"sha256: {hashlib.sha256(cached.read_bytes()).hexdigest()}" in stdout


def test_download_of_an_unknown_variant_is_one_line() -> None:
    code, _, stderr = invoke("data", "download", "everything")
    assert_one_line_error(code, stderr, "unknown dataset variant 'everything'")


@pytest.mark.parametrize(
    "command",
    [["data"], ["data", "download"], ["data", "info"], ["data", "validate"], ["import"]],
)
def test_every_command_has_help(command: list[str]) -> None:
    code, stdout, _ = invoke(*command, "--help")
    assert code == 0 and "Usage:" in stdout and len(stdout.splitlines()) > 3
