"""Offline jobs: an uploaded simple-evals ``_allresults.json`` stored and scored as a run, and an
uploaded meta-eval label file scored, with no model call; through `Client.local` (SQLite and
PostgreSQL), over HTTP (ASGI) and through a real `healthbench serve`; every bad upload is refused
at creation with a 422."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_helpers import RUN_RESULTS, check_stored_against_core, completed_job, token_for
from sqlalchemy import delete, func, select
from support.service_process import service_process
from typer.testing import CliRunner

from healthbench.cli import app
from healthbench.client import Client, ServiceError
from healthbench.data.sources import load_conversations, load_meta_eval
from healthbench.results.metrics_out import json_safe
from healthbench.results.simple_evals import load_allresults, write_allresults
from healthbench.scoring.meta import meta_metrics
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, score_run
from healthbench.service.app import PREFIX
from healthbench.service.auth import create_token
from healthbench.service.jobs import JobWorkers
from healthbench.service.operations import JobService
from healthbench.store import Store
from healthbench.store.job_tables import job_results

FIXTURES = Path(__file__).parent / "fixtures"
META = FIXTURES / "meta_eval_small.jsonl"
JOBS = PREFIX.format(workspace="default")


def demo_samples() -> list[GradedSample]:
    _, conversations = load_conversations("demo")
    return [
        GradedSample(
            conversation=c,
            completion=f"answer {i}",
            verdicts=tuple(Verdict.of((i + j) % 3 != 0) for j in range(len(c.rubrics))),
        )
        for i, c in enumerate(conversations)
    ]


@pytest.fixture
def allresults(tmp_path: Path) -> tuple[str, list[GradedSample]]:
    samples = demo_samples()
    path = write_allresults(tmp_path / "demo_allresults.json", samples, score_run(samples))
    return path.read_text(encoding="utf-8"), samples


def labels_of(flip: int = 3) -> tuple[str, list[bool]]:
    """A label file for the meta-eval fixture: the physicians' majority, every ``flip``-th one flipped."""
    _, records = load_meta_eval(data=META)
    labels = [
        (sum(r.binary_labels) * 2 >= len(r.binary_labels)) != (i % flip == 0) for i, r in enumerate(records)
    ]
    lines = [
        json.dumps({"completion_id": r.completion_id, "rubric": r.rubric, "criteria_met": label})
        for r, label in zip(records, labels, strict=True)
    ]
    return "\n".join(lines) + "\n", labels


def test_import_job_is_a_run_like_any_other(
    store_target: str, allresults: tuple[str, list[GradedSample]]
) -> None:
    text, samples = allresults
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        job = jobs.create(name="imp", kind="import", dataset="demo", allresults_json=text)
        assert job.spec["kind"] == "import" and "allresults_json" in job.spec["uploads"]
        final = completed_job(client, "imp", timeout=60)
        details = final.status_details
        criteria = sum(len(s.verdicts) for s in samples)
        assert (details.samples_done, details.samples_total, details.progress) == (
            len(samples),
            len(samples),
            100.0,
        )
        assert (details.criteria_done, details.criteria_total, details.ungraded) == (criteria, criteria, 0)
        assert [r.name for r in jobs.results.list(name="imp").data] == RUN_RESULTS
        aggregate = jobs.results.aggregate_scores.download(name="imp")
        rows = list(jobs.results.row_scores.download(job="imp"))
        metrics = jobs.results.metrics.download(name="imp")
    expected = score_run(samples).metrics()
    assert metrics["overall_score"] == pytest.approx(expected["overall_score"], abs=1e-12)
    assert {k for k in metrics if k.startswith("theme:")} == {k for k in expected if k.startswith("theme:")}
    assert [r["sample"]["output_text"] for r in rows] == [s.completion for s in samples]
    check_stored_against_core(store_target, "default/imp", aggregate, rows)


def test_meta_eval_labels_job_scores_the_label_file(store_target: str) -> None:
    text, labels = labels_of()
    _, records = load_meta_eval(data=META)
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="lab", kind="meta-eval-labels", labels_jsonl=text, data_jsonl=META.read_text())
        completed_job(client, "lab", timeout=60)
        assert [r.name for r in jobs.results.list(name="lab").data] == ["metrics"]
        metrics = jobs.results.metrics.download(name="lab")
        with pytest.raises(ServiceError) as refused:
            jobs.results.aggregate_scores.download(name="lab")
        assert refused.value.status == 404 and "no aggregate-scores" in refused.value.message
    assert metrics == json_safe(dict(meta_metrics(records, labels).metrics))
    assert metrics["pairwise_model_f1_balanced"] is not None


def test_meta_eval_labels_job_is_scored_once_and_stored(
    store_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scored by the worker only (not at the request, not on a GET); the stored metrics survive a
    restart of the service and go with the job."""
    import healthbench.service.offline as offline

    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return meta_metrics(*args, **kwargs)

    monkeypatch.setattr(offline, "meta_metrics", counted)
    text, labels = labels_of()
    _, records = load_meta_eval(data=META)
    expected = json_safe(dict(meta_metrics(records, labels).metrics))
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="lab", kind="meta-eval-labels", labels_jsonl=text, data_jsonl=META.read_text())
        assert calls == []  # the request only reads the uploads
        completed_job(client, "lab", timeout=60)
        assert calls == [1]
        assert [jobs.results.metrics.download(name="lab") for _ in range(3)] == [expected] * 3
    assert calls == [1]
    with Client.local(store_target) as restarted:
        jobs = restarted.evaluation.benchmark_jobs
        assert jobs.results.metrics.download(name="lab") == expected
        assert calls == [1]
    store = Store(store_target)
    with store.engine.begin() as conn:  # a job completed before results were stored (0007)
        assert conn.execute(delete(job_results)).rowcount == 1
    with Client.local(store_target) as upgraded:
        jobs = upgraded.evaluation.benchmark_jobs
        assert [jobs.results.metrics.download(name="lab") for _ in range(2)] == [expected] * 2
        assert calls == [1, 1]  # scored once more, then stored
        jobs.delete(name="lab")
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(job_results)).scalar() == 0


# -- over HTTP (ASGI) ---------------------------------------------------------------------------------


@pytest.fixture
def headers(service: JobService) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(service.jobs, ['default'])}"}


def wait_completed(http: TestClient, headers: dict[str, str], name: str) -> dict[str, Any]:
    import time

    for _ in range(600):
        status = http.get(f"{JOBS}/{name}/status", headers=headers).json()
        if status["status"] in ("completed", "error", "cancelled"):
            return dict(status)
        time.sleep(0.05)
    raise AssertionError(f"job {name} did not finish")


def test_import_job_over_http_returns_every_document(
    http: TestClient,
    headers: dict[str, str],
    service: JobService,
    allresults: tuple[str, list[GradedSample]],
    tmp_path: Path,
) -> None:
    text, samples = allresults
    body = {"name": "imp", "kind": "import", "dataset": "demo", "allresults_json": text}
    created = http.post(JOBS, json=body, headers=headers)
    assert created.status_code == 201, created.text
    with JobWorkers(service.store):
        status = wait_completed(http, headers, "imp")
    assert status["status"] == "completed", status
    exported = http.get(f"{JOBS}/imp/results/allresults/download", headers=headers)
    assert exported.status_code == 200
    (tmp_path / "back.json").write_bytes(exported.content)
    back = load_allresults(tmp_path / "back.json")
    assert [(s.conversation.prompt_id, s.completion, s.verdicts) for s in back.samples] == [
        (s.conversation.prompt_id, s.completion, s.verdicts) for s in samples
    ]
    metrics = http.get(f"{JOBS}/imp/results/metrics/download", headers=headers).json()
    assert back.score == pytest.approx(metrics["overall_score"], abs=1e-12)
    rows = http.get(f"{JOBS}/imp/results/row-scores/download", headers=headers).text.splitlines()
    assert len(rows) == len(samples)
    # the same documents as `healthbench results --metrics-out --allresults-out` on the stored run,
    # provenance (profile, grader_template_sha256) included
    store = str(tmp_path / "s.db")
    outputs = ["--metrics-out", str(tmp_path / "m.json"), "--allresults-out", str(tmp_path / "a.json")]
    result = CliRunner().invoke(app, ["results", "default/imp", "--store", store, *outputs])
    assert result.exit_code == 0, result.output
    assert metrics == json.loads((tmp_path / "m.json").read_text())
    assert {"profile", "grader_template_sha256"} <= set(metrics)
    assert json.loads(exported.content) == json.loads((tmp_path / "a.json").read_text())
    assert {"profile", "grader_template_sha256"} <= set(json.loads(exported.content)["metadata"])


def error_of(response: Any) -> str:
    assert response.status_code == 422, response.text
    assert "Traceback" not in response.text
    return str(response.json()["error"]["message"])


def one_example_changed(text: str, **change: Any) -> str:
    document = json.loads(text)
    document["metadata"]["example_level_metadata"][1].update(change)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"kind": "import"}, "body.allresults_json: a job of kind 'import' needs allresults_json"),
        (
            {"kind": "import", "allresults_json": "{}", "model": {"spec": "x"}},
            "body.model: model does not apply",
        ),
        ({"kind": "import", "allresults_json": "{}", "limit": 3}, "limit does not apply"),
        ({"kind": "meta-eval-labels"}, "needs labels_jsonl"),
        ({"kind": "meta-eval-labels", "labels_jsonl": "", "dataset": "hard"}, "dataset does not apply"),
        ({"allresults_json": "{}"}, "a job of kind 'eval' needs model"),
        ({"kind": "regrade"}, "kind"),
        ({"kind": "import", "allresults_json": "{\n  oops"}, "allresults_json:2: invalid JSON"),
        ({"kind": "import", "allresults_json": "[]"}, "allresults_json: expected a JSON object"),
    ],
)
def test_bad_bodies_and_uploads_are_422(
    http: TestClient, headers: dict[str, str], body: dict[str, Any], expected: str
) -> None:
    assert expected in error_of(http.post(JOBS, json=body, headers=headers))


def test_bad_allresults_example_names_its_field(
    http: TestClient, headers: dict[str, str], allresults: tuple[str, list[GradedSample]]
) -> None:
    text, _ = allresults
    bad = one_example_changed(text, prompt_id=7)
    message = error_of(http.post(JOBS, json={"kind": "import", "allresults_json": bad}, headers=headers))
    assert message.startswith("allresults_json field 'metadata.example_level_metadata[1].prompt_id'")
    unknown = one_example_changed(text, prompt_id="not-in-demo")
    body = {"kind": "import", "dataset": "demo", "allresults_json": unknown}
    assert "not-in-demo" in error_of(http.post(JOBS, json=body, headers=headers))
    body["allow_untagged"] = True  # kept without example tags
    assert http.post(JOBS, json=body, headers=headers).status_code == 201


def test_bad_label_line_names_the_line(http: TestClient, headers: dict[str, str]) -> None:
    text, _ = labels_of()
    lines = text.splitlines()
    lines[1] = lines[1].replace("true", '"yes"').replace("false", '"yes"')
    body = {"kind": "meta-eval-labels", "labels_jsonl": "\n".join(lines), "data_jsonl": META.read_text()}
    message = error_of(http.post(JOBS, json=body, headers=headers))
    assert message.startswith("labels_jsonl:2 field 'criteria_met'"), message
    assert http.get(JOBS, headers=headers).json()["pagination"]["total"] == 0  # nothing was created


def test_offline_jobs_through_the_real_service(
    tmp_path: Path, allresults: tuple[str, list[GradedSample]]
) -> None:
    text, samples = allresults
    labels, label_values = labels_of()
    store = str(tmp_path / "s.db")
    token = token_for(store, ["default"])
    with service_process(store) as service, Client(service.url, token=token) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="imp", kind="import", dataset="demo", allresults_json=text)
        jobs.create(name="lab", kind="meta-eval-labels", labels_jsonl=labels, data_jsonl=META.read_text())
        with pytest.raises(ServiceError) as refused:
            jobs.create(name="bad", kind="import", allresults_json="[]")
        assert refused.value.status == 422 and refused.value.message.startswith("allresults_json: expected")
        assert client.wait_until_done("imp", interval=0.1, timeout=60).status == "completed"
        assert client.wait_until_done("lab", interval=0.1, timeout=60).status == "completed"
        imported = jobs.results.metrics.download(name="imp")
        scored = jobs.results.metrics.download(name="lab")
    assert imported["overall_score"] == pytest.approx(
        score_run(samples).metrics()["overall_score"], abs=1e-12
    )
    _, records = load_meta_eval(data=META)
    assert scored == json_safe(dict(meta_metrics(records, label_values).metrics))
