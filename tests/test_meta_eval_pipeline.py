"""`healthbench meta-eval` end to end: the same engine grades fixed completions; metrics computed on the
stored labels equal those of the pure core on independently computed labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import one_line_error
from support.process import fake_server_process
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.grading.template import builtin_template
from healthbench.results.meta_results import score_meta_run, stored_labels
from healthbench.runner.meta_eval import run_meta_eval
from healthbench.scoring.meta import meta_metrics
from healthbench.store import Store
from healthbench.testing.fake_server import fake_verdict, fetch_stats, reset_stats

FIXTURE = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"
runner = CliRunner()


@pytest.fixture(scope="module")
def server():
    with fake_server_process("--latency-jitter", "0.02") as url:
        yield url


def expected_labels(records: list[MetaEvalRecord]) -> list[bool]:
    template = builtin_template()
    labels = []
    for r in records:
        convo = [{"role": m.role, "content": m.content} for m in r.prompt]
        convo.append({"role": "assistant", "content": r.completion})
        labels.append(fake_verdict(template.render(convo, r.rubric)))  # the criterion as is, no points
    return labels


def test_pipeline_matches_core_on_fixture(server: str, store_target: str) -> None:
    store = Store(store_target)  # on SQLite, then PostgreSQL
    cfg = build_config(
        {
            "dataset": "meta_eval",
            "data": str(FIXTURE),
            "n_repeats": 2,
            "judge": {"spec": "judge", "base_url": server},
        }
    )
    reset_stats(server)
    outcome = run_meta_eval(cfg, store=store, name="meta")
    records = read_records(FIXTURE, MetaEvalRecord)
    assert fetch_stats(server)["judge"] == 2 * len(records)  # repeats are independent judgements
    _, labels = stored_labels(store, outcome.run)
    assert labels == expected_labels(records) * 2
    got = score_meta_run(store, outcome.run).metrics
    assert got == meta_metrics(records * 2, expected_labels(records) * 2).metrics
    assert outcome.run.kind == "meta_eval" and outcome.run.status == "finished"
    # re-running the finished run makes no call
    reset_stats(server)
    run_meta_eval(cfg, store=store, name="meta")
    assert fetch_stats(server)["requests"] == 0


def test_cli_judge_run_and_labels_file_agree(server: str, tmp_path: Path) -> None:
    judged, from_labels = tmp_path / "judged.json", tmp_path / "labels.json"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"j": {"input": 2.0, "output": 8.0}}))
    reset_stats(server)
    result = runner.invoke(
        app,
        [
            "meta-eval",
            "--data",
            str(FIXTURE),
            "--judge",
            "j",
            "--judge-base-url",
            server,
            "--store",
            str(tmp_path / "s.db"),
            "--metrics-out",
            str(judged),
            "--prices",
            str(prices),
        ],
    )
    billed = fetch_stats(server)["billed"]["judge"]
    assert result.exit_code == 0, result.output
    assert "judge F1" in result.output
    records = read_records(FIXTURE, MetaEvalRecord)
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text(
        "".join(
            json.dumps({"completion_id": r.completion_id, "rubric": r.rubric, "criteria_met": label}) + "\n"
            for r, label in zip(records, expected_labels(records), strict=True)
        )
    )
    result = runner.invoke(
        app,
        [
            "meta-eval",
            "--data",
            str(FIXTURE),
            "--labels",
            str(labels_file),
            "--metrics-out",
            str(from_labels),
        ],
    )
    assert result.exit_code == 0, result.output
    from_judge = json.loads(judged.read_text())
    # a judged run says how its verdicts were asked for; labels made elsewhere cannot
    assert from_judge.pop("profile") is None
    assert from_judge.pop("grader_template_sha256") == builtin_template().sha256
    # and what its judge's calls cost, as an eval run's --metrics-out says it (the server's bill at
    # the --prices rates); a meta-eval has no candidate
    costs = {key: from_judge.pop(key) for key in list(from_judge) if key.startswith(("cost_usd", "tokens:"))}
    expected = (billed["input_tokens"] * 2.0 + billed["output_tokens"] * 8.0) / 1e6
    assert costs == {
        "cost_usd": pytest.approx(expected, rel=1e-12),
        "cost_usd:judge": pytest.approx(expected, rel=1e-12),
        "tokens:judge:input": billed["input_tokens"],
        "tokens:judge:cached_input": 0,
        "tokens:judge:cache_write_input": 0,
        "tokens:judge:output": billed["output_tokens"],
    }
    assert billed["input_tokens"] > 0 and billed["output_tokens"] > 0
    assert from_judge == json.loads(from_labels.read_text())


def test_labels_file_errors_name_the_line(tmp_path: Path) -> None:
    records = read_records(FIXTURE, MetaEvalRecord)
    bad = tmp_path / "labels.jsonl"
    bad.write_text(
        json.dumps(
            {"completion_id": records[0].completion_id, "rubric": records[0].rubric, "criteria_met": True}
        )
        + "\n"
        + json.dumps(
            {"completion_id": records[1].completion_id, "rubric": records[1].rubric, "criteria_met": "yes"}
        )
        + "\n"
    )
    result = runner.invoke(app, ["meta-eval", "--data", str(FIXTURE), "--labels", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:2" in result.stderr and "criteria_met" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_labels_file_with_invalid_json_names_the_line_and_column(tmp_path: Path) -> None:
    first = read_records(FIXTURE, MetaEvalRecord)[0]
    good = {"completion_id": first.completion_id, "rubric": first.rubric, "criteria_met": True}
    bad = tmp_path / "labels.jsonl"
    bad.write_text(json.dumps(good) + '\n{"completion_id": oops}\n')
    result = runner.invoke(app, ["meta-eval", "--data", str(FIXTURE), "--labels", str(bad)])
    message = one_line_error(result)
    assert message.startswith(f"error: {bad}:2: invalid JSON (invalid character at column 19)"), message


@pytest.mark.parametrize(
    ("labels", "ids", "message"),
    [
        ([True, False], ["p1"], "binary_labels has 2 labels but anonymized_physician_ids has 1 ids"),
        ([], [], "binary_labels is empty"),
        (["yes"], ["p1"], "binary_labels"),
    ],
)
def test_bad_rows_are_one_line_errors(tmp_path: Path, labels: list, ids: list, message: str) -> None:
    row = json.loads(FIXTURE.read_text().splitlines()[0])
    row.update(binary_labels=labels, anonymized_physician_ids=ids)
    bad = tmp_path / "meta.jsonl"
    bad.write_text(FIXTURE.read_text().splitlines()[1] + "\n" + json.dumps(row) + "\n")
    result = runner.invoke(app, ["meta-eval", "--data", str(bad), "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 1
    assert f"{bad}:2" in result.stderr and message in result.stderr
