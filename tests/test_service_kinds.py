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
from healthbench.results.metrics_out import json_safe, usage_metrics
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
        # the second download reads the figures the first remembered in the store: the same document
        assert jobs.results.metrics.download(name="re") == metrics
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
        # the metrics of `healthbench results --metrics-out`: the scores, cost and tokens, provenance
        usage = view.usage_totals()
        expected = {
            **view.score().metrics(),
            **usage_metrics(usage.candidate, usage.judge),
            **view.provenance(),
        }
        assert metrics == json_safe(expected)
        assert metrics["cost_usd"] is None  # the fake model has no price: unknown, not $0
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
    usage = {k: v for k, v in metrics.items() if k.startswith(("cost_usd", "tokens:judge:"))}
    # as meta-eval --metrics-out: the judge's figures, its calls' cost and tokens, the provenance
    assert metrics == json_safe({**expected, **usage, **provenance})
    assert usage["tokens:judge:input"] > 0 and "cost_usd:judge" in usage
    assert set(provenance) == {"profile", "grader_template_sha256"}


def test_bad_meta_eval_upload_is_422(tmp_path: Path) -> None:
    judge = {"spec": "judge", "base_url": "http://127.0.0.1:9/v1"}
    with Client.local(tmp_path / "s.db") as client, pytest.raises(ServiceError) as refused:
        client.evaluation.benchmark_jobs.create(kind="meta-eval", data_jsonl='{"prompt": 1}\n', judge=judge)
    assert refused.value.status == 422 and refused.value.message.startswith("data_jsonl:1")


@pytest.mark.parametrize("kind", ["eval", "meta-eval"])
def test_a_profile_names_the_judge_of_a_job_that_gives_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A job's `profile` resolves as `--profile` does (build_config): its judge and settings under the
    job's own; a judge the job names wins."""
    from healthbench.profiles import INSPECT_JUDGE, SIMPLE_EVALS_JUDGE
    from healthbench.service.operations import job_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the profile's judge is an OpenAI model
    model = {"model": {"spec": "openai/cand"}} if kind == "eval" else {}
    with Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="p", kind=kind, profile="simple-evals", limit=1, **model)
        mine = {"spec": "openai/mine", "settings": {"temperature": 0.0}}
        jobs.create(name="q", kind=kind, profile="inspect", judge=mine, limit=1, **model)
        specs = {name: jobs.retrieve(name=name).spec for name in ("p", "q")}
    p = job_config(specs["p"], {}, tmp_path)
    assert p.judge is not None and p.judge.spec == SIMPLE_EVALS_JUDGE
    assert (p.judge.settings.temperature, p.judge.settings.max_tokens) == (0.5, 2048)
    assert p.judge_sees_system_message
    if kind == "eval":
        assert p.model is not None and p.model.settings.system_message == "You are a helpful assistant."
    q = job_config(specs["q"], {}, tmp_path)
    assert q.judge is not None and q.judge.spec == "openai/mine" != INSPECT_JUDGE
    assert q.judge.settings.temperature == 0.0 and not q.judge_sees_system_message


def test_a_job_without_judge_or_profile_is_refused_naming_the_judge(tmp_path: Path) -> None:
    with Client.local(tmp_path / "s.db") as client, pytest.raises(ServiceError) as refused:
        client.evaluation.benchmark_jobs.create(kind="meta-eval", limit=1)
    assert refused.value.status == 422 and refused.value.message.startswith("body.judge:")


def test_a_regrade_job_with_a_profile_is_checked_against_the_profiles_judge(
    store_target: str, allresults: tuple[str, list[GradedSample]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="imp", kind="import", dataset="demo", allresults_json=allresults[0])
        assert client.wait_until_done("imp", interval=0.1, timeout=60).status == "completed"
        with pytest.raises(ServiceError) as refused:  # gpt-4.1 (simple-evals' judge) needs OpenAI's key
            jobs.create(name="re", kind="regrade", source="imp", profile="simple-evals")
    assert refused.value.status == 422 and refused.value.message.startswith("judge")
    assert "OPENAI_API_KEY" in refused.value.message
