"""`--executor ray`: the same work as the local engine on a Ray Data pipeline, the same numbers.

One local Ray per test session (`ray_cluster`); every test here skips when Ray is not installed.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from service_helpers import completed_job, roles
from support.fake_runs import FAKE_CANDIDATE, FAKE_JUDGE, fake_run_config
from support.process import GARBAGE_JUDGE, fake_server_process, free_port
from test_engine import demo, expected_samples
from typer.testing import CliRunner

from healthbench.cli import app
from healthbench.client import Client, ServiceError
from healthbench.config import build_config
from healthbench.data.schema import Conversation
from healthbench.data.sources import read_records
from healthbench.errors import ConfigError, RunError
from healthbench.executors import ray as ray_executor
from healthbench.executors.vllm import VllmEndpoint, vllm_answer_row, vllm_input_row
from healthbench.models.tally import CallTally
from healthbench.results.run_results import run_metrics, score_stored_run, scored_run
from healthbench.results.views import RunView
from healthbench.runner.run import resume_run, run_eval
from healthbench.scoring.run_score import score_run
from healthbench.store import Store
from healthbench.store.runs import RunRecord
from healthbench.testing.fake_server import fetch_stats, reset_stats
from healthbench.testing.fake_vllm import fake_vllm_engine

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install 'healthbench[ray]')")
pytestmark = pytest.mark.xdist_group("ray")  # every test here on one worker: one local Ray, not two


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


class Fragment(NamedTuple):
    """The 527-conversation shared fragment: its path, conversations and the calls a run makes."""

    path: Path
    conversations: list[Conversation]
    calls: int


@pytest.fixture(scope="module")
def fragment(shared_data: Path) -> Fragment:
    data = shared_data / "eval" / "oss_eval_sample527.jsonl"
    conversations = read_records(data, Conversation)
    return Fragment(data, conversations, len(conversations) + sum(len(c.rubrics) for c in conversations))


N_REPEATS_KILLED = 2  # two pages of the plan (a page holds one repeat)


@pytest.fixture(scope="module")
def fragment_head(fragment: Fragment, tmp_path_factory: pytest.TempPathFactory) -> Fragment:
    """The first 40 conversations of the fragment (~540 calls a repeat): enough for a kill mid-run."""
    path = tmp_path_factory.mktemp("head") / "head40.jsonl"
    lines = fragment.path.read_text(encoding="utf-8").splitlines(keepends=True)[:40]
    path.write_text("".join(lines), encoding="utf-8")
    conversations = read_records(path, Conversation)
    return Fragment(path, conversations, len(conversations) + sum(len(c.rubrics) for c in conversations))


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


@needs_ray
def test_a_process_joined_to_one_ray_refuses_a_run_naming_another(ray_cluster: str) -> None:
    """Ray's connection is one per process: a run naming another cluster is refused in one line rather
    than sent to the Ray this process has; the Ray it is connected to, named as its GCS, is joined."""
    with pytest.raises(RunError) as refused:
        ray_executor.join_ray("127.0.0.1:1", timeout=2)
    assert str(refused.value) == (
        f"cannot join the Ray cluster at 127.0.0.1:1: this process is already connected to Ray at "
        f"{ray_cluster} (one Ray connection per process)"
    )
    assert ray_executor.join_ray(ray_cluster) is False  # already connected there: nothing started


def test_a_provider_ray_cannot_call_is_refused(server: str) -> None:
    cfg = build_config({"model": {"spec": "local/whatever.gguf"}, "executor": "ray"})
    assert cfg.model is not None
    with pytest.raises(ConfigError, match="OpenAI-compatible"):
        ray_executor.endpoint_for(cfg.model.parsed(), cfg.model.settings, cfg, {})


def test_request_bodies_are_the_local_engines(server: str) -> None:
    cfg = fake_run_config(server, requests_per_minute=600, executor="ray")
    assert cfg.model is not None
    endpoint = ray_executor.endpoint_for(cfg.model.parsed(), cfg.model.settings, cfg, {})
    messages = [{"role": "user", "content": "hi"}]
    from healthbench.models.openai import OpenAIChatModel

    local = OpenAIChatModel(cfg.model.parsed(), cfg.model.settings, api_key=None)
    assert endpoint.body(messages, None) == local.build_body(messages, None)
    assert endpoint.qps == 10
    assert endpoint.retry.max_retries == 12
    assert (endpoint.batch_size, endpoint.concurrency) == (64, 1)  # default 64 connections: one actor


@needs_ray
def test_demo_on_ray_equals_the_core_and_a_repeat_calls_nothing(
    ray_cluster: str, server: str, store_target: str
) -> None:
    store = Store(store_target)
    reset_stats(server)
    outcome = run_eval(fake_run_config(server, executor="ray"), store=store, name="ray-demo")
    criteria = sum(len(c.rubrics) for c in demo())
    assert outcome.run.status == "finished"
    assert outcome.counters.tally.made == calls(server) == len(demo()) + criteria
    assert outcome.counters.tally.input_tokens > 0 and outcome.counters.tally.output_tokens > 0
    # a single judge is a panel of one: its calls are counted as the member's, as the local engine does
    assert list(outcome.counters.members) == [FAKE_JUDGE]
    assert outcome.counters.members[FAKE_JUDGE] == outcome.counters.judge
    assert outcome.counters.judge.made == criteria
    assert score_stored_run(store, outcome.run).metrics() == score_run(expected_samples(demo())).metrics()
    again = run_eval(fake_run_config(server, executor="ray"), store=store, name="ray-demo")
    assert calls(server) == outcome.counters.tally.made  # nothing left: no call
    assert again.counters.tally.made == 0
    # a new run with the same requests is answered from the call cache, on Ray too
    fresh = run_eval(fake_run_config(server, executor="ray"), store=store, name="ray-demo-2")
    assert fresh.counters.tally.made == 0 and fresh.counters.tally.cached_calls == len(demo()) + criteria
    assert fresh.counters.members[FAKE_JUDGE].cached_calls == criteria
    assert calls(server) == outcome.counters.tally.made


PANEL = ["judge-a-err10", "judge-b-err20", "judge-c-err30"]  # the fake's judges of known error rates


def metrics_of(store: Store, run: RunRecord) -> dict[str, Any]:
    """The run's metrics document, as ``--metrics-out`` writes it."""
    view = RunView.of(store, run)
    return run_metrics(view, scored_run(view))


def tallied(tally: CallTally) -> tuple[Any, ...]:
    """A tally's counts and tokens exactly, its cost (and cost by kind) to rounding: the sums' order
    follows the calls' order."""
    parts = {kind: pytest.approx(dollars) for kind, dollars in tally.cost_parts.items()}
    counts = (tally.calls, tally.cached_calls, tally.failed_calls, tally.unpriced_calls, tally.tokens)
    return (*counts, pytest.approx(tally.cost), parts)


@needs_ray
def test_a_panel_on_ray_stores_counts_and_scores_as_on_the_local_engine(
    ray_cluster: str, server: str, tmp_path: Path
) -> None:
    """Three judges that disagree (`-errNN`: each flips the truth on its own prompts): on Ray as on the
    local engine, exactly one call per criterion and member, the same grade row per (item, repeat,
    criterion, member), the same counters per member (calls, tokens, cost: two members priced) and the
    same metrics, the panel's and each member's."""
    prices = tmp_path / "prices.json"
    priced = {
        "openai/judge-a-err10": {"input": 1, "output": 2},
        "openai/judge-b-err20": {"input": 3, "output": 5},
    }
    prices.write_text(json.dumps(priced))
    members = [{"spec": label, "base_url": server} for label in PANEL]
    criteria = sum(len(c.rubrics) for c in demo())
    outcomes, stores, stats = {}, {}, {}
    for executor in ("local", "ray"):
        stores[executor] = Store(tmp_path / f"{executor}.db")
        config = fake_run_config(server, judge=None, judges=members, executor=executor, prices=str(prices))
        reset_stats(server)
        outcomes[executor] = run_eval(config, store=stores[executor], name="panel")
        stats[executor] = fetch_stats(server)
    local, on_ray = outcomes["local"], outcomes["ray"]
    assert on_ray.run.status == "finished"
    assert (stats["ray"]["candidate"], stats["ray"]["judge"]) == (len(demo()), len(PANEL) * criteria)
    assert (stats["local"]["candidate"], stats["local"]["judge"]) == (len(demo()), len(PANEL) * criteria)

    def graded(executor: str) -> dict[Any, Any]:
        rows = stores[executor].load_grades(outcomes[executor].run.id)
        return {k: (r.status, r.explanation, r.usage, r.cost, r.attempts) for k, r in rows.items()}

    assert graded("ray") == graded("local")
    assert len(graded("ray")) == len(PANEL) * criteria and {k[3] for k in graded("ray")} == set(PANEL)
    assert list(on_ray.counters.members) == PANEL  # asked member after member, the chair first
    counted = {e: {m: tallied(t) for m, t in o.counters.members.items()} for e, o in outcomes.items()}
    assert counted["ray"] == counted["local"]
    assert tallied(on_ray.counters.judge) == tallied(local.counters.judge)
    assert all(on_ray.counters.members[m].made == criteria for m in PANEL)
    assert on_ray.counters.judge.made == len(PANEL) * criteria
    costs = [on_ray.counters.members[m].cost for m in PANEL]
    assert costs[0] > 0 and costs[1] > costs[0] and costs[2] == 0.0
    assert on_ray.counters.members[PANEL[2]].unpriced_calls == criteria
    metrics = {e: metrics_of(stores[e], outcomes[e].run) for e in outcomes}
    # the metrics document (--metrics-out): panel and members' keys exactly, costs to rounding
    assert metrics["ray"] == pytest.approx(metrics["local"], rel=1e-12, abs=1e-15)
    own = [metrics["ray"][f"judge:{m}:overall_score"] for m in PANEL]
    assert len(set(own)) == len(PANEL)  # the members disagree: three scores, not one number thrice
    assert metrics["ray"]["overall_score"] == metrics["local"]["overall_score"]
    assert 0 < metrics["ray"]["judge_agreement"] < 1 and metrics["ray"]["cost_usd:judge"] is None


@needs_ray
def test_unparseable_judge_stays_ungraded_then_resumes(ray_cluster: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    n_criteria = sum(len(c.rubrics) for c in demo())
    port = free_port()
    with fake_server_process(*GARBAGE_JUDGE, port=port) as url:
        outcome = run_eval(fake_run_config(url, judge_retries=1, executor="ray"), store=store, name="g")
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


FAILING = ("paracetamol with my amoxicillin", "Mentions zinc supplementation")  # demo-0007, one criterion


def failed_calls(store: Store, run_id: int) -> tuple[set[tuple[str, int]], dict[tuple[str, int, int], str]]:
    """The samples stored without a completion, and every grade's status."""
    missing = {(item, 0) for item, _ in store.load_items(run_id)} - set(store.sample_progress(run_id))
    return missing, {key: status for key, (status, _) in store.grade_progress(run_id).items()}


def observed_figures(role: str, model: str) -> dict[str, float]:
    """This process's Prometheus figures of ``role`` (service/metrics.py's registry): calls by outcome,
    tokens by type, timed calls."""
    from healthbench.service.metrics import OUTCOMES, REGISTRY, TOKEN_TYPES

    labels = {"role": role, "provider": "openai", "model": model}

    def value(name: str, **more: str) -> float:
        return REGISTRY.get_sample_value(name, {**labels, **more}) or 0.0

    figures = {o: value("healthbench_model_calls_total", outcome=o) for o in OUTCOMES}
    figures |= {t: value("healthbench_model_tokens_total", type=t) for t in TOKEN_TYPES}
    figures["timed"] = value("healthbench_model_call_duration_seconds_count")
    return figures


@needs_ray
def test_failed_calls_are_stored_like_the_local_engine_and_every_call_counted_and_traced(
    ray_cluster: str, tmp_path: Path
) -> None:
    """One conversation whose candidate call always fails, one criterion whose judge call always does:
    on Ray as on the local engine, a failed sample and an ungraded criterion, the rest graded, the run
    incomplete. The Ray run tells the engine's one observer (Prometheus metrics and OpenTelemetry spans)
    of every call: calls by outcome, retries, tokens and timed calls equal what the fake server answered
    and billed, with one CLIENT span per call inside the run's span. Against a healthy server, a new run
    with the same requests counts those answered before as cached, not as model calls, and makes no span
    for them (it asks only what failed: a sample, and so its criteria, and one criterion); then --resume
    of the first run finds the sample and its criteria in the call cache, asks the ungraded criterion
    anew (one call) and ends with the core's metrics."""
    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    from healthbench.executors.progress import observing
    from healthbench.service.metrics import MetricsObserver
    from healthbench.telemetry import configure

    exporter = InMemorySpanExporter()
    tracing = configure(exporter=exporter)
    observer = observing(MetricsObserver(), tracing.observer())
    models = {"candidate": "fake-candidate", "judge": "fake-judge"}
    retry = {"max_retries": 2, "initial_delay": 0.01, "max_delay": 0.05}
    faults = [arg for marker in FAILING for arg in ("--fail-containing", marker)]
    stores = {name: Store(tmp_path / f"{name}.db") for name in ("local", "ray")}
    figures, port = [], free_port()  # the same URL: the same call-cache keys
    for name, server_args in (("first", faults), ("again", [])):
        with fake_server_process(*server_args, port=port) as url:
            if name == "first":
                local = run_eval(fake_run_config(url, retry=retry), store=stores["local"], name="f")
                assert fetch_stats(url)["faults"]["server_error"] == 2 * 3  # 2 calls × 3 tries
                reset_stats(url)
            before = {role: observed_figures(role, model) for role, model in models.items()}
            with tracing.span("healthbench run"):
                config = fake_run_config(url, executor="ray", retry=retry)
                run_name = "f" if name == "first" else name
                outcome = run_eval(config, store=stores["ray"], name=run_name, observer=observer)
            after = {role: observed_figures(role, model) for role, model in models.items()}
            delta = {r: {k: after[r][k] - before[r][k] for k in after[r]} for r in models}
            figures.append((delta, fetch_stats(url), list(exporter.get_finished_spans())))
            exporter.clear()
            if name == "first":
                on_ray, failed = outcome, failed_calls(stores["ray"], outcome.run.id)
            else:  # the first run resumed: what it lacks, the second run has just asked
                resumed = resume_run("f", store=stores["ray"])
                stats = fetch_stats(url)  # one further call: the ungraded criterion, asked anew
                asked = figures[-1][1]
                assert (stats["candidate"], stats["judge"]) == (asked["candidate"], asked["judge"] + 1)
    for run in (local, on_ray):
        assert run.run.status == "incomplete"
        assert (run.counters.samples_failed, run.counters.ungraded) == (1, 1)
    assert failed == failed_calls(stores["local"], local.run.id)
    assert failed[0] == {("demo-0007", 0)}
    assert sorted(key[:3] for key, status in failed[1].items() if status == "ungraded") == [
        ("demo-0006", 0, 2)
    ]
    # the failed sample and its criteria from the call cache; the ungraded criterion with a new key
    # (its next attempt: not answered by the failure that left it ungraded)
    assert resumed.counters.tally.made == 1
    assert resumed.counters.tally.cached_calls == 1 + len(demo()[6].rubrics)
    assert resumed.run.status == "finished"
    want = score_run(expected_samples(demo())).metrics()
    assert score_stored_run(stores["ray"], resumed.run).metrics() == want

    (first, billed, spans), (again, billed_again, spans_again) = figures
    assert billed["faults"]["server_error"] == 2 * 3
    for role in models:
        asked, failed_call = first[role], 1  # one call of each role fails after 1 + 2 attempts
        assert billed[role] == asked["ok"] + 3 * failed_call
        assert (asked["failed"], asked["retried"], asked["rate_limited"], asked["cached"]) == (1, 2, 0, 0)
        assert asked["timed"] == asked["ok"] + failed_call
        for kind in ("input", "cached_input", "cache_write_input", "output"):
            assert asked[kind] == billed["billed"][role][f"{kind}_tokens"], (role, kind)
        assert asked["input"] > 0 and asked["output"] > 0
        # the second run (a healthy server): what was answered before comes from the call cache
        assert (again[role]["cached"], again[role]["ok"]) == (asked["ok"], billed_again[role])
        assert again[role]["input"] == billed_again["billed"][role]["input_tokens"]
    (run_span,) = [s for s in spans if s.name == "healthbench run"]
    call_spans = [s for s in spans if s is not run_span]
    for role, model in models.items():
        mine = [s for s in call_spans if (s.attributes or {})["healthbench.role"] == role]
        assert len(mine) == first[role]["ok"] + 1 and {s.name for s in mine} == {f"chat {model}"}
        assert all(s.kind is SpanKind.CLIENT and s.parent is not None for s in mine)
        assert {s.parent.span_id for s in mine if s.parent is not None} == {run_span.context.span_id}
        (failed_span,) = [s for s in mine if s.status.status_code is StatusCode.ERROR]
        assert (failed_span.attributes or {})["error.type"] == "ModelError"
        tokens = sum(int((s.attributes or {}).get("gen_ai.usage.input_tokens", 0)) for s in mine)
        assert tokens == billed["billed"][role]["input_tokens"]
        assert all(
            s.end_time is not None and s.start_time is not None and s.end_time > s.start_time for s in mine
        )
    verdicts = [e for s in call_spans for e in s.events if e.name == "gen_ai.evaluation.result"]
    assert len(verdicts) == first["judge"]["ok"]  # every judge answer here is a final verdict
    # the second run: the run's span and one span per call asked (none for the cached answers)
    assert len(spans_again) == 1 + billed_again["requests"] == 1 + 1 + 1 + len(demo()[6].rubrics)
    tracing.shutdown()


FAULTS = ("--fault-rate", "0.2", "--retry-after", "0.05")  # 429 (Retry-After 0.05 s), 500, 503, bad JSON


def stored_rows(store: Store, run_id: int) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """What a run stored that must not depend on faults: each sample's completion, each grade's status."""
    samples = store.sample_progress(run_id)
    grades = {key: status for key, (status, _) in store.grade_progress(run_id).items()}
    return samples, grades


def answered_once(url: str) -> int:
    """Calls the server answered without a fault: every needed call exactly once when nothing is repeated
    (bad judge JSON is a fault: its re-ask is a further call)."""
    stats = fetch_stats(url)
    return int(stats["requests"]) - int(stats["faults_total"])


@needs_ray
def test_under_faults_ray_stores_the_local_rows_and_keeps_up(ray_cluster: str, tmp_path: Path) -> None:
    """20% injected faults: Ray and local store the same rows and the exact metrics, each makes every
    call once plus one retry per fault (Ray's stage adds none: the session retries), and the faulty Ray
    run takes at most 3x its clean run (Ray's stage serialized the backoffs: ~10x)."""
    needed = len(demo()) + sum(len(c.rubrics) for c in demo())
    want = score_run(expected_samples(demo())).metrics()
    rows, seconds = {}, {}
    for name, faults in (("local", FAULTS), ("ray", FAULTS), ("clean", ())):
        store = Store(tmp_path / f"{name}.db")
        executor = "local" if name == "local" else "ray"
        with fake_server_process(*faults) as url:
            started = time.perf_counter()
            outcome = run_eval(
                fake_run_config(url, executor=executor, judge_retries=6), store=store, name=name
            )
            seconds[name] = time.perf_counter() - started
            assert answered_once(url) == needed, name
            if faults:
                assert fetch_stats(url)["faults_total"] > 0
        assert outcome.run.status == "finished", name
        assert score_stored_run(store, outcome.run).metrics() == want, name
        rows[name] = stored_rows(store, outcome.run.id)
    assert rows["ray"] == rows["local"] == rows["clean"]
    print(f"demo on Ray: clean {seconds['clean']:.1f} s, 20% faults {seconds['ray']:.1f} s")
    assert seconds["ray"] <= 3 * seconds["clean"]


def _fake_vllm_processor(self: VllmEndpoint) -> Any:
    """The vLLM processor's shape (request rows in, answer rows out) with the GPU engine replaced by
    `fake_vllm_engine`, which answers as the fake server does."""
    answer = functools.partial(vllm_answer_row, model=self.spec.model)
    return lambda dataset: dataset.map(vllm_input_row).map(fake_vllm_engine).map(answer)


@needs_ray
def test_vllm_candidate_rows_give_the_same_samples_and_metrics(
    ray_cluster: str, server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything but the GPU engine: request rows, the pipeline, answer rows parsed into the same
    sample rows (text and tokens) as the HTTP path, the judge over HTTP, the same metrics."""
    monkeypatch.setattr(VllmEndpoint, "processor", _fake_vllm_processor)
    stores = {kind: Store(tmp_path / f"{kind}.db") for kind in ("http", "vllm")}
    http = run_eval(fake_run_config(server, executor="ray"), store=stores["http"], name="v")
    cfg = fake_run_config(server, vllm_engine_args={"max_model_len": 4096}, executor="ray")
    layer = cfg.model_dump(mode="json") | {"model": {"spec": "vllm/fake-candidate"}}
    on_vllm = run_eval(build_config(layer), store=stores["vllm"], name="v")
    assert on_vllm.run.status == "finished" and on_vllm.counters.tally.made == http.counters.tally.made
    assert on_vllm.run.config["run"]["vllm_engine_args"] == {"max_model_len": 4096}
    assert (on_vllm.counters.tally.input_tokens, on_vllm.counters.tally.output_tokens) == (
        http.counters.tally.input_tokens,
        http.counters.tally.output_tokens,
    )
    assert stores["vllm"].sample_progress(on_vllm.run.id) == stores["http"].sample_progress(http.run.id)
    want = score_run(expected_samples(demo())).metrics()
    assert score_stored_run(stores["vllm"], on_vllm.run).metrics() == want


@needs_ray
def test_a_service_job_on_ray_equals_a_local_engine_job(
    ray_cluster: str, server: str, tmp_path: Path
) -> None:
    with Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="on-local", **roles(server, 0.3))
        jobs.create(name="on-ray", executor="ray", **roles(server, 0.3))
        for name in ("on-local", "on-ray"):
            completed_job(client, name, timeout=240)
        local, on_ray = (jobs.results.aggregate_scores.download(name=n) for n in ("on-local", "on-ray"))
    assert on_ray["metrics"] == local["metrics"] and local["metrics"]
    store = Store(tmp_path / "s.db")
    assert store.require_run("default/on-ray").config["run"]["executor"] == "ray"


def test_a_ray_job_without_ray_is_a_422(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with Client.local(tmp_path / "s.db", workers=0) as client, pytest.raises(ServiceError) as caught:
        client.evaluation.benchmark_jobs.create(name="r", executor="ray", **roles("http://127.0.0.1:9"))
    assert caught.value.status == 422 and "pip install 'healthbench[ray]'" in str(caught.value)


@pytest.mark.shared
@needs_ray
def test_killed_driver_resumes_with_the_local_engines_results(
    ray_cluster: str, fragment_head: Fragment, tmp_path: Path
) -> None:
    """A real fragment, two repeats (two pages of the plan): the driver (a CLI process on the session's
    Ray) is killed mid-run; --resume repeats at most the in-flight budget of calls, and the run ends
    with the core's metrics and the local engine's whole metrics document (scores, tokens by role);
    run again, it makes no call."""
    fragment = fragment_head
    data, total = fragment.path, N_REPEATS_KILLED * fragment.calls
    db = tmp_path / "kill.db"
    with fake_server_process("--latency", "0.01") as url:
        local_store = Store(tmp_path / "local.db")
        config = fake_run_config(url, data, executor="local", n_repeats=N_REPEATS_KILLED)
        local = run_eval(config, store=local_store, name="kill")
        reset_stats(url)
        command = [
            sys.executable, "-m", "healthbench", "run", "--data", str(data),
            "--model", FAKE_CANDIDATE, "--base-url", url, "--judge", FAKE_JUDGE, "--judge-base-url", url,
            "--n-repeats", str(N_REPEATS_KILLED), "--max-retries", "12",
            "--name", "kill", "--store", str(db), "--executor", "ray", "--ray-address", ray_cluster,
        ]  # fmt: skip
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = Store(db)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            run = store.get_run("kill") if db.exists() else None
            if run is not None and len(store.grade_progress(run.id)) > 300:
                break
            time.sleep(0.2)
        assert driver.poll() is None, "the driver ended before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        before = calls(url)
        assert 0 < before < total
        resumed = resume_run("kill", store=store, overrides={"executor": "ray"})
        extra = calls(url) - total
        again = resume_run("kill", store=store, overrides={"executor": "ray"})
        assert again.counters.tally.made == 0 and calls(url) == total + extra
    want = score_run(expected_samples(fragment.conversations, N_REPEATS_KILLED)).metrics()
    assert score_stored_run(store, resumed.run).metrics() == want
    assert resumed.run.status == "finished"
    assert metrics_of(store, resumed.run) == metrics_of(local_store, local.run)
    # lost: what Ray had answered or had in flight, uncommitted; the driver feeds Ray only while that
    # stays within the in-flight budget (2 batches of 64 at the default 64 connections), and says so
    assert resumed.counters.repeat_bound == 128
    print(f"calls repeated after the kill: {extra} of {total} (bound {resumed.counters.repeat_bound})")
    assert 0 <= extra <= resumed.counters.repeat_bound
