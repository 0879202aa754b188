"""`python -m bench.tracing_cost`: what traces cost, in CPU per request, on DynamoDB Local.

Two apps in-process (`bench.profile`) on one embedded DynamoDB Local: with
`LOC_OTEL_EXPORTER=none` (no tracer provider) and with `otlp` to an OTLP/HTTP receiver in
another process, which decodes every batch and counts its spans. One payment by id and a loan's
page of 100, at 1 and 16 requests in flight, the two in interleaved rounds; CPU is this
process's, every thread's, the span processor's export thread included (each otlp round ends
with a flush inside its timing). Every span the app ended must reach the receiver.

    python -m bench.tracing_cost [--quick] [--requests N] [--rounds N]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from bench.profile import Rounds, caller, interleaved, local_dynamodb, paired, rounds_main, running
from server.app import create_app
from server.tracing import tracer_provider

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


def _serve_receiver() -> None:
    """An OTLP/HTTP receiver on a free port (printed) that counts spans; a GET answers the count."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    counted = [0]

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            request = ExportTraceServiceRequest()
            request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            counted[0] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            self._answer(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

        def do_GET(self) -> None:
            self._answer(str(counted[0]).encode(), "text/plain")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


@contextmanager
def _receiver() -> Iterator[str]:
    """The receiver's process, its endpoint; OTEL_EXPORTER_OTLP_ENDPOINT names it in the block."""
    command = [sys.executable, "-m", "bench.tracing_cost", "--receiver"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    previous = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    try:
        assert process.stdout is not None
        endpoint = f"http://127.0.0.1:{process.stdout.readline().strip()}"
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        yield endpoint
    finally:
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
        if previous is not None:
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = previous
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


async def measure(
    options: Rounds, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The CPU per request of each side, workload and concurrency (the median of the rounds),
    otlp's over none's (the median of each round's), the spans per request, and those the
    receiver got."""
    cells: list[dict[str, Any]] = []
    spans = dict.fromkeys(WORKLOADS, 0.0)
    with _receiver() as receiver:
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
                        callers = {side: caller(app, work[name].body) for side, app in apps.items()}
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
                answer = await asyncio.to_thread(urllib.request.urlopen, receiver, timeout=5)
                received = int(answer.read())
            finally:
                provider.shutdown()
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
    if sys.argv[1:] == ["--receiver"]:
        _serve_receiver()
    else:
        rounds_main("python -m bench.tracing_cost", DEFAULT, QUICK, measure, render)
