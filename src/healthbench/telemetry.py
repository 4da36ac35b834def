"""OpenTelemetry traces of runs and service jobs (the optional extra ``healthbench[otel]``).

One span per job and per run, and one CLIENT span per model call following OpenTelemetry's GenAI
semantic conventions (``chat MODEL``: provider, request and response model, token usage with the
cached and cache-write input tokens, ``error.type``), with the call's role and, for a judge call, the
criterion's verdict as a ``gen_ai.evaluation.result`` event. Spans are made from the engine's
`CallReport` (the same call the engine counted), by `TraceObserver`.

Configured by the standard ``OTEL_*`` environment variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ...), exported by
OTLP. No prompt or answer text is put in a span unless asked for (``content``), never a key or URL.
``import healthbench`` does not need OpenTelemetry: it is imported when tracing is configured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from healthbench.errors import ConfigError
from healthbench.executors.progress import CallReport
from healthbench.models.base import ModelSpec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

INSTALL = "pip install 'healthbench[otel]'"
# any of these set (and OTEL_SDK_DISABLED not true) turns tracing on without --otel
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# the token-usage record's fields as GenAI span attributes (`Usage` field -> attribute)
USAGE_ATTRIBUTES: dict[str, str] = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
}
VERDICT_SCORES = {"met": 1.0, "not_met": 0.0}


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces: an OTLP endpoint is set and the SDK is not
    disabled (``OTEL_SDK_DISABLED``)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_ENVS)


class Tracing:
    """A tracer of its own (the process-wide OpenTelemetry provider is left alone) and what its spans
    may hold (``content``: prompt and answer text)."""

    def __init__(self, provider: TracerProvider, *, content: bool = False) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("healthbench")
        self.content = content

    def span(self, name: str, **attributes: Any) -> AbstractContextManager[Span]:
        """A span around a job or a run (the calls made inside it are its children)."""
        return self.tracer.start_as_current_span(
            name, attributes={k: v for k, v in attributes.items() if v is not None}
        )

    def observer(self) -> TraceObserver:
        return TraceObserver(self)

    def shutdown(self) -> None:
        """Export what is left and stop (at the end of a command or service)."""
        self.provider.shutdown()


def require() -> None:
    """ConfigError naming the pip install when the otel extra is missing."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError(f"OpenTelemetry traces need the otel extra: {INSTALL}") from None


def configure(
    *,
    content: bool = False,
    exporter: SpanExporter | None = None,
    environ: Mapping[str, str] | None = None,
) -> Tracing:
    """Tracing to ``exporter`` (default: OTLP as the ``OTEL_*`` variables say: grpc or http/protobuf,
    http/protobuf when unset), batched unless an exporter is given (tests); a ConfigError naming the
    pip install when the extra is missing."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise ConfigError(f"OpenTelemetry traces need the otel extra: {INSTALL}") from None
    env = os.environ if environ is None else environ
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "healthbench"})
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(env)))
    return Tracing(provider, content=content)


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

            return Grpc()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http
    except ImportError:
        raise ConfigError(f"OpenTelemetry traces need the otel extra: {INSTALL}") from None
    if protocol != "http/protobuf":
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r}: use grpc or http/protobuf")
    return Http()


def maybe_span(tracing: Tracing | None, name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """`Tracing.span`, or nothing when tracing is off."""
    return nullcontext() if tracing is None else tracing.span(name, **attributes)


class TraceObserver:
    """The engine's `CallObserver` for traces: one CLIENT span per model call (not for an answer from
    the call cache: no model was asked), with its real start and end."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def call_ended(self, report: CallReport) -> None:
        if report.outcome == "cached":
            return
        from opentelemetry.trace import SpanKind, Status, StatusCode

        start = int(report.started * 1e9)
        end = start + int((report.seconds or 0.0) * 1e9)
        span = self.tracing.tracer.start_span(
            f"chat {report.spec.model}",
            kind=SpanKind.CLIENT,
            start_time=start,
            attributes=self._attributes(report),
        )
        if report.verdict is not None:
            event: dict[str, Any] = {
                "gen_ai.evaluation.name": "healthbench.criterion",
                "gen_ai.evaluation.score.label": report.verdict,
            }
            if report.verdict in VERDICT_SCORES:
                event["gen_ai.evaluation.score.value"] = VERDICT_SCORES[report.verdict]
            span.add_event("gen_ai.evaluation.result", event, timestamp=end)
        if report.error is not None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)

    def call_retried(self, role: str, spec: ModelSpec, reason: str) -> None:
        return None  # a call's retries are inside its span's time

    def _attributes(self, report: CallReport) -> dict[str, Any]:
        spec = report.spec
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": spec.provider,
            "gen_ai.request.model": spec.model,
            "healthbench.role": report.role,
        }
        if report.response_model:
            attributes["gen_ai.response.model"] = report.response_model
        if report.seconds is None:
            attributes["healthbench.batch"] = True  # answered through a provider batch
        if report.error is not None:
            attributes["error.type"] = report.error
        usage = report.usage
        if usage is not None:
            for field, name in USAGE_ATTRIBUTES.items():
                value = getattr(usage, field, None)
                if value is not None:
                    attributes[name] = value
        if self.tracing.content:
            if report.messages is not None:
                attributes["gen_ai.input.messages"] = json.dumps(report.messages, ensure_ascii=False)
            if report.text is not None:
                attributes["gen_ai.output.messages"] = json.dumps(
                    [{"role": "assistant", "content": report.text}], ensure_ascii=False
                )
        return attributes


@contextmanager
def tracing_for(enabled: bool, *, content: bool = False) -> Iterator[Tracing | None]:
    """Tracing when ``enabled`` (or the ``OTEL_*`` variables ask for it), shut down (its spans
    exported) at the end; None otherwise."""
    if not (enabled or tracing_requested()):
        yield None
        return
    tracing = configure(content=content)
    try:
        yield tracing
    finally:
        tracing.shutdown()
