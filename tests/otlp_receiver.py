"""An OTLP/HTTP receiver of the tests' own: `POST /v1/traces` bodies decoded with
opentelemetry-proto, as a collector would, the spans kept in the order they arrived.

`OtlpReceiver()` listens on a free port of 127.0.0.1 in a thread; `endpoint` is what
`OTEL_EXPORTER_OTLP_ENDPOINT` takes. `SilentCollector` accepts connections and never answers (a
collector that hangs)."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

TRACES_PATH = "/v1/traces"
WAIT_SECONDS = 15.0
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ReceivedLink:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """A span as the receiver decoded it: ids in hex, kind as OTLP's enum name."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, Any]
    links: list[ReceivedLink]
    status: str
    service: str


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, field) if field is not None else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _attrs(holder: Any) -> dict[str, Any]:
    return _attributes(holder.attributes)


def decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=Span.SpanKind.Name(span.kind),
                        attributes=_attributes(span.attributes),
                        links=[
                            ReceivedLink(
                                link.trace_id.hex(),
                                link.span_id.hex(),
                                _attributes(link.attributes),
                            )
                            for link in span.links
                        ],
                        status=Status.StatusCode.Name(span.status.code),
                        service=service,
                    )
                )
    return spans


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                received.spans.extend(decode(body))
                received.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    async def wait_for(self, found: Any) -> list[ReceivedSpan]:
        """The spans received so far, once `found(spans)` is true (or `WAIT_SECONDS` passed)."""
        for _ in range(int(WAIT_SECONDS / POLL_SECONDS)):
            if found(list(self.spans)):
                break
            await asyncio.sleep(POLL_SECONDS)
        return list(self.spans)


@contextmanager
def receiving() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()


class SilentCollector:
    """A collector that takes every connection and never answers: `connections` counts them."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def connections(self) -> int:
        return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._held.append(connection)

    def close(self) -> None:
        self._listener.close()
        for connection in self._held:
            connection.close()


@contextmanager
def silent_collector() -> Iterator[SilentCollector]:
    collector = SilentCollector()
    try:
        yield collector
    finally:
        collector.close()
