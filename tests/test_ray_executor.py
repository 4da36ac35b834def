"""`--executor ray`: the same work as the local engine on a Ray Data pipeline, the same numbers.

One local Ray per test session (`ray_cluster`); every test here skips when Ray is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_engine import demo, expected_samples
from typer.testing import CliRunner

from healthbench.cli import app
from healthbench.config import build_config
from healthbench.data.schema import Conversation
from healthbench.data.sources import read_records
from healthbench.errors import ConfigError
from healthbench.executors import ray as ray_executor
from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import resume_run, run_eval
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats
from healthbench.testing.process import GARBAGE_JUDGE, fake_server_process, free_port

FAST_RETRY = {"max_retries": 12, "initial_delay": 0.01, "max_delay": 0.05}
HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install 'healthbench[ray]')")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """One local Ray for the whole session; yields its address for drivers in other processes."""
    if not HAS_RAY:
        pytest.skip("Ray is not installed (pip install 'healthbench[ray]')")
    import ray

    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield str(context.address_info["address"])
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with fake_server_process() as url:
        yield url


def config(url: str, executor: str = "ray", **extra: Any):
    layer: dict[str, Any] = {
        "model": {"spec": "fake-candidate", "base_url": url},
        "judge": {"spec": "fake-judge", "base_url": url},
        "retry": FAST_RETRY,
        "executor": executor,
    }
    layer.update(extra)
    return build_config(layer)


def calls(url: str) -> int:
    return int(fetch_stats(url)["requests"])


def test_without_ray_the_executor_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install 'healthbench\[ray\]'"):
        ray_executor.require_ray()
    result = CliRunner().invoke(app, ["run", "--executor", "ray", "--limit", "1"])
    assert result.exit_code != 0
    assert "pip install 'healthbench[ray]'" in result.output
    assert "Traceback" not in result.output


def test_a_provider_ray_cannot_call_is_refused(server: str) -> None:
    cfg = build_config({"model": {"spec": "local/whatever.gguf"}, "executor": "ray"})
    assert cfg.model is not None
    with pytest.raises(ConfigError, match="OpenAI-compatible"):
        ray_executor.endpoint_for(cfg.model.parsed(), cfg.model.settings, cfg, {})


def test_request_bodies_are_the_local_engines(server: str) -> None:
    cfg = config(server, requests_per_minute=600)
    assert cfg.model is not None
    endpoint = ray_executor.endpoint_for(cfg.model.parsed(), cfg.model.settings, cfg, {})
    messages = [{"role": "user", "content": "hi"}]
    from healthbench.models.openai import OpenAIChatModel

    local = OpenAIChatModel(cfg.model.parsed(), cfg.model.settings, api_key=None)
    assert endpoint.body(messages, None) == local.build_body(messages, None)
    assert endpoint.qps == 10
    assert endpoint.max_retries == 12
    assert (endpoint.batch_size, endpoint.concurrency) == (64, 1)  # default 64 connections: one actor


@needs_ray
def test_demo_on_ray_equals_the_core_and_a_repeat_calls_nothing(
    ray_cluster: str, server: str, store_target: str
) -> None:
    store = Store(store_target)
    reset_stats(server)
    outcome = run_eval(config(server), store=store, name="ray-demo")
    criteria = sum(len(c.rubrics) for c in demo())
    assert outcome.run.status == "finished"
    assert outcome.counters.calls == calls(server) == len(demo()) + criteria
    assert outcome.counters.input_tokens > 0 and outcome.counters.output_tokens > 0
    assert score_stored_run(store, outcome.run).metrics() == score_run(expected_samples(demo())).metrics()
    again = run_eval(config(server), store=store, name="ray-demo")
    assert calls(server) == outcome.counters.calls  # nothing left: no call
    assert again.counters.calls == 0
    # a new run with the same requests is answered from the call cache, on Ray too
    fresh = run_eval(config(server), store=store, name="ray-demo-2")
    assert fresh.counters.calls == 0 and fresh.counters.cache_hits == len(demo()) + criteria
    assert calls(server) == outcome.counters.calls


@needs_ray
def test_unparseable_judge_stays_ungraded_then_resumes(ray_cluster: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    n_criteria = sum(len(c.rubrics) for c in demo())
    port = free_port()
    with fake_server_process(*GARBAGE_JUDGE, port=port) as url:
        outcome = run_eval(config(url, judge_retries=1), store=store, name="g")
        assert fetch_stats(url)["judge"] == n_criteria * 2  # asked twice (one re-ask), then ungraded
    assert outcome.run.status == "incomplete"
    assert outcome.counters.ungraded == n_criteria
    grades = store.grade_progress(outcome.run.id)
    assert {status for status, _ in grades.values()} == {"ungraded"}
    assert {attempts for _, attempts in grades.values()} == {2}
    with fake_server_process(port=port) as url:
        resumed = resume_run("g", store=store)
        stats = fetch_stats(url)
    assert (stats["candidate"], stats["judge"]) == (0, n_criteria)
    assert resumed.run.status == "finished"
    assert score_stored_run(store, resumed.run).metrics() == score_run(expected_samples(demo())).metrics()


@needs_ray
@pytest.mark.shared
def test_shared_527_on_ray_equals_the_local_engine(
    ray_cluster: str, shared_data: Path, tmp_path: Path
) -> None:
    data = shared_data / "eval" / "oss_eval_sample527.jsonl"
    conversations = read_records(data, Conversation)
    options = ScoringOptions()
    with fake_server_process() as url:
        local_store, ray_store = Store(tmp_path / "local.db"), Store(tmp_path / "ray.db")
        extra = {"dataset": "full", "data": str(data), "max_connections": 128}
        local = run_eval(config(url, "local", **extra), store=local_store, name="e2e")
        reset_stats(url)
        on_ray = run_eval(config(url, **extra), store=ray_store, name="e2e")
        assert calls(url) == on_ray.counters.calls == 527 + sum(len(c.rubrics) for c in conversations)
        again = run_eval(config(url, **extra), store=ray_store, name="e2e")
        assert again.counters.calls == 0 and calls(url) == on_ray.counters.calls
    want = score_run(expected_samples(conversations), options).metrics()
    assert score_stored_run(ray_store, on_ray.run, options).metrics() == want
    assert score_stored_run(local_store, local.run, options).metrics() == want
    assert (on_ray.counters.input_tokens, on_ray.counters.output_tokens) == (
        local.counters.input_tokens,
        local.counters.output_tokens,
    )


@needs_ray
@pytest.mark.shared
def test_killed_driver_resumes_with_the_same_metrics(
    ray_cluster: str, shared_data: Path, tmp_path: Path
) -> None:
    data = shared_data / "eval" / "oss_eval_sample527.jsonl"
    conversations = read_records(data, Conversation)
    total = 527 + sum(len(c.rubrics) for c in conversations)
    db = tmp_path / "kill.db"
    with fake_server_process("--latency", "0.01") as url:
        command = [
            sys.executable, "-m", "healthbench", "run", "--data", str(data),
            "--model", "cand", "--base-url", url, "--judge", "judge", "--judge-base-url", url,
            "--name", "kill", "--store", str(db), "--executor", "ray", "--ray-address", ray_cluster,
        ]  # fmt: skip
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = Store(db)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            run = store.get_run("kill") if db.exists() else None
            if run is not None and len(store.grade_progress(run.id)) > 500:
                break
            time.sleep(0.2)
        assert driver.poll() is None, "the driver ended before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        before = calls(url)
        assert 0 < before < total
        resumed = resume_run("kill", store=store, overrides={"executor": "ray"})
        extra = calls(url) - total
    want = score_run(expected_samples(conversations)).metrics()
    assert score_stored_run(store, resumed.run).metrics() == want
    assert resumed.run.status == "finished"
    # lost: what Ray had answered or had in flight, uncommitted; the driver feeds Ray only while that
    # stays within the in-flight budget (2 batches of 64 at the default 64 connections), and says so
    assert resumed.counters.repeat_bound == 128
    print(f"calls repeated after the kill: {extra} of {total} (bound {resumed.counters.repeat_bound})")
    assert 0 <= extra <= resumed.counters.repeat_bound
