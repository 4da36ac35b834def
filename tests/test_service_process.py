"""`healthbench serve` as a real uvicorn process on localhost: a job over HTTP to completion, both
documents checked against the scoring core, and `kill -9` mid-job with a restart that finishes it
with the same numbers and at most `concurrency` extra model calls."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from service_helpers import check_stored_against_core, roles, token_for
from support.process import fake_server_process
from support.service_process import LOOPBACK, service_process

from healthbench.client import Client, ServiceError
from healthbench.results.aggregate import aggregate_scores
from healthbench.runner.run import run_eval
from healthbench.service.operations import job_config
from healthbench.service.uploads import uploads_folder
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats


def test_job_over_http_to_completion(store_target: str) -> None:
    token = token_for(store_target, ["default"])
    with fake_server_process() as fake, service_process(store_target, *LOOPBACK) as service:
        with Client(service.url, token=token) as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="http1", limit=4, concurrency=8, max_retries=0, **roles(fake))
            final = client.wait_until_done("http1", interval=0.1, timeout=120)
            assert final.status == "completed", final.error
            assert [r.name for r in jobs.results.list(job="http1").data][:2] == [
                "aggregate-scores",
                "row-scores",
            ]
            aggregate = jobs.results.aggregate_scores.download(name="http1")
            rows = list(jobs.results.row_scores.download(name="http1"))
            with pytest.raises(ServiceError) as caught:
                jobs.list(workspace="other")
            assert caught.value.status == 403
        with Client(service.url, token="hb_bad") as bad, pytest.raises(ServiceError) as caught:
            bad.evaluation.benchmark_jobs.list()
        assert caught.value.status == 401
    check_stored_against_core(store_target, "default/http1", aggregate, rows)


@pytest.mark.slow
def test_kill_9_mid_job_then_restart_gives_the_same_numbers(tmp_path: Path) -> None:
    concurrency = 4
    store_path = str(tmp_path / "s.db")
    token = token_for(store_path, ["*"])
    with fake_server_process("--latency", "0.1") as fake:
        with service_process(store_path, "--lease", "1", *LOOPBACK) as service:
            client = Client(service.url, token=token)
            jobs = client.evaluation.benchmark_jobs
            reset_stats(fake)
            job = jobs.create(name="crash", repeats=4, concurrency=concurrency, max_retries=0, **roles(fake))
            deadline = time.monotonic() + 60
            while (done := jobs.get_status(name="crash").status_details).samples_done < 5:
                assert time.monotonic() < deadline, "the job made no progress"
                time.sleep(0.05)
            service.kill()
            assert done.criteria_done < done.criteria_total  # killed mid-job
            client.close()
        assert jobs_status(store_path, "crash") == "active"  # the dead process still holds it
        with (
            service_process(store_path, "--lease", "1", *LOOPBACK) as again,
            Client(again.url, token=token) as client,
        ):
            final = client.wait_until_done("crash", interval=0.1, timeout=120)
            assert final.status == "completed", final.error
            calls = fetch_stats(fake)["requests"]
            needed = final.status_details.samples_total + final.status_details.criteria_total
            assert needed <= calls <= needed + concurrency
            document = client.evaluation.benchmark_jobs.results.aggregate_scores.download(name="crash")
            logs = [e.message for e in client.evaluation.benchmark_jobs.get_logs(name="crash").data]
        # the log says what the CLI says after a crash: the bound of the calls made twice
        note = f"resumed after an interrupted session: at most {concurrency} calls repeated"
        assert logs.count(note) == 1, logs
        total = final.status_details.samples_total
        assert any(m.startswith(f"conversations sampled {total}/{total} · criteria graded") for m in logs)
        # the same job run in one go, without a crash, on a fresh store
        reference = Store(tmp_path / "reference.db")
        run_eval(
            job_config(job.spec | {"name": "crash"}, None, uploads_folder(reference)),
            store=reference,
            name="default/crash",
        )
        expected = aggregate_scores(reference, "default/crash")
        reference.close()
    assert document["metrics"] == expected["metrics"]


def jobs_status(store_path: str, name: str) -> str:
    store = Store(store_path)
    try:
        record = JobStore(store).get("default", name)
        assert record is not None
        return record.status
    finally:
        store.close()


@pytest.mark.slow
def test_two_service_processes_on_one_postgresql_run_each_job_once(pg_url: str) -> None:
    token = token_for(pg_url, ["*"])
    with (
        fake_server_process("--latency", "0.25") as fake,  # jobs long enough for both to take some
        service_process(pg_url, "--workers", "1", *LOOPBACK) as first,
        service_process(pg_url, "--workers", "1", *LOOPBACK) as second,
    ):
        reset_stats(fake)
        with Client(first.url, token=token) as client:
            jobs = client.evaluation.benchmark_jobs
            for n in range(6):  # a temperature per job: no job answers from another's cached calls
                jobs.create(name=f"j{n}", limit=2, max_retries=0, **roles(fake, temperature=0.01 * n))
        with Client(second.url, token=token) as client:
            finals = [client.wait_until_done(f"j{n}", interval=0.1, timeout=180) for n in range(6)]
            starts = [
                [e.message for e in client.evaluation.benchmark_jobs.get_logs(name=f"j{n}").data]
                for n in range(6)
            ]
        calls = fetch_stats(fake)["requests"]
    assert [f.status for f in finals] == ["completed"] * 6
    owners = [[m for m in log if m.startswith("job started by")] for log in starts]
    assert [len(o) for o in owners] == [1] * 6
    assert len({o[0] for o in owners}) == 2  # both processes took jobs
    needed = sum(f.status_details.samples_total + f.status_details.criteria_total for f in finals)
    assert calls == needed
