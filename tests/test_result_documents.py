"""The aggregate-scores and row-scores documents (library and CLI) and the typed read layer under them.

The run is written straight into a store (no model call): 4 conversations x 2 repeats with one failed
sample, one missing grade and one grade the judge left ungraded, so every path of the documents shows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import build_conversation
from typer.testing import CliRunner, Result

import healthbench
import healthbench.cli
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.schema import Conversation
from healthbench.errors import RunError
from healthbench.results.aggregate import aggregate_scores
from healthbench.results.rows import iter_row_scores
from healthbench.results.views import RunView
from healthbench.runner.run import stored_record
from healthbench.scoring.run_score import score_run
from healthbench.store import Store
from healthbench.store.runs import GradeRow, SampleRow


def conversation(
    items: list[tuple[int, list[str]]], *, prompt_id: str, example_tags: list[str]
) -> Conversation:
    return build_conversation(
        items, prompt_id=prompt_id, example_tags=example_tags, question=f"question {prompt_id}"
    )


CONVERSATIONS = [
    conversation(
        [(5, ["axis:accuracy"]), (3, ["axis:completeness"]), (-2, ["axis:accuracy"])],
        prompt_id="c1",
        example_tags=["theme:hedging"],
    ),
    conversation(
        [(4, ["axis:accuracy", "cluster:x"]), (6, ["axis:communication"])],
        prompt_id="c2",
        example_tags=["theme:emergency_referrals"],
    ),
    conversation([(10, ["axis:accuracy"])], prompt_id="c3", example_tags=["theme:hedging"]),
    conversation(
        [(2, ["axis:completeness"]), (2, ["axis:accuracy"])],
        prompt_id="c4",
        example_tags=["theme:emergency_referrals"],
    ),
]
# (prompt_id, repeat) -> statuses per criterion; None = no grade row stored
STATUSES: dict[tuple[str, int], list[str | None]] = {
    ("c1", 0): ["met", "not_met", "met"],
    ("c2", 0): ["met", "met"],
    ("c3", 0): ["ungraded"],
    ("c4", 0): ["not_met", "met"],
    ("c1", 1): ["met", "met", "not_met"],
    ("c2", 1): ["not_met", None],
    ("c3", 1): ["met"],
    ("c4", 1): [None, None],  # its sample failed
}
N_ROWS = 8


def _write_run(store: Store, name: str = "docs", **config: Any) -> None:
    cfg = build_config({"dataset": "demo", "n_repeats": 2, "scoring": {"n_resamples": 200}}, config)
    record = stored_record(cfg, kind="eval", dataset={"variant": "demo"}, template_sha="abc")
    run = store.create_run(
        name, "eval", record, [(c.prompt_id, c.model_dump(mode="json")) for c in CONVERSATIONS]
    )
    samples: list[SampleRow] = []
    grades: list[GradeRow] = []
    for (prompt_id, repeat), statuses in STATUSES.items():
        failed = (prompt_id, repeat) == ("c4", 1)
        completion = None if failed else f"answer to {prompt_id} #{repeat}" + "x" * (10 * repeat)
        usage = None if failed else {"input_tokens": 10, "output_tokens": 5}
        cost = None if failed else 0.01
        error = "HTTP 500" if failed else None
        samples.append(SampleRow(prompt_id, repeat, usage, cost, False, error, completion, None))
        for index, status in enumerate(statuses):
            if status is None:
                continue
            grade_usage = {"input_tokens": 100, "output_tokens": 20}
            grades.append(
                GradeRow(
                    prompt_id,
                    repeat,
                    grade_usage,
                    0.001,
                    index == 0,
                    None,
                    index,
                    status,
                    f"why {index}",
                    1,
                    "{}",
                    judge=cfg.judge.label,
                )
            )
    store.put(run.id, samples=samples, grades=grades)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "runs.db")
    _write_run(s)
    yield s
    s.close()


def _refuse_nan(text: str) -> Any:
    raise AssertionError(f"{text} in the JSON")


def test_aggregate_scores_equal_the_run_score_for_every_key(store: Store) -> None:
    run_score = RunView.open(store, "docs").score()
    flat = run_score.metrics()
    document = aggregate_scores(store, "docs")
    assert document["job"] == "docs"
    refs = [m["metric_ref"] for m in document["metrics"]]
    expected_keys = [k for k in run_score.stats if k != "score"]
    assert refs == [f"healthbench/{k}" for k in expected_keys]
    for metric in document["metrics"]:
        key = metric["metric_ref"].removeprefix("healthbench/")
        (score,) = metric["aggregation"]["scores"]
        assert score["name"] == key and score["score_type"] == "range"
        assert score["score"] == flat[key]
        assert score["bootstrap_std"] == flat[f"{key}:bootstrap_std"]
        assert score["n_samples"] == flat[f"{key}:n_samples"] == score["count"]
        assert (score["ci_lower"], score["ci_upper"]) == (flat[f"{key}:ci_lower"], flat[f"{key}:ci_upper"])
    json.loads(json.dumps(document), parse_constant=_refuse_nan)


def test_aggregate_range_stats_are_those_of_the_per_sample_values(store: Store) -> None:
    run_score = RunView.open(store, "docs").score()
    values = np.array([m["overall_score"] for m in run_score.per_sample if m is not None])
    document = aggregate_scores(store, "docs")
    overall = document["metrics"][0]["aggregation"]["scores"][0]
    # three rows are ungraded (c3#0 judge gave up, c2#1 missing grade, c4#1 failed sample)
    assert (overall["count"], overall["nan_count"]) == (5, 3)
    assert overall["ungraded_criteria"] == run_score.ungraded_criteria == 4
    assert overall["mean"] == pytest.approx(float(values.mean()), abs=1e-15)
    assert overall["std_dev"] == pytest.approx(float(values.std()), abs=1e-15)
    assert overall["sample_variance"] == pytest.approx(float(values.var(ddof=1)), abs=1e-15)
    assert (overall["min"], overall["max"]) == (float(values.min()), float(values.max()))
    assert sum(b["count"] for b in overall["histogram"]["bins"]) == 5
    # theme:hedging: c1 x2 and c3#1 graded, c3#0 ungraded (one criterion)
    hedging = next(m for m in document["metrics"] if m["metric_ref"] == "healthbench/theme:hedging")
    score = hedging["aggregation"]["scores"][0]
    assert (score["count"], score["nan_count"], score["ungraded_criteria"]) == (3, 1, 1)


def test_a_run_without_graded_samples_has_null_figures_and_valid_json(tmp_path: Path) -> None:
    store = Store(tmp_path / "empty.db")
    cfg = build_config({"dataset": "demo", "scoring": {"n_resamples": 0}})
    record = stored_record(cfg, kind="eval", dataset={}, template_sha="abc")
    conv = CONVERSATIONS[0]
    store.create_run("empty", "eval", record, [(conv.prompt_id, conv.model_dump(mode="json"))])
    document = aggregate_scores(store, "empty")
    overall = document["metrics"][0]["aggregation"]["scores"][0]
    assert overall["name"] == "overall_score"
    assert (overall["count"], overall["nan_count"], overall["score"], overall["mean"]) == (0, 1, None, None)
    assert overall["ungraded_criteria"] == 3
    json.loads(json.dumps(document, allow_nan=False), parse_constant=_refuse_nan)
    (row,) = iter_row_scores(store, "empty")
    assert row["metrics"]["healthbench/overall_score"] == [{"name": "overall_score", "value": None}]
    assert row["sample"]["error"] == "not sampled"
    store.close()


def test_every_row_carries_the_scoring_cores_per_sample_metrics(store: Store) -> None:
    run_score = RunView.open(store, "docs").score()
    rows = list(iter_row_scores(store, "docs"))
    assert [r["row_index"] for r in rows] == list(range(N_ROWS))
    for row, per_sample in zip(rows, run_score.per_sample, strict=True):
        values = {ref.removeprefix("healthbench/"): v for ref, v in row["metrics"].items()}
        assert all(len(v) == 1 and v[0]["name"] == key for key, v in values.items())
        if per_sample is None:
            assert all(v[0]["value"] is None for v in values.values())
            assert "overall_score" in values
        else:
            assert {k: v[0]["value"] for k, v in values.items()} == per_sample
    first = rows[0]
    assert first["item"]["prompt_id"] == "c1" and first["item"]["example_tags"] == ["theme:hedging"]
    assert first["item"]["prompt"][0]["role"] == "user"
    assert first["sample"]["output_text"] == "answer to c1 #0"
    assert first["sample"]["repeat"] == 0 and first["sample"]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
    }
    assert [(c["index"], c["points"], c["verdict"]) for c in first["criteria"]] == [
        (0, 5, "met"),
        (1, 3, "not_met"),
        (2, -2, "met"),
    ]
    assert first["criteria"][0]["explanation"] == "why 0" and first["criteria"][0]["tags"] == [
        "axis:accuracy"
    ]
    missing = rows[5]  # c2, repeat 1: the second grade was never stored
    assert [c["verdict"] for c in missing["criteria"]] == ["not_met", "ungraded"]
    failed = rows[7]
    assert failed["sample"]["error"] == "HTTP 500" and failed["sample"]["output_text"] == ""
    assert {c["verdict"] for c in failed["criteria"]} == {"ungraded"}


def test_overall_score_length_adjusted_shows_in_both_documents(tmp_path: Path) -> None:
    store = Store(tmp_path / "len.db")
    _write_run(store, "len", scoring={"length_penalty": 0.1, "length_center": 12})
    flat = RunView.open(store, "len").score().metrics()
    document = aggregate_scores(store, "len")
    by_ref = {m["metric_ref"]: m["aggregation"]["scores"][0] for m in document["metrics"]}
    key = "overall_score_length_adjusted"
    assert by_ref[f"healthbench/{key}"]["score"] == flat[key]
    row = next(iter_row_scores(store, "len"))
    assert "healthbench/overall_score_length_adjusted" in row["metrics"]
    store.close()


def test_rows_are_read_a_page_at_a_time(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    real = Store.load_verdicts

    def spy(self: Store, run_id: int, **kwargs: Any) -> Any:
        asked.append(len(kwargs["item_ids"]))
        return real(self, run_id, **kwargs)

    monkeypatch.setattr(Store, "load_verdicts", spy)
    view = RunView.open(store, "docs")
    paged = [s.graded for s in view.iter_samples(page_size=3)]
    assert asked == [3, 1, 3, 1]  # 4 conversations in pages of 3, for each of the 2 repeats
    assert paged == view.graded_samples()
    rows = iter_row_scores(store, "docs")
    asked.clear()
    next(rows)
    assert len(asked) == 1  # the first row needs only the first page


def test_view_parses_the_config_once_and_totals_usage(store: Store) -> None:
    view = RunView.open(store, "docs")
    assert view.config.n_repeats == 2 and view.judge_spec == view.config.judge.spec
    assert view.grader_template_sha256 == "abc" and view.dataset == {"variant": "demo"}
    assert view.n_rows() == N_ROWS
    totals = view.usage_totals()
    assert (totals.candidate.calls, totals.candidate.failed_calls) == (8, 1)
    assert totals.candidate.tokens == {"input_tokens": 70, "output_tokens": 35}
    n_grades = sum(s is not None for statuses in STATUSES.values() for s in statuses)
    assert (
        totals.judge.calls == n_grades and totals.judge.cached_calls == 7
    )  # criterion 0 of every graded row
    assert totals.cost == pytest.approx(7 * 0.01 + n_grades * 0.001)


def test_documents_refuse_unknown_and_meta_eval_runs(store: Store) -> None:
    with pytest.raises(RunError, match="no run named 'nope'"):
        aggregate_scores(store, "nope")
    store.create_run("meta", "meta_eval", store.get_run("docs").config, [])
    with pytest.raises(RunError, match="is a meta_eval run, not an eval run"):
        next(iter_row_scores(store, "meta"))


def test_nemo_access_patterns_work_on_the_documents(store: Store) -> None:
    aggregate = healthbench.aggregate_scores(store, "docs")
    seen = {}
    for metric in aggregate["metrics"]:
        for score in metric["aggregation"]["scores"]:
            seen[metric["metric_ref"]] = (score["name"], score["mean"], score["count"])
    assert seen["healthbench/overall_score"][0] == "overall_score"
    frame = pd.json_normalize(
        aggregate["metrics"], record_path=["aggregation", "scores"], meta=["metric_ref"]
    )
    assert {"metric_ref", "name", "mean", "std_dev", "min", "max", "count"} <= set(frame.columns)
    assert len(frame) == len(aggregate["metrics"])
    overall = frame.set_index("metric_ref").loc["healthbench/overall_score"]
    assert overall["count"] == 5
    flat = [
        {"prompt_id": row["item"]["prompt_id"], "answer": row["sample"]["output_text"]}
        | {ref: values[0]["value"] for ref, values in row["metrics"].items()}
        for row in healthbench.iter_row_scores(store, "docs")
    ]
    rows = pd.DataFrame(flat)
    low = rows[rows["healthbench/overall_score"] < 0.5]
    assert len(rows) == N_ROWS
    assert sorted(low["prompt_id"]) == sorted(
        r["prompt_id"]
        for r in flat
        if r["healthbench/overall_score"] is not None and r["healthbench/overall_score"] < 0.5
    )
    assert not math.isnan(rows["healthbench/overall_score"].mean())


def results_cli(tmp_path: Path, name: str, *flags: str) -> Result:
    """`healthbench results NAME FLAGS` on the store of the `store` fixture."""
    return CliRunner().invoke(app, ["results", name, "--store", str(tmp_path / "runs.db"), *flags])


def test_cli_results_writes_both_documents(store: Store, tmp_path: Path) -> None:
    aggregate_path, rows_path, metrics_path = (
        tmp_path / "agg.json",
        tmp_path / "rows.jsonl",
        tmp_path / "m.json",
    )
    result = results_cli(
        tmp_path,
        "docs",
        *("--metrics-out", str(metrics_path), "--aggregate-out", str(aggregate_path)),
        *("--row-scores-out", str(rows_path)),
    )
    assert result.exit_code == 0, result.output
    assert f"{N_ROWS} row scores written to {rows_path}" in result.output
    metrics = json.loads(metrics_path.read_text())
    aggregate = json.loads(aggregate_path.read_text(), parse_constant=_refuse_nan)
    assert aggregate == aggregate_scores(store, "docs")
    for metric in aggregate["metrics"]:
        key = metric["metric_ref"].removeprefix("healthbench/")
        assert metric["aggregation"]["scores"][0]["score"] == metrics[key]
    lines = rows_path.read_text().splitlines()
    assert [json.loads(line, parse_constant=_refuse_nan) for line in lines] == list(
        iter_row_scores(store, "docs")
    )
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_cli_results_on_an_unknown_run_is_one_line_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "agg.json"
    result = results_cli(tmp_path, "nope", "--aggregate-out", str(out))
    assert result.exit_code == 1
    assert "no run named 'nope'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_results_and_config_never_import_the_runner() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib, healthbench.results as r\n"
        "import healthbench.config\n"
        "for m in pkgutil.iter_modules(r.__path__):\n"
        "    importlib.import_module('healthbench.results.' + m.name)\n"
        "print(sorted(n for n in sys.modules if n.startswith(('healthbench.runner', 'healthbench.cli'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_results_into_an_unwritable_place_is_one_line(store: Store, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = results_cli(tmp_path, "docs", "--row-scores-out", str(blocker / "rows.jsonl"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --row-scores-out {blocker / 'rows.jsonl'}: {blocker} is a file, not a folder"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.db")) == ["file"]


def _same_score(a: Any, b: Any) -> None:
    """Two `RunScore`s hold the very same numbers (NaN equal to NaN)."""
    assert json.dumps(a.metrics()) == json.dumps(b.metrics())
    assert a.per_sample == b.per_sample and a.stats.keys() == b.stats.keys()
    assert (a.ungraded_criteria, a.ungraded_samples) == (b.ungraded_criteria, b.ungraded_samples)


@pytest.mark.parametrize("scoring", [{}, {"length_penalty": 0.1, "length_center": 12}])
def test_a_stored_runs_score_is_score_run_of_its_samples(tmp_path: Path, scoring: dict[str, Any]) -> None:
    store = Store(tmp_path / "runs.db")
    _write_run(store, "run", scoring=scoring)
    view = RunView.open(store, "run")
    samples = view.graded_samples()
    expected = score_run(samples, view.scoring_options())
    assert expected.ungraded_samples == 3 and expected.stats["overall_score"].n_conversations == 4
    assert [len(s.completion) for s in samples] == [len(f"answer to c{i} #0") for i in (1, 2, 3, 4)] + [
        len(f"answer to c{i} #1") + 10 for i in (1, 2, 3)
    ] + [0]  # the failed sample: no answer
    _same_score(view.score(), expected)
    _same_score(healthbench.score_stored_run(store, view.record), expected)
    if scoring:  # each graded sample's length-adjusted score is its overall score less the penalty
        for sample, metrics in zip(samples, expected.per_sample, strict=True):
            if metrics is not None:
                adjusted = metrics["overall_score"] - 0.1 * (len(sample.completion) - 12) / 500
                assert metrics["overall_score_length_adjusted"] == adjusted
    store.close()
