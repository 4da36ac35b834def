"""Online jobs other than eval, through the one engine and `Client.local` (SQLite and PostgreSQL): a
regrade of a completed job's answers with another judge, and a meta-eval of the judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service_helpers import completed_job
from support.process import fake_server_process
from test_meta_eval_pipeline import expected_labels
from test_service_offline import META, demo_samples

from healthbench.client import Client, ServiceError
from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.results.metrics_out import json_safe
from healthbench.results.simple_evals import write_allresults
from healthbench.results.views import RunView
from healthbench.scoring.meta import meta_metrics
from healthbench.scoring.run_score import GradedSample, score_run
from healthbench.store.runs import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats


@pytest.fixture(scope="module")
def fake() -> Any:
    with fake_server_process() as url:
        yield url


@pytest.fixture
def allresults(tmp_path: Path) -> tuple[str, list[GradedSample]]:
    samples = demo_samples()
    path = write_allresults(tmp_path / "demo_allresults.json", samples, score_run(samples))
    return path.read_text(encoding="utf-8"), samples


def test_regrade_job_grades_the_source_answers_again(
    store_target: str, fake: str, allresults: tuple[str, list[GradedSample]]
) -> None:
    text, samples = allresults
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        with pytest.raises(ServiceError) as early:  # the source must exist and be completed
            jobs.create(name="re", kind="regrade", source="imp", judge={"spec": "judge", "base_url": fake})
        assert early.value.status == 422 and early.value.message.startswith("source: no job named 'imp'")
        jobs.create(name="imp", kind="import", dataset="demo", allresults_json=text)
        assert client.wait_until_done("imp", interval=0.1, timeout=60).status == "completed"
        reset_stats(fake)
        jobs.create(
            name="re", kind="regrade", source="imp", judge={"spec": "judge", "base_url": fake}, max_retries=0
        )
        final = completed_job(client, "re")
        stats = fetch_stats(fake)
        metrics = jobs.results.metrics.download(name="re")
        rows = list(jobs.results.row_scores.download(name="re"))
    criteria = sum(len(s.verdicts) for s in samples)
    assert stats["candidate"] == 0 and stats["judge"] == criteria  # graded again, never re-sampled
    assert final.status_details.criteria_done == criteria
    assert [r["sample"]["output_text"] for r in rows] == [s.completion for s in samples]
    store = Store(store_target)
    try:
        run = store.require_run("default/re")
        assert run.parent_run == "default/imp"
        view = RunView.of(store, run)
        # the metrics of `healthbench results --metrics-out`: the scores, then the provenance
        assert metrics == json_safe({**view.score().metrics(), **view.provenance()})
        assert metrics["grader_template_sha256"] == view.grader_template_sha256 is not None
    finally:
        store.close()


def test_meta_eval_job_grades_the_meta_eval_rows(store_target: str, fake: str) -> None:
    records = read_records(META, MetaEvalRecord)
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(
            name="meta",
            kind="meta-eval",
            data_jsonl=META.read_text(),
            judge={"spec": "judge", "base_url": fake},
            max_retries=0,
        )
        completed_job(client, "meta")
        store = Store(store_target)
        try:
            provenance = RunView.open(store, "default/meta").provenance()
        finally:
            store.close()
        assert [r.name for r in jobs.results.list(name="meta").data] == ["metrics"]
        metrics = jobs.results.metrics.download(name="meta")
        with pytest.raises(ServiceError) as refused:
            jobs.results.row_scores.download(name="meta")
        assert refused.value.status == 404
    expected = meta_metrics(records, expected_labels(records)).metrics
    assert metrics == json_safe({**expected, **provenance})
    assert set(provenance) == {"profile", "grader_template_sha256"}


def test_bad_meta_eval_upload_is_422(tmp_path: Path) -> None:
    judge = {"spec": "judge", "base_url": "http://127.0.0.1:9/v1"}
    with Client.local(tmp_path / "s.db") as client, pytest.raises(ServiceError) as refused:
        client.evaluation.benchmark_jobs.create(kind="meta-eval", data_jsonl='{"prompt": 1}\n', judge=judge)
    assert refused.value.status == 422 and refused.value.message.startswith("data_jsonl:1")
