"""Inspect logs and MLflow runs of a stored run, read back with inspect_ai and MLflow themselves.

One small run against the fake server (3 demo conversations x 2 repeats), then one grade turned
ungraded and one sample failed in its store, so that every path of the exports shows. Everything is
offline: the MLflow tracking store is a sqlite file in the test's folder (telemetry off).
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from helpers import judged_run_args, one_line_error
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.errors import ConfigError
from healthbench.models.tally import CallTally
from healthbench.results.mlflow_log import MLFLOW_INSTALL_HINT, mlflow_metric_name, mlflow_metrics
from healthbench.results.views import VERDICT_NAMES, RunView
from healthbench.scoring.rubric import OVERALL
from healthbench.store import Store

RUN = "exp"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No telemetry, no MLflow settings from outside, and the test's own folder as the current
    directory (MLflow puts a sqlite store's artifacts in ./mlruns)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)


@pytest.fixture(scope="module")
def run_store(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run whose store then gets one ungraded criterion and one failed sample."""
    path = tmp_path_factory.mktemp("exports") / "runs.db"
    args = judged_run_args(server, path, "--model", "cand", "--base-url", server)
    result = runner.invoke(app, [*args, "--name", RUN, "--limit", "3", "--n-repeats", "2"])
    assert result.exit_code == 0, result.output
    store = Store(path)
    view = RunView.open(store, RUN)
    first, second = list(view.iter_samples())[:2]
    run_id = view.record.id
    store.close()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE grades SET status = 'ungraded', explanation = NULL "
            "WHERE run_id = ? AND item_id = ? AND repeat = 0 AND criterion = 0",
            (run_id, first.item_id),
        )
        db.execute(
            "UPDATE samples SET completion = NULL, error = 'HTTP 500' "
            "WHERE run_id = ? AND item_id = ? AND repeat = 0",
            (run_id, second.item_id),
        )
    return path


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the module's one MLflow tracking store (creating one takes seconds)."""
    return tmp_path_factory.mktemp("tracking")


def results(store: Path, *flags: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, ["results", RUN, "--store", str(store), *flags], env=env)


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_log_reads_back_with_inspect_ai(run_store: Path, tmp_path: Path, suffix: str) -> None:
    from inspect_ai.log import read_eval_log

    log_path, metrics_path = tmp_path / f"run{suffix}", tmp_path / "m.json"
    result = results(run_store, "--inspect-log-out", str(log_path), "--metrics-out", str(metrics_path))
    assert result.exit_code == 0, result.output
    assert f"Inspect log written to {log_path}" in result.output
    log = read_eval_log(str(log_path))
    store = Store(run_store)
    view = RunView.open(store, RUN)
    stored = list(view.iter_samples())
    score = view.score()
    assert log.samples is not None and len(log.samples) == len(stored) == view.n_rows() == 6
    assert log.eval.model == "cand" and log.eval.config.epochs == 2 and log.status == "success"
    assert log.eval.model_roles is not None and log.eval.model_roles["judge"].model == "judge"
    assert log.eval.metadata is not None and log.eval.metadata["grader_template_sha256"] == (
        view.grader_template_sha256
    )
    by_key = {(s.id, s.epoch): s for s in log.samples}
    for row, values in zip(stored, score.per_sample, strict=True):
        sample = by_key[(row.item_id, row.graded.repeat + 1)]
        assert sample.scores is not None
        got = sample.scores["healthbench"]
        if values is None:  # left out as ungraded: Inspect's "unscored"
            assert isinstance(got.value, float) and math.isnan(got.value)
        else:
            assert got.value == values[OVERALL]
        criteria = got.metadata["criteria"] if got.metadata else []
        assert [c["verdict"] for c in criteria] == [VERDICT_NAMES[v] for v in row.graded.verdicts]
        assert [c["explanation"] for c in criteria] == list(row.graded.explanations)
        assert [c["criterion"] for c in criteria] == [r.criterion for r in row.graded.conversation.rubrics]
        answered = row.sample is not None and row.sample.error is None
        assert (sample.error is None) == answered
        assert sample.output.completion == (row.graded.completion if answered else "")
        assert sample.input[-1].text == row.graded.conversation.prompt[-1].content
    ungraded = [s for s in log.samples if math.isnan(float(s.scores["healthbench"].value))]  # type: ignore[index, arg-type]
    assert len(ungraded) == score.ungraded_samples == 2
    failed = [s for s in log.samples if s.error is not None]
    assert len(failed) == 1 and failed[0].error is not None and failed[0].error.message == "HTTP 500"
    # the log's results are the --metrics-out document's numbers
    metrics = json.loads(metrics_path.read_text())
    assert log.results is not None
    (healthbench_score,) = log.results.scores
    shown = {key: metric.value for key, metric in healthbench_score.metrics.items()}
    assert shown == {k: v for k, v in metrics.items() if isinstance(v, int | float) and v is not None}
    assert shown[OVERALL] == score.metrics()[OVERALL]
    assert healthbench_score.unscored_samples == 2 and log.results.metadata == {"metrics": metrics}
    # usage: the run's totals per role, and each answer's judge calls
    totals = view.usage_totals()
    assert log.stats.role_usage["judge"].input_tokens == totals.judge.input_tokens > 0
    assert log.stats.role_usage["candidate"].output_tokens == totals.candidate.output_tokens > 0
    for row in stored:
        judge = CallTally()
        grades = store.load_grades(view.record.id, item_ids=[row.item_id], repeat=row.graded.repeat)
        for grade in grades.values():
            judge.count(grade.usage, grade.cost)
        usage = by_key[(row.item_id, row.graded.repeat + 1)].role_usage["judge"]
        assert (usage.input_tokens, usage.output_tokens) == (judge.input_tokens, judge.output_tokens)
    store.close()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.shared
def test_a_reference_baseline_keeps_one_sample_per_graded_completion(
    server: str, shared_data: Path, tmp_path: Path
) -> None:
    """Reference completions share their prompt_id: each is its own sample (id = the item id)."""
    from inspect_ai.log import read_eval_log

    store, data = tmp_path / "s.db", shared_data / "eval/oss_eval_sample527.jsonl"
    args = judged_run_args(server, store, "--data", str(data), "--completions", "references")
    result = runner.invoke(
        app, [*args, "--group", "2", "--limit", "8", "--name", "refs", "--n-resamples", "50"]
    )
    assert result.exit_code == 0, result.output
    log_path = tmp_path / "refs.eval"
    result = runner.invoke(
        app, ["results", "refs", "--store", str(store), "--inspect-log-out", str(log_path)]
    )
    assert result.exit_code == 0, result.output
    log = read_eval_log(str(log_path))
    assert log.eval.model == "none/none" and log.samples is not None and len(log.samples) == 8
    s = Store(store)
    view = RunView.open(s, "refs")
    ids = sorted(str(sample.id) for sample in log.samples)
    assert ids == sorted(row.item_id for row in view.iter_samples()) and len(set(ids)) == 8
    assert all("#ref" in str(sample.id) for sample in log.samples)
    s.close()


def test_mlflow_run_reads_back_with_mlflows_client(
    run_store: Path, tracking: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tracking)  # MLflow's default tracking store is ./mlflow.db
    metrics_path, allresults_path = tmp_path / "m.json", tmp_path / "a_allresults.json"
    outputs = ("--metrics-out", str(metrics_path), "--allresults-out", str(allresults_path))
    result = results(run_store, "--mlflow", *outputs)
    assert result.exit_code == 0, result.output
    assert (tracking / "mlflow.db").is_file()
    line = next(line for line in result.output.splitlines() if line.startswith("logged to MLflow"))
    uri = f"sqlite:///{tracking / 'mlflow.db'}"
    assert line.endswith(f"in experiment 'healthbench' at {uri}")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("healthbench")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.run_id in line and logged.info.status == "FINISHED"
    assert logged.info.run_name == RUN
    store = Store(run_store)
    view = RunView.open(store, RUN)
    assert logged.data.params == {
        "model": "cand",
        "judge": "judge",
        "dataset": "demo",
        "dataset_sha256": view.dataset["sha256"],
        "profile": "none",
        "grader_template_sha256": view.grader_template_sha256,
        "repeats": "2",
        "seed": "0",
        "n_resamples": "1000",
    }
    store.close()
    metrics = json.loads(metrics_path.read_text())
    assert logged.data.metrics == mlflow_metrics(metrics)
    assert logged.data.metrics["overall_score"] == metrics["overall_score"]
    assert logged.data.metrics["axis.accuracy.ci_lower"] == metrics["axis:accuracy:ci_lower"]
    names = sorted(a.path for a in client.list_artifacts(logged.info.run_id))
    assert names == [f"{RUN}_allresults.json", "metrics.json", "report.html"]
    folder = Path(client.download_artifacts(logged.info.run_id, "", str(tmp_path / "down")))
    assert (folder / "metrics.json").read_bytes() == metrics_path.read_bytes()
    assert (folder / f"{RUN}_allresults.json").read_bytes() == allresults_path.read_bytes()
    report = (folder / "report.html").read_text()
    assert report.startswith("<!doctype html>") and f"<title>HealthBench run {RUN}</title>" in report
    # a second export is a second MLflow run, in the experiment $MLFLOW_EXPERIMENT_NAME names
    again = results(run_store, "--mlflow", env={"MLFLOW_EXPERIMENT_NAME": "other"})
    assert again.exit_code == 0, again.output
    other = client.get_experiment_by_name("other")
    assert other is not None and len(client.search_runs([other.experiment_id])) == 1


def test_run_with_mlflow_logs_the_new_run(server: str, tracking: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tracking / 'mlflow.db'}"
    args = judged_run_args(server, tmp_path / "s.db", "--model", "cand", "--base-url", server)
    env = {"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": "fresh-runs"}
    result = runner.invoke(app, [*args, "--name", "fresh", "--limit", "2", "--mlflow"], env=env)
    assert result.exit_code == 0, result.output
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("fresh-runs")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.run_name == "fresh" and logged.data.params["model"] == "cand"
    assert logged.data.metrics["overall_score.n_samples"] == 2
    regrade = [
        "regrade", "fresh", "--judge", "judge", "--judge-base-url", server, "--judge-temperature", "0.3",
        "--store", str(tmp_path / "s.db"), "--name", "again", "--mlflow",
    ]  # fmt: skip
    result = runner.invoke(app, regrade, env=env)
    assert result.exit_code == 0, result.output
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == ["again", "fresh"]
    assert runs["again"].data.metrics["overall_score.n_samples"] == 2


def test_without_the_extras_the_flags_are_one_line_errors_and_nothing_runs(
    server: str, run_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    store = tmp_path / "s.db"
    args = judged_run_args(server, store, "--model", "cand", "--base-url", server)
    result = runner.invoke(app, [*args, "--name", "never", "--limit", "1", "--mlflow"])
    assert one_line_error(result) == f"error: {MLFLOW_INSTALL_HINT}"
    assert not store.exists()  # refused before the run started
    assert one_line_error(results(run_store, "--mlflow")) == f"error: {MLFLOW_INSTALL_HINT}"
    out = tmp_path / "x.eval"
    error = one_line_error(results(run_store, "--inspect-log-out", str(out)))
    assert error == "error: --inspect-log-out needs inspect-ai: pip install 'healthbench[inspect]'"
    assert not out.exists()


def test_an_unreachable_tracking_store_is_one_line(run_store: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    uri = f"sqlite:///{blocker / 'mlflow.db'}"  # a folder that is a file
    result = results(run_store, "--mlflow", env={"MLFLOW_TRACKING_URI": uri})
    assert one_line_error(result).startswith(f"error: MLflow at {uri}: ")


def test_the_file_store_takes_every_metric(
    run_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MLFLOW_TRACKING_URI=./mlruns``: a metric ``overall_score`` beside ``overall_score.n_samples``
    (with ``/`` the second would need the first to be a folder: the run failed with ENOTDIR)."""
    from mlflow.tracking import MlflowClient

    metrics_path = tmp_path / "m.json"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    env = {"MLFLOW_TRACKING_URI": "./mlruns"}
    result = results(run_store, "--mlflow", "--metrics-out", str(metrics_path), env=env)
    assert result.exit_code == 0, result.output
    client = MlflowClient(tracking_uri=str(tmp_path / "mlruns"))
    experiment = client.get_experiment_by_name("healthbench")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.status == "FINISHED"
    metrics = json.loads(metrics_path.read_text())
    assert logged.data.metrics == mlflow_metrics(metrics)
    assert logged.data.metrics["overall_score"] == metrics["overall_score"]
    assert logged.data.metrics["overall_score.n_samples"] == metrics["overall_score:n_samples"]


PANEL = [
    "judge-a-err10",
    "judge-b-err20",
    "judge-c-err30",
]  # fake judges of known error rates, the chair first


def test_a_panels_mlflow_run_has_its_judges_rule_and_members_metrics(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A panel of judges' run in the ``./mlruns`` file store: a single judge's parameters (``judge`` is
    the chair), then ``judges`` (the members' specs in panel order) and ``panel_rule`` (the rule in
    force: ``results --panel`` changes it, and the scores with it); every numeric key of the metrics
    document, the panel's agreement and each member's ``judge:<label>:*`` included."""
    from mlflow.tracking import MlflowClient

    store = tmp_path / "panel.db"
    judges = [flag for label in PANEL for flag in ("--judge", label)]
    run = [
        "run", "--model", "cand", "--base-url", server, *judges, "--judge-base-url", server,
        "--store", str(store), "--max-retries", "0", "--name", "panel", "--limit", "3",
    ]  # fmt: skip
    assert (made := runner.invoke(app, run)).exit_code == 0, made.output
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    env = {"MLFLOW_TRACKING_URI": "./mlruns"}
    client = MlflowClient(tracking_uri=str(tmp_path / "mlruns"))
    logged: dict[str, Any] = {}
    for rule in ("majority", "unanimous"):
        out = tmp_path / f"{rule}.json"
        flags = ["--metrics-out", str(out), *(["--panel", rule] if rule != "majority" else [])]
        result = runner.invoke(app, ["results", "panel", "--store", str(store), "--mlflow", *flags], env=env)
        assert result.exit_code == 0, result.output
        experiment = client.get_experiment_by_name("healthbench")
        assert experiment is not None
        (new,) = [r for r in client.search_runs([experiment.experiment_id]) if r.info.run_id not in logged]
        logged[new.info.run_id] = (rule, new, json.loads(out.read_text()))
    s = Store(store)
    view = RunView.open(s, "panel")
    sha = view.dataset["sha256"], view.grader_template_sha256
    s.close()
    for rule, mlflow_run, metrics in logged.values():
        assert mlflow_run.info.status == "FINISHED" and mlflow_run.info.run_name == "panel"
        assert mlflow_run.data.params == {
            "model": "cand",
            "judge": "judge-a-err10",
            "dataset": "demo",
            "dataset_sha256": sha[0],
            "profile": "none",
            "grader_template_sha256": sha[1],
            "repeats": "1",
            "seed": "0",
            "n_resamples": "1000",
            "judges": '["judge-a-err10", "judge-b-err20", "judge-c-err30"]',
            "panel_rule": rule,
        }
        assert json.loads(mlflow_run.data.params["judges"]) == PANEL
        assert metrics["panel_rule"] == rule
        assert mlflow_run.data.metrics == mlflow_metrics(metrics)
        members = {key: value for key, value in mlflow_run.data.metrics.items() if key.startswith("judge.")}
        expected = {mlflow_metric_name(k): v for k, v in metrics.items() if k.startswith("judge:")}
        assert members == expected and len(members) >= 3 * 2  # each member's overall score and axes
        for label in PANEL:
            assert members[f"judge.{label}.overall_score"] == metrics[f"judge:{label}:overall_score"]
        assert mlflow_run.data.metrics["judge_agreement"] == metrics["judge_agreement"]
    (majority, _, by_majority), (unanimous, _, by_unanimous) = logged.values()
    assert (majority, unanimous) == ("majority", "unanimous")
    # the members' own scores do not depend on the rule; the panel's overall score does
    assert {k: v for k, v in by_majority.items() if k.startswith("judge:")} == {
        k: v for k, v in by_unanimous.items() if k.startswith("judge:")
    }
    assert by_unanimous["overall_score"] != by_majority["overall_score"]


def test_metric_names_are_flat_and_never_collide() -> None:
    assert mlflow_metric_name("axis:accuracy:ci_lower") == "axis.accuracy.ci_lower"
    assert mlflow_metric_name("overall_score") == "overall_score"
    assert mlflow_metric_name("theme:a b(c)+d/e") == "theme.a b_c__d_e"
    assert mlflow_metric_name(":x::..") == "_.x...."
    assert mlflow_metric_name("") == "_"
    assert mlflow_metrics({"a:b": 1, "n": 2, "s": "text", "none": None, "nan": math.nan, "t": True}) == {
        "a.b": 1.0,
        "n": 2.0,
    }
    with pytest.raises(ConfigError, match=r"'a:b' and 'a\.b' have the same MLflow name"):
        mlflow_metrics({"a:b": 1, "a.b": 2})


def test_import_and_help_load_neither_library() -> None:
    code = (
        "import sys\n"
        "import healthbench, healthbench.cli.run_cmd, healthbench.results.mlflow_log\n"
        "import healthbench.results.inspect_log\n"
        "print(sorted(m for m in ('mlflow', 'inspect_ai') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_local_file_run_is_named_by_its_file_and_one_model_in_both_roles_sums_them(
    server: str, tmp_path: Path
) -> None:
    """``--data FILE`` is the file's name and sha256 in both exports (not the default variant
    ``demo``); a model that is both candidate and judge has both roles' tokens in Inspect's
    ``model_usage`` (one entry overwrote the other)."""
    import hashlib

    from inspect_ai.log import read_eval_log
    from mlflow.tracking import MlflowClient

    data = tmp_path / "my-cases.jsonl"
    data.write_bytes((resources.files("healthbench.data") / "demo" / "demo.jsonl").read_bytes())
    store = tmp_path / "s.db"
    args = judged_run_args(server, store, "--model", "judge", "--base-url", server, "--data", str(data))
    log_path, uri = tmp_path / "run.eval", f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = runner.invoke(
        app, [*args, "--name", "local", "--limit", "2", "--mlflow"], env={"MLFLOW_TRACKING_URI": uri}
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app, ["results", "local", "--store", str(store), "--inspect-log-out", str(log_path)]
    )
    assert result.exit_code == 0, result.output
    sha = hashlib.sha256(data.read_bytes()).hexdigest()
    log = read_eval_log(str(log_path))
    assert log.eval.dataset.name == "my-cases.jsonl"
    assert log.eval.metadata is not None and log.eval.metadata["dataset"]["sha256"] == sha
    roles = log.stats.role_usage
    assert roles["candidate"].input_tokens > 0 and roles["judge"].input_tokens > 0
    (usage,) = log.stats.model_usage.values()
    assert usage.input_tokens == roles["candidate"].input_tokens + roles["judge"].input_tokens
    assert log.samples is not None
    for sample in log.samples:
        (one,) = sample.model_usage.values()
        assert one.output_tokens == sum(u.output_tokens for u in sample.role_usage.values())
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("healthbench")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.data.params["dataset"] == "my-cases.jsonl"
    assert logged.data.params["dataset_sha256"] == sha


def test_a_stored_runs_scores_are_those_of_its_whole_samples(run_store: Path) -> None:
    """`RunView.score` keeps of each sample only what scoring reads: its figures are `score_run`'s of
    the samples with every text (repeats, an ungraded criterion, a failed sample, the length penalty)."""
    from healthbench.scoring.run_score import score_run

    store = Store(run_store)
    view = RunView.open(store, RUN)
    options = replace(view.scoring_options(seed=3, n_resamples=50), length_penalty=0.1, length_center=20.0)
    whole = score_run(view.graded_samples(), options)
    lean = view.score(options)
    assert lean.metrics() == whole.metrics() and lean.per_sample == whole.per_sample
    assert "overall_score_length_adjusted" in lean.metrics() and lean.ungraded_samples == 2
    assert view.score().metrics() == score_run(view.graded_samples(), view.scoring_options()).metrics()
    store.close()
