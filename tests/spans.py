"""The SDK's in-memory exporter on a tracer provider of a test's own, and its spans read as the
tests need them."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind


class Spans:
    """The in-memory exporter, and the spans it holds read as the tests need them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(shutdown_on_exit=False)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def clear(self) -> None:
        self.exporter.clear()

    def server(self) -> ReadableSpan:
        [server] = [span for span in self.finished() if span.kind is SpanKind.SERVER]
        return server

    def chain(self, span: ReadableSpan) -> list[str]:
        """`span`'s name and its ancestors', up to the root of what was exported."""
        by_id = {found.context.span_id: found for found in self.finished()}
        names = [span.name]
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names
