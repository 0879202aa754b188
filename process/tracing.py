"""Tracing's setup (SPEC §16): the tracer of the process, what a request's trace comes from, and
what the answer says of it.

`open_tracing` makes the tracer LOC_OTEL_EXPORTER asks for: none (the default: no provider, and
every place that would make a span goes on), otlp (OTLP over HTTP through a batch processor, so
a slow or absent collector never holds a request up; configured by the standard OTEL_*
variables) or console. `incoming_trace` and `connection_trace` read a W3C `traceparent` /
`tracestate` from a request's headers or a WebSocket's `connection_init` (one that does not parse
is ignored); `trace_response` is the answer's `traceresponse`; `job_trace` is a job run's root.

Configuring it, and the resource: docs/operating.md ("Traces").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from importlib.metadata import version

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Span, Tracer

from datasource import PROPAGATOR, traceparent_of
from process.settings import Settings

__all__ = [
    "TRACE_RESPONSE_HEADER",
    "connection_trace",
    "incoming_trace",
    "job_trace",
    "open_tracing",
    "trace_response",
    "tracer_provider",
]

SERVICE = "loc-payments"
TRACE_RESPONSE_HEADER = "traceresponse"
_PROPAGATED = ("traceparent", "tracestate")
# Seconds: OTEL_EXPORTER_OTLP_TIMEOUT's default.
DEFAULT_EXPORT_TIMEOUT = 10.0


@contextlib.asynccontextmanager
async def open_tracing(
    settings: Settings, *, provider: TracerProvider | None = None
) -> AsyncIterator[Tracer | None]:
    """The process's tracer for the block (None with `LOC_OTEL_EXPORTER=none`); the spans left
    are sent when it ends, for one export's timeout at most. `provider`, the caller's own (the
    tests' in-memory exporter), is used as it is and left open."""
    if provider is not None or settings.otel_exporter != "none":
        # The W3C parser logs a refused `tracestate` with the caller's text in it; like the
        # request id, what a caller sends never writes into our logs.
        logging.getLogger("opentelemetry.trace.span").setLevel(logging.ERROR)
    if provider is not None:
        yield provider.get_tracer(SERVICE, version(SERVICE))
        return
    if settings.otel_exporter == "none":
        yield None
        return
    made, exporter = _provider_and_exporter(settings)
    try:
        yield made.get_tracer(SERVICE, version(SERVICE))
    finally:
        await _shut_down(made, exporter)


async def _shut_down(provider: TracerProvider, exporter: SpanExporter | None) -> None:
    """Send the spans left, for one export's timeout at most (off the event loop); then drop the
    rest. The SDK's own shutdown tries every batch left, each for the exporter's timeout, up to
    30 s: with a collector that does not answer, longer than a task's stop is given."""
    shutting = asyncio.ensure_future(asyncio.to_thread(provider.shutdown))
    await asyncio.wait({shutting}, timeout=_export_timeout())
    if not shutting.done() and exporter is not None:
        # An exporter shut down refuses the batches after the one in flight at once.
        exporter.shutdown()
    await shutting


def _export_timeout() -> float:
    """The OTLP exporter's timeout, as the SDK reads it (seconds)."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        with contextlib.suppress(ValueError):
            return float(os.environ.get(name) or "unset")
    return DEFAULT_EXPORT_TIMEOUT


def tracer_provider(settings: Settings) -> TracerProvider:
    provider, _exporter = _provider_and_exporter(settings)
    return provider


def _provider_and_exporter(settings: Settings) -> tuple[TracerProvider, SpanExporter | None]:
    resource = Resource.create(
        {
            "service.version": version(SERVICE),
            "deployment.environment.name": settings.env,
            # Every DynamoDB call's: said once per batch of spans, not on each.
            "cloud.provider": "aws",
            "cloud.region": settings.region,
        }
    )
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    # Shut down by `open_tracing`; not at exit, which would keep every provider made for ever.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    processor, exporter = _processor(settings)
    provider.add_span_processor(processor)
    return provider, exporter


def _processor(settings: Settings) -> tuple[SpanProcessor, SpanExporter | None]:
    if settings.otel_exporter == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter(service_name=SERVICE)), None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter()
    return BatchSpanProcessor(exporter), exporter


def incoming_trace(carrier: Mapping[str, object]) -> otel_context.Context:
    """The caller's trace: `traceparent` and `tracestate` from request headers or a payload
    (text values only; anything else, or a value that does not parse, is no trace)."""
    found: dict[str, str] = {}
    for name in _PROPAGATED:
        value = carrier.get(name)
        if isinstance(value, str):
            found[name] = value
    return PROPAGATOR.extract(found) if found else otel_context.Context()


def connection_trace(params: Mapping[str, object]) -> otel_context.Context | None:
    """The trace `connection_init`'s payload names, if it names one (any letter case)."""
    lowered = {str(name).lower(): value for name, value in params.items()}
    if "traceparent" not in lowered:
        return None
    return incoming_trace(lowered)


def trace_response(span: Span) -> str:
    """The `traceresponse` header: the operation's trace and span."""
    return traceparent_of(span.get_span_context())


@contextlib.contextmanager
def job_trace(tracer: Tracer | None, job: str) -> Iterator[Span]:
    """A trace of one job run: a root span, current inside the block (a no-op span without a
    tracer), where the run's writes and calls are children."""
    if tracer is None:
        yield trace.INVALID_SPAN
        return
    with tracer.start_as_current_span(
        f"{SERVICE} {job}", context=otel_context.Context(), attributes={"loc.job.name": job}
    ) as span:
        yield span
