"""`python -m bench.tracing_cost [--quick]`: what traces cost, in CPU per request, in-process
(`bench.profile`) on DynamoDB Local.

Two apps, with `LOC_OTEL_EXPORTER=none` and with `otlp` to an OTLP/HTTP receiver in another
process (which counts the spans it decodes): one payment and a loan's page, at 1 and 16 in
flight, in interleaved rounds. CPU is this process's, the export thread's included (each otlp
round ends with a flush). Every span ended must reach the receiver.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import httpx
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from bench.profile import Rounds, caller, interleaved, local_dynamodb, paired, quietly, running
from harness.processes import Process
from process.tracing import tracer_provider
from server.app import create_app

__all__ = ["DEFAULT", "IN_FLIGHT", "QUICK", "WORKLOADS", "measure", "render"]

WORKLOADS = ("payment", "loan_page")
IN_FLIGHT = (1, 16)
PAGE_TARGET = 1.10  # otlp at most this much more CPU per request than none, on the loan's page
DEFAULT = Rounds(requests=100, rounds=10, warmup=100)
QUICK = Rounds(requests=20, rounds=1, warmup=10)


class CountedSpans(SpanProcessor):
    """Counts the spans the app ended, to compare with what the receiver got."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


def _serve_receiver(port: int) -> None:
    """An OTLP/HTTP receiver on `port` that counts the spans it gets; a GET answers the count."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as otlp

    counted = [0]

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            request = otlp.ExportTraceServiceRequest()
            request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            counted[0] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            self._answer(otlp.ExportTraceServiceResponse().SerializeToString())

        def do_GET(self) -> None:
            self._answer(str(counted[0]).encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


async def measure(options: Rounds, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The CPU per request of each side, workload and concurrency (the median of the rounds),
    otlp's over none's (the median of each round's), the spans per request, and those the
    receiver got."""
    cells: list[dict[str, Any]] = []
    spans = dict.fromkeys(WORKLOADS, 0.0)
    receiver = Process("the OTLP receiver", [sys.executable, "-m", "bench.tracing_cost", "{port}"])
    receiver.start()
    try:
        receiver.wait_listening()
        with mock.patch.dict(os.environ, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}):
            async with local_dynamodb() as (settings, work):
                provider = tracer_provider(settings.model_copy(update={"otel_exporter": "otlp"}))
                counted = CountedSpans()
                provider.add_span_processor(counted)
                apps = {
                    "none": create_app(settings),
                    "otlp": create_app(settings, tracer_provider=provider),
                }
                try:
                    async with running(*apps.values()):
                        for name in WORKLOADS:
                            callers = {
                                side: caller(app, work[name].body) for side, app in apps.items()
                            }
                            for in_flight in IN_FLIGHT:
                                flush = {"otlp": provider.force_flush}
                                found = await interleaved(callers, options, in_flight, flush)
                                cell = {"workload": name, "in_flight": in_flight}
                                cells.append(cell | paired(found, "none", "otlp"))
                            provider.force_flush()
                            before = counted.ended
                            await callers["otlp"]()
                            spans[name] = float(counted.ended - before)
                            log(f"tracing cost: {name} measured")
                    provider.force_flush()
                    async with httpx.AsyncClient() as http:
                        received = int((await http.get(receiver.url)).text)
                finally:
                    provider.shutdown()
    finally:
        receiver.stop()
    page = [float(cell["ratio"]) for cell in cells if cell["workload"] == "loan_page"]
    return {
        "requests_per_cell": options.requests,
        "rounds": options.rounds,
        "spans_per_request": spans,
        "spans_ended": counted.ended,
        "spans_received": received,
        "cells": cells,
        "page_target": PAGE_TARGET,
        "page_target_met": max(page) <= PAGE_TARGET,
    }


def render(results: dict[str, Any]) -> str:
    lines = [
        "Tracing cost: CPU ms per request in-process on DynamoDB Local, "
        "LOC_OTEL_EXPORTER=none against otlp to a local receiver",
        "workload   in flight  none    otlp    otlp/none  spans/request   (medians of the rounds)",
    ]
    for cell in results["cells"]:
        lines.append(
            f"{cell['workload']:<10} {cell['in_flight']:9d}  {cell['none_cpu_ms']:6.3f}  "
            f"{cell['otlp_cpu_ms']:6.3f}  {cell['ratio']:9.3f}  "
            f"{results['spans_per_request'][cell['workload']]:.0f}"
        )
    met = "met" if results["page_target_met"] else "NOT met"
    lines.append(
        f"spans ended {results['spans_ended']}, received {results['spans_received']}; "
        f"page target (otlp/none <= {results['page_target']:.2f}) {met}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1].isdigit():
        _serve_receiver(int(sys.argv[1]))
    else:
        options = QUICK if "--quick" in sys.argv else DEFAULT
        print(render(quietly(measure(options, log=lambda line: print(line, file=sys.stderr)))))
