"""`healthbench import --store`: an imported simple-evals run is kept like any other run."""

from __future__ import annotations

import json
from pathlib import Path

from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers every command on the app)
from healthbench.cli.app import app
from healthbench.data.sources import load_conversations
from healthbench.results.run_results import graded_samples
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, score_run
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats

runner = CliRunner()


def demo_allresults(tmp_path: Path) -> tuple[Path, list[GradedSample]]:
    _, conversations = load_conversations("demo")
    samples = [
        GradedSample(
            conversation=c,
            completion=f"answer {i}",
            verdicts=tuple(Verdict.of(j % 3 != 0) for j in range(len(c.rubrics))),
        )
        for i, c in enumerate(conversations)
    ]
    return write_allresults(tmp_path / "demo_allresults.json", samples, score_run(samples)), samples


def test_imported_run_is_stored_then_shown_and_regraded(tmp_path: Path) -> None:
    file, samples = demo_allresults(tmp_path)
    db = tmp_path / "s.db"
    imported = runner.invoke(
        app, ["import", str(file), "--dataset", "demo", "--store", str(db), "--name", "imp"]
    )
    assert imported.exit_code == 0, imported.stderr
    assert "stored as run imp" in imported.stdout
    store = Store(db)
    run = store.require_run("imp")
    assert run.status == "finished"
    stored = graded_samples(store, run)
    assert [(s.conversation.prompt_id, s.completion, s.verdicts) for s in stored] == [
        (s.conversation.prompt_id, s.completion, s.verdicts) for s in samples
    ]
    metrics = tmp_path / "m.json"
    shown = runner.invoke(app, ["results", "imp", "--store", str(db), "--metrics-out", str(metrics)])
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(metrics.read_text())["overall_score"] == score_run(samples).metrics()["overall_score"]
    with fake_server_process() as url:
        regraded = runner.invoke(
            app, ["regrade", "imp", "--judge", "judge", "--judge-base-url", url, "--store", str(db)]
        )
        stats = fetch_stats(url)
    assert regraded.exit_code == 0, regraded.stderr
    assert stats["candidate"] == 0  # the imported answers are graded again, never re-sampled
    assert stats["judge"] == sum(len(s.conversation.rubrics) for s in samples)


def test_name_without_store_is_refused(tmp_path: Path) -> None:
    file, _ = demo_allresults(tmp_path)
    result = runner.invoke(app, ["import", str(file), "--dataset", "demo", "--name", "x"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: --name names the run kept with --store; give --store too"
    ]
