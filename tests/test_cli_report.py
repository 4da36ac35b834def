"""`healthbench report` through the CLI: files written, exact numbers, no secret, one-line errors."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app

runner = CliRunner()
SECRET = "sk-test-DO-NOT-LEAK-0123456789"


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env)
    return result.exit_code, result.stdout, result.stderr


def embedded(html: str) -> tuple[dict, str]:
    """The summary JSON and the decompressed conversation JSON text of a report."""
    summary = re.search(r'id="report-summary">(.*?)</script>', html, re.S)
    convs = re.search(r'id="report-conversations"[^>]*>(.*?)</script>', html, re.S)
    assert summary and convs
    return json.loads(summary.group(1)), gzip.decompress(base64.b64decode(convs.group(1))).decode()


def test_report_of_an_allresults_file_with_figures(fixtures_dir: Path, tmp_path: Path) -> None:
    out, figures = tmp_path / "out" / "report.html", tmp_path / "figs"
    code, stdout, stderr = invoke(
        "report", fixtures_dir / "small_allresults.json", "--data", fixtures_dir / "small_dataset.jsonl",
        "-o", out, "--figures", figures, "--n-resamples", "50", "--title", "Small",
    )  # fmt: skip
    assert code == 0, stderr
    assert f"report: {out}" in stdout and "1 runs, 2 answers" in stdout
    summary, _ = embedded(out.read_text(encoding="utf-8"))
    assert summary["title"] == "Small"
    # the same numbers `healthbench import` checks: fixture-a 5/10, fixture-b 10/15
    assert summary["runs"][0]["overall"]["mean"] == (0.5 + 10 / 15) / 2
    assert summary["runs"][0]["themes"]["hedging"]["mean"] == 10 / 15
    assert summary["runs"][0]["model"] == "small"
    assert sorted(p.name for p in figures.iterdir()) == [
        "axes.png", "axes.svg", "scores.png", "scores.svg", "themes.png", "themes.svg"
    ]  # fmt: skip
    assert stdout.count("figure: ") == 6


def test_report_of_a_stored_run_holds_no_secret(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    env = {"OPENAI_API_KEY": SECRET}
    with fake_server_process() as url:
        code, _, stderr = invoke(
            "run", "--model", "cand", "--base-url", url, "--judge", "judge", "--judge-base-url", url,
            "--store", store, "--name", "stored", "--limit", "3", "--n-resamples", "20", env=env,
        )  # fmt: skip
    assert code == 0, stderr
    out = tmp_path / "stored.html"
    code, _, stderr = invoke("report", "stored", "--store", store, "-o", out, env=env)
    assert code == 0, stderr
    html = out.read_text(encoding="utf-8")
    summary, conversations = embedded(html)
    assert SECRET not in html and SECRET not in conversations
    assert summary["runs"][0]["run_id"] == "stored" and summary["runs"][0]["n_samples"] == 3


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("bad_allresults.json", "bad_allresults.json"), ("missing.json", "missing_allresults.json")],
)
def test_bad_input_is_one_line(fixtures_dir: Path, tmp_path: Path, name: str, fragment: str) -> None:
    out = tmp_path / "r.html"
    path = fixtures_dir / name if name != "missing.json" else tmp_path / "missing_allresults.json"
    code, _, stderr = invoke("report", path, "-o", out, "--store", tmp_path / "empty.db")
    assert code == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr
    assert fragment in lines[0]
    assert not out.exists()


def test_two_runs_get_a_paired_comparison(fixtures_dir: Path, tmp_path: Path) -> None:
    source = (fixtures_dir / "small_allresults.json").read_bytes()
    files = [tmp_path / f"healthbench_{m}_20260101_000000_allresults.json" for m in ("m1", "m2")]
    for file in files:
        file.write_bytes(source)
    out = tmp_path / "r.html"
    code, stdout, stderr = invoke(
        "report", *files, "--data", fixtures_dir / "small_dataset.jsonl", "-o", out, "--n-resamples", "50"
    )
    assert code == 0, stderr
    assert "warning: only 2 paired conversations: the CIs are rough" in stdout
    summary, _ = embedded(out.read_text(encoding="utf-8"))
    comparison = summary["comparison"]
    assert (comparison["a"], comparison["b"]) == ("m1/20260101_000000", "m2/20260101_000000")
    assert comparison["rows"][0]["diff"] == 0.0 and comparison["n_pairs"] == 2
