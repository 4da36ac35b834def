"""Shared by the job-service tests: an in-process service (`service`, `http` fixtures, registered in
conftest), tokens, job specs on the fake server, and the check of both result documents against the
scoring core."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from healthbench.client import Client
from healthbench.results.views import RunView
from healthbench.scoring.run_score import score_run
from healthbench.service.app import create_app
from healthbench.service.auth import create_token
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobStatus
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store

if TYPE_CHECKING:  # imported when used: starlette's TestClient warns at import in every test run
    from fastapi.testclient import TestClient

# the results of a job that makes (or imports) a run, in the order the service lists them
RUN_RESULTS = ["aggregate-scores", "row-scores", "allresults", "metrics"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[JobService]:
    """A job service on a new SQLite store in ``tmp_path / "s.db"``; no worker runs."""
    store = Store(tmp_path / "s.db")
    yield JobService(store)
    store.close()


@pytest.fixture
def http(service: JobService) -> TestClient:
    """`service` over HTTP, in-process (ASGI); server errors come back as responses."""
    from fastapi.testclient import TestClient

    return TestClient(create_app(service), raise_server_exceptions=False)


def token_for(store_target: str, workspaces: list[str]) -> str:
    with closing(Store(store_target)) as store:
        return create_token(JobStore(store), workspaces)


def completed_job(client: Client, name: str, timeout: float = 120) -> JobStatus:
    """The status of job ``name`` once it is done; fails with the job's logs unless it completed."""
    final = client.wait_until_done(name, interval=0.1, timeout=timeout)
    assert final.status == "completed", client.evaluation.benchmark_jobs.get_logs(name=name)
    return final


def roles(url: str, temperature: float | None = None) -> dict[str, Any]:
    """Candidate and judge on the fake server (a temperature makes calls that no other job cached)."""
    settings = {"temperature": temperature} if temperature is not None else {}
    return {
        "model": {"spec": "cand", "base_url": url, "settings": settings},
        "judge": {"spec": "judge", "base_url": url, "settings": settings},
    }


def assert_close(a: float | None, b: float | None) -> None:
    assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12, abs=1e-12), (a, b)


def check_against_core(store: Store, run_name: str, aggregate: dict, rows: list[dict]) -> None:
    """Every number of both documents, recomputed from the stored verdicts by the scoring core."""
    view = RunView.open(store, run_name)
    samples = view.graded_samples()
    core = score_run(samples, view.scoring_options())
    assert len(rows) == len(samples) == len(core.per_sample)
    columns: dict[str, list[float]] = {}
    for row, sample, values in zip(rows, samples, core.per_sample, strict=True):
        assert row["item"]["prompt_id"] == sample.conversation.prompt_id
        assert row["sample"]["output_text"] == sample.completion
        assert values is not None
        assert {ref: entries[0]["value"] for ref, entries in row["metrics"].items()} == {
            f"healthbench/{k}": v for k, v in values.items()
        }
        for key, value in values.items():
            columns.setdefault(key, []).append(value)
    by_key = {
        m["metric_ref"].removeprefix("healthbench/"): m["aggregation"]["scores"][0]
        for m in aggregate["metrics"]
    }
    assert set(by_key) == set(columns)
    for key, column in columns.items():
        score, stats = by_key[key], core.stats[key]
        values = np.asarray(column)
        assert score["name"] == key and score["count"] == len(column)
        for field, expected in (
            ("mean", values.mean()),
            ("min", values.min()),
            ("max", values.max()),
            ("sum", values.sum()),
            ("std_dev", values.std()),
            ("score", stats.mean),
            ("bootstrap_std", stats.bootstrap_std),
            ("ci_lower", stats.ci_lower),
            ("ci_upper", stats.ci_upper),
        ):
            assert_close(score[field], float(expected))


def check_stored_against_core(store_target: str, run_name: str, aggregate: dict, rows: list[dict]) -> None:
    """`check_against_core` on the store at ``store_target`` (opened and closed here)."""
    with closing(Store(store_target)) as store:
        check_against_core(store, run_name, aggregate, rows)
