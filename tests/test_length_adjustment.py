"""The length adjustment's flags on `run` and `import`: given together, >= 0, and the key in the outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import one_line_error
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.results.simple_evals import read_allresults

runner = CliRunner()


@pytest.mark.parametrize(
    "flags",
    [("--length-adjustment-center", "2000"), ("--length-adjustment-penalty-per-500-chars", "0.0147")],
)
def test_run_needs_both_length_flags(tmp_path: Path, flags: tuple[str, str]) -> None:
    result = runner.invoke(app, ["run", "--store", str(tmp_path / "s.db"), *flags])
    assert "go together" in one_line_error(result)


def test_negative_length_flags_are_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "run",
            "--store",
            str(tmp_path / "s.db"),
            "--length-adjustment-center",
            "-5",
            "--length-adjustment-penalty-per-500-chars",
            "0.1",
        ],
    )
    assert result.exit_code == 2 and "Invalid value for '--length-adjustment-center'" in result.stderr


def test_import_reports_the_length_adjusted_score_by_hand(tmp_path: Path, fixtures_dir: Path) -> None:
    source = fixtures_dir / "small_allresults.json"
    out = tmp_path / "m.json"
    args = ["import", str(source), "--metrics-out", str(out), "--n-resamples", "0"]
    result = runner.invoke(
        app,
        [*args, "--length-adjustment-center", "100", "--length-adjustment-penalty-per-500-chars", "0.25"],
    )
    assert result.exit_code == 0, result.output
    samples = read_allresults(source)
    written = json.loads(out.read_text())
    by_hand = []
    for s in samples:
        possible = sum(i.points for i in s.conversation.rubrics if i.points > 0)
        met = sum(i.points for i, v in zip(s.conversation.rubrics, s.verdicts, strict=True) if v.criteria_met)
        if all(v.criteria_met is not None for v in s.verdicts):
            by_hand.append(met / possible - 0.25 * (len(s.completion) - 100) / 500)
    mean = min(1.0, max(0.0, sum(by_hand) / len(by_hand)))
    assert written["overall_score_length_adjusted"] == pytest.approx(mean, abs=1e-12)
    assert written["overall_score_length_adjusted:n_samples"] == len(by_hand)
    missing = runner.invoke(app, [*args, "--length-adjustment-center", "100"])
    assert "go together" in one_line_error(missing)
