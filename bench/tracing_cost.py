"""`python -m bench.tracing_cost`: what traces cost, in CPU per request, on DynamoDB Local.

The real app (`create_app`, with the JSON request log on) is called in-process through ASGI, as
`bench.local_cpu` calls it, twice over on one embedded DynamoDB Local (in memory): with
`LOC_OTEL_EXPORTER=none` (no tracer provider) and with `otlp` to a local OTLP/HTTP receiver,
another process (which decodes every batch and counts its spans). One payment by id and a loan's
page of 100, at 1 and 16 requests in flight, the two apps in interleaved rounds so that the
machine's noise falls on both. CPU time is this process's, every thread of it: the span
processor's export thread included (each otlp run ends with a flush inside its timing).

    python -m bench.tracing_cost                 # the report `make bench` prints
    python -m bench.tracing_cost --quick         # seconds: proves the harness
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvloop
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from bench import dataset, generator, workloads
from bench.profile import JSON, asgi_caller, cpu_ms
from bench.runs import service_headers
from bench.serve import service_settings
from datasource.table import create_table_if_missing
from server.app import create_app
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.logs import configure_logging
from server.runtime import tune_garbage_collector
from server.tracing import tracer_provider

WORKLOADS = ("payment", "loan_page")
IN_FLIGHT = (1, 16)
SIDES = ("none", "otlp")
# The target: otlp at most this much more CPU per request than none, on the loan's page.
PAGE_TARGET = 1.10


@dataclass(frozen=True)
class TracingOptions:
    requests: int = 100  # per side, workload, concurrency and round
    rounds: int = 10
    warmup: int = 100  # requests per side and workload before any is timed


QUICK = TracingOptions(requests=20, rounds=1, warmup=10)


class CountedSpans(SpanProcessor):
    """Counts the spans the app ended, to compare with what the receiver got."""

    def __init__(self) -> None:
        self.ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


# --- the receiver, a process of its own -----------------------------------------------------


def _serve_receiver() -> None:
    """`--receiver`: an OTLP/HTTP receiver on a free port (printed), counting spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    counted = [0]
    answer = ExportTraceServiceResponse().SerializeToString()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = ExportTraceServiceRequest()
            request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
            counted[0] += sum(
                len(scope.spans) for spans in request.resource_spans for scope in spans.scope_spans
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def do_GET(self) -> None:
            body = str(counted[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


@contextmanager
def _receiver() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.tracing_cost", "--receiver"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{process.stdout.readline().strip()}"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def _received(endpoint: str) -> int:
    with urllib.request.urlopen(endpoint, timeout=5) as answer:
        return int(answer.read())


# --- the measurement -----------------------------------------------------------------------


async def measure(
    options: TracingOptions, *, log: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """The CPU per request of each side, workload and concurrency (the median of the rounds),
    otlp's over none's (the median of each round's: the two sides of a round ran back to back,
    on the machine as it was then), the spans per request, and those the receiver got."""
    database = EmbeddedDynamoDB(data_dir=None)
    endpoint = database.start()
    try:
        with _receiver() as receiver:
            return await _measure(options, endpoint, receiver, log)
    finally:
        database.stop()


async def _measure(
    options: TracingOptions, endpoint: str, receiver: str, log: Callable[[str], None]
) -> dict[str, Any]:
    previous_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver
    settings = service_settings(0, endpoint, live_updates=False)
    stored = list(dataset.items(users=range(2), loans_per_user=1, payments_per_loan=110))
    work = {w.name: w for w in workloads.build(stored)}
    provider = tracer_provider(settings.model_copy(update={"otel_exporter": "otlp"}))
    counted = CountedSpans()
    provider.add_span_processor(counted)
    apps = {"none": create_app(settings), "otlp": create_app(settings, tracer_provider=provider)}
    headers = JSON + [(k.lower().encode(), v.encode()) for k, v in service_headers().items()]
    flushes: dict[str, Callable[[], object] | None] = {"none": None, "otlp": provider.force_flush}
    spent: dict[tuple[str, str, int], list[float]] = {
        (s, w, n): [] for s in SIDES for w in WORKLOADS for n in IN_FLIGHT
    }
    spans = dict.fromkeys(WORKLOADS, 0.0)
    try:
        async with apps["none"].router.lifespan_context(apps["none"]):
            store = apps["none"].state.store
            await create_table_if_missing(store.client, settings.table_name, stream=False)
            await generator.load(store.client, settings.table_name, iter(stored))
            tune_garbage_collector()  # as `loc-payments serve` runs
            async with apps["otlp"].router.lifespan_context(apps["otlp"]):
                for name in WORKLOADS:
                    callers = {
                        side: asgi_caller(apps[side], work[name].body, headers) for side in SIDES
                    }
                    for side in SIDES:
                        for _ in range(options.warmup):
                            await callers[side]()
                    provider.force_flush()
                    before = counted.ended
                    await callers["otlp"]()
                    spans[name] = float(counted.ended - before)
                    for round_ in range(options.rounds):
                        for in_flight in IN_FLIGHT:
                            for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
                                spent[side, name, in_flight].append(
                                    await cpu_ms(
                                        callers[side], options.requests, in_flight, flushes[side]
                                    )
                                )
                    log(f"tracing cost: {name} measured")
        provider.force_flush()
        received = _received(receiver)
    finally:
        provider.shutdown()
        if previous_endpoint is None:
            del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
        else:
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = previous_endpoint
    cells: list[dict[str, Any]] = []
    for name in WORKLOADS:
        for in_flight in IN_FLIGHT:
            none, otlp = spent["none", name, in_flight], spent["otlp", name, in_flight]
            cells.append(
                {
                    "workload": name,
                    "in_flight": in_flight,
                    "none_cpu_ms": statistics.median(none),
                    "otlp_cpu_ms": statistics.median(otlp),
                    "ratio": statistics.median(o / n for o, n in zip(otlp, none, strict=True)),
                }
            )
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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_cost", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few requests: the harness only")
    parser.add_argument("--requests", type=int, help="per cell and round (default 100)")
    parser.add_argument("--rounds", type=int, help="(default 10)")
    parser.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.receiver:
        _serve_receiver()
        return
    options = QUICK if arguments.quick else TracingOptions()
    options = dataclasses.replace(
        options,
        requests=arguments.requests or options.requests,
        rounds=arguments.rounds or options.rounds,
    )
    with open(os.devnull, "w") as discarded:
        configure_logging(log_format="json", local=False, stream=discarded)
        results = uvloop.run(measure(options, log=lambda line: print(line, file=sys.stderr)))
    print(render(results))


if __name__ == "__main__":
    main()
