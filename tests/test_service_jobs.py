"""Jobs run by the service's workers, through `Client.local`, on SQLite and PostgreSQL: the result
documents against the scoring core, NeMo's access patterns, atomic claims, leases and secrets."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from service_helpers import RUN_RESULTS, check_stored_against_core, completed_job, roles
from support.process import fake_server_process

from healthbench.client import Client, ServiceError
from healthbench.service.jobs import JobWorkers, WorkerSettings
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats

SECRET = "sk-test-secret-0123456789"


@pytest.fixture(scope="module")
def fake() -> Any:
    with fake_server_process() as url:
        yield url


def test_local_client_job_end_to_end(store_target: str, fake: str) -> None:
    with Client.local(store_target) as client:
        jobs = client.evaluation.benchmark_jobs
        job = jobs.create(name="j1", limit=3, repeats=2, concurrency=4, max_retries=0, **roles(fake))
        assert job.status == "pending"
        final = completed_job(client, "j1")
        details = final.status_details
        assert (details.samples_done, details.samples_total, details.progress) == (6, 6, 100.0)
        assert details.criteria_done == details.criteria_total > 0 and details.ungraded == 0
        assert details.input_tokens > 0 and details.output_tokens > 0

        assert [r.name for r in jobs.results.list(name="j1").data] == RUN_RESULTS
        aggregate = jobs.results.aggregate_scores.download(name="j1")
        rows = list(jobs.results.row_scores.download(job="j1"))
        assert aggregate["job"] == "j1"
        check_stored_against_core(store_target, "default/j1", aggregate, rows)
        # NeMo's access patterns
        for metric in aggregate["metrics"]:
            for score in metric["aggregation"]["scores"]:
                assert metric["metric_ref"].startswith("healthbench/") and score["name"]
        frame = pd.json_normalize(
            aggregate["metrics"], record_path=["aggregation", "scores"], meta=["metric_ref"]
        )
        assert {"metric_ref", "name", "mean", "std_dev", "min", "max", "count"} <= set(frame.columns)
        overall = frame.set_index("name").loc["overall_score"]
        flat = pd.DataFrame(
            [
                {"prompt_id": r["item"]["prompt_id"], **{k: v[0]["value"] for k, v in r["metrics"].items()}}
                for r in rows
            ]
        )
        assert flat["healthbench/overall_score"].mean() == pytest.approx(overall["mean"])
        low = flat[flat["healthbench/overall_score"] < overall["mean"]]
        assert 0 < len(low) < len(flat) or flat["healthbench/overall_score"].nunique() == 1


def test_name_and_job_arguments(tmp_path: Path) -> None:
    with Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        with pytest.raises(TypeError, match="exactly one"):
            jobs.retrieve(name="a", job="a")
        with pytest.raises(ServiceError) as caught:
            jobs.retrieve(job="missing")
        assert caught.value.status == 404


def test_concurrent_claims_take_each_job_once(store_target: str) -> None:
    store = Store(store_target)
    jobs = JobStore(store)
    for n in range(20):
        jobs.create(f"id{n:02d}", "default", f"j{n}", {}, f"default/j{n}")
    claimed: dict[str, list[str]] = {"a": [], "b": [], "c": []}

    def take(owner: str) -> None:
        while (job := jobs.claim(owner, time.time(), 60.0)) is not None:
            claimed[owner].append(job.id)

    threads = [threading.Thread(target=take, args=(owner,)) for owner in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [j for ids in claimed.values() for j in ids]
    assert sorted(everything) == [f"id{n:02d}" for n in range(20)]
    store.close()


def test_an_expired_lease_is_claimed_again(store_target: str) -> None:
    store = Store(store_target)
    jobs = JobStore(store)
    jobs.create("id1", "default", "j1", {}, "default/j1")
    t0 = time.time()  # the claims are given their clock, so a slow machine cannot expire the lease early
    first = jobs.claim("a", t0, 0.2)
    assert first is not None and first.owner == "a"
    assert jobs.claim("b", t0 + 0.1, 0.2) is None
    again = jobs.claim("b", t0 + 0.3, 10.0)
    assert again is not None and again.owner == "b" and again.status == "active"
    assert jobs.renew("id1", "a", t0 + 10) is None  # the dead worker lost it
    store.close()


def test_two_worker_pools_run_each_job_once(store_target: str, fake: str) -> None:
    store = Store(store_target)
    reset_stats(fake)  # each job's calls are new (no cache hit): the server counts every call made
    with Client.local(store, workers=2) as client, JobWorkers(store, WorkerSettings(workers=2)):
        jobs = client.evaluation.benchmark_jobs
        for n in range(4):
            jobs.create(name=f"j{n}", limit=2, max_retries=0, **roles(fake, temperature=0.01 * n))
        finals = [client.wait_until_done(f"j{n}", interval=0.1, timeout=120) for n in range(4)]
        assert [f.status for f in finals] == ["completed"] * 4
        starts = [
            [e.message for e in jobs.get_logs(name=f"j{n}").data if e.message.startswith("job started")]
            for n in range(4)
        ]
        assert [len(s) for s in starts] == [1, 1, 1, 1]
        expected = sum(f.status_details.samples_total + f.status_details.criteria_total for f in finals)
    assert fetch_stats(fake)["requests"] == expected
    store.close()


def test_cancel_a_running_job(tmp_path: Path) -> None:
    with fake_server_process("--latency", "0.3") as slow, Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="slow", repeats=4, concurrency=2, max_retries=0, **roles(slow))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # running, its work counted (not only marked active)
            status = jobs.get_status(name="slow")
            if status.status == "active" and status.status_details.samples_total > 0:
                break
            time.sleep(0.05)
        assert jobs.cancel(name="slow").status in ("cancelling", "cancelled")  # its worker may be quick
        final = client.wait_until_done("slow", interval=0.1, timeout=60)
        assert final.status == "cancelled"
        assert final.status_details.samples_done < final.status_details.samples_total == 32
        events = [e.message for e in jobs.get_logs(name="slow").data]
        assert [m for m in events if not m.startswith("conversations sampled ")][-2:] == [
            "cancel requested",
            "job cancelled",
        ]
        with pytest.raises(ServiceError, match="cancelled"):
            jobs.results.aggregate_scores.download(name="slow")
        jobs.delete(name="slow")
        assert jobs.list().pagination.total == 0


def test_provider_keys_never_reach_jobs_logs_or_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with fake_server_process("--require-api-key", SECRET) as keyed:
        spec = {"spec": "openai/fake-model", "base_url": keyed}
        with Client.local(tmp_path / "s.db") as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="k", limit=2, max_retries=0, model=spec, judge=spec)
            assert client.wait_until_done("k", interval=0.1, timeout=120).status == "completed"
            seen = [
                jobs.retrieve(name="k").model_dump_json(),
                jobs.get_logs(name="k").model_dump_json(),
                str(jobs.results.aggregate_scores.download(name="k")),
                str(list(jobs.results.row_scores.download(name="k"))),
            ]
    assert all(SECRET not in text for text in seen)
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*") if p.is_file())
    assert SECRET.encode() not in raw
