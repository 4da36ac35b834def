"""OpenTelemetry traces (telemetry.py) with the SDK's in-memory exporter: a service job is one job span
holding one run span holding one CLIENT span per model call, with the GenAI attributes and the token
counts the fake server billed; no prompt or answer text unless asked for, never the API key."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from support.process import fake_server_process

from healthbench.errors import ConfigError
from healthbench.service.jobs import JobWorkers, Observability, WorkerSettings
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store
from healthbench.telemetry import INSTALL, configure, tracing_for, tracing_requested
from healthbench.testing.fake_server import fetch_stats, reset_stats

SECRET = "sk-test-secret-0123456789"


@pytest.fixture(scope="module")
def keyed() -> Iterator[str]:
    """A fake server that answers only with the key ``SECRET``."""
    with fake_server_process("--require-api-key", SECRET) as url:
        yield url


def run_job(tmp_path: Path, url: str, *, content: bool) -> tuple[list[ReadableSpan], dict[str, Any]]:
    """One job (2 conversations) on the service's workers, traced; its spans and what the server billed."""
    exporter = InMemorySpanExporter()
    tracing = configure(exporter=exporter, content=content)
    store = Store(tmp_path / "s.db")
    spec = {"spec": "openai/fake-model", "base_url": url}
    body = JobCreate.model_validate(
        {"name": "t1", "limit": 2, "max_retries": 0, "concurrency": 4, "model": spec, "judge": spec}
    )
    JobService(store).create("default", body)
    reset_stats(url)
    seen = Observability(observer=tracing.observer(), tracing=tracing)
    with JobWorkers(store, WorkerSettings(workers=1), {"OPENAI_API_KEY": SECRET}, seen=seen):
        deadline = time.monotonic() + 120
        while (job := JobStore(store).list("default")[0][0]).status not in ("completed", "error"):
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.1)
    assert job.status == "completed", job.error
    tracing.shutdown()
    store.close()
    return list(exporter.get_finished_spans()), fetch_stats(url)


def test_a_job_is_one_span_and_each_model_call_one_client_span(tmp_path: Path, keyed: str) -> None:
    spans, billed = run_job(tmp_path, keyed, content=False)
    jobs = [s for s in spans if s.name == "healthbench job"]
    runs = [s for s in spans if s.name == "healthbench run"]
    calls = [s for s in spans if s.name == "chat fake-model"]
    assert len(jobs) == len(runs) == 1 and len(spans) == 2 + len(calls)
    job, run = jobs[0], runs[0]
    assert job.attributes is not None and job.attributes["healthbench.job.kind"] == "eval"
    assert run.parent is not None and run.parent.span_id == job.context.span_id
    by_role: dict[str, list[ReadableSpan]] = {"candidate": [], "judge": []}
    for span in calls:
        attributes = span.attributes or {}
        assert span.kind is SpanKind.CLIENT and span.status.status_code is not StatusCode.ERROR
        assert span.parent is not None and span.parent.span_id == run.context.span_id
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"] == "fake-model"
        assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time >= span.start_time
        by_role[str(attributes["healthbench.role"])].append(span)
    assert len(by_role["candidate"]) == billed["candidate"] == 2
    assert len(by_role["judge"]) == billed["judge"] > 0

    def summed(name: str) -> int:
        return sum(int((s.attributes or {})[name]) for s in calls)

    assert summed("gen_ai.usage.input_tokens") == sum(r["input_tokens"] for r in billed["billed"].values())
    assert summed("gen_ai.usage.output_tokens") == sum(r["output_tokens"] for r in billed["billed"].values())
    assert summed("gen_ai.usage.cache_read.input_tokens") == sum(
        r["cached_input_tokens"] for r in billed["billed"].values()
    )
    # each judge call carries its criterion's verdict as an evaluation event
    for span in by_role["judge"]:
        (event,) = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
        assert event.attributes is not None
        label = event.attributes["gen_ai.evaluation.score.label"]
        assert (label, event.attributes["gen_ai.evaluation.score.value"]) in (("met", 1.0), ("not_met", 0.0))
    assert not any(s.events for s in by_role["candidate"])
    text = everything(spans)
    assert SECRET not in text and "gen_ai.input.messages" not in text
    assert "Rubric item" not in text and "conversation" not in text.lower()  # no judge prompt, no text


def test_text_only_when_asked_and_never_the_key(tmp_path: Path, keyed: str) -> None:
    spans, _ = run_job(tmp_path, keyed, content=True)
    calls = [s for s in spans if s.name == "chat fake-model"]
    for span in calls:
        attributes = span.attributes or {}
        messages = json.loads(str(attributes["gen_ai.input.messages"]))
        assert messages and all("content" in m for m in messages)
        (answer,) = json.loads(str(attributes["gen_ai.output.messages"]))
        assert answer["role"] == "assistant" and answer["content"]
    assert SECRET not in everything(spans)


def everything(spans: list[ReadableSpan]) -> str:
    """Every span as the exporter would send it (names, attributes, events, resource)."""
    return "\n".join(span.to_json() for span in spans)


def test_missing_extra_names_the_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ConfigError, match=re.escape(f"need the otel extra: {INSTALL}")):
        configure()


def test_the_otel_variables_turn_tracing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not tracing_requested({})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not tracing_requested(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    )
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with tracing_for(False) as tracing:
        assert tracing is None  # off: the engine is given no observer


def cli_spans(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[ReadableSpan]:
    """``healthbench ARGS`` through the CLI, its OTLP exporter replaced by the SDK's in-memory one
    (everything else as `--otel` sets it up: batched, shut down when the command ends); its spans."""
    from typer.testing import CliRunner

    import healthbench.cli  # noqa: F401  (registers the commands)
    from healthbench import telemetry
    from healthbench.cli.app import app

    exporter = InMemorySpanExporter()
    monkeypatch.setattr(telemetry, "_otlp_exporter", lambda env: exporter)
    result = CliRunner().invoke(app, list(args), env={"OPENAI_API_KEY": SECRET})
    assert result.exit_code == 0, result.output
    return list(exporter.get_finished_spans())


def test_regrade_and_meta_eval_trace_their_calls_with_otel(
    tmp_path: Path, keyed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--otel` on the other commands that call models: one run span, one CLIENT span per judge call
    (as many as the server was asked), no text and no key; without it, nothing is traced."""
    store = str(tmp_path / "s.db")
    judge = ["--judge", "fake-judge", "--judge-base-url", keyed, "--store", store, "--max-retries", "0"]
    answers = ["run", *judge, "--model", "fake-model", "--base-url", keyed, "--limit", "2", "--name", "base"]
    assert cli_spans(monkeypatch, *answers) == []  # no --otel, no OTEL_* variable: no trace
    commands = {
        "regrade": ["regrade", "base", *judge[:2], "--judge-temperature", "0.5", *judge[2:], "--otel"],
        "meta-eval": ["meta-eval", *judge, "--limit", "3", "--otel"],
    }
    for command, args in commands.items():
        reset_stats(keyed)
        spans = cli_spans(monkeypatch, *args)
        billed = fetch_stats(keyed)
        (run,) = [s for s in spans if s.name == "healthbench run"]
        calls = [s for s in spans if s is not run]
        assert billed["judge"] > 0 and billed["candidate"] == 0, command
        assert len(calls) == billed["judge"], command
        for span in calls:
            attributes = span.attributes or {}
            assert span.name == "chat fake-judge" and attributes["healthbench.role"] == "judge"
            assert span.parent is not None and span.parent.span_id == run.context.span_id
        tokens = sum(int((s.attributes or {})["gen_ai.usage.input_tokens"]) for s in calls)
        assert tokens == billed["billed"]["judge"]["input_tokens"], command
        text = everything(spans)
        assert SECRET not in text and "gen_ai.input.messages" not in text, command
