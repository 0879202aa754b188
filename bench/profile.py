"""`python -m bench.profile WORKLOAD`: where the service's own CPU goes on one workload.

The real app (`create_app`, with the JSON request log on, as `loc-payments serve` logs) on the
benchmark's fake DynamoDB without its latency, called in-process through ASGI, so the profile
holds the service and nothing of uvicorn or the network. It prints the CPU time per request
without the profiler, then cProfile's top functions with it.

    python -m bench.profile payment                    # one payment by id
    python -m bench.profile loan_page --requests 300 --sort cumulative
    python -m bench.profile payment --without log --without gc   # what those two cost
    python -m bench.profile loan_page --without plans            # what the compiled plans save
    python -m bench.profile payment --without dataloader         # what a lookup's batching costs
    python -m bench.profile payment --in-flight 16 --latency 2 --without coalescing

With `--in-flight N` the callers keep N requests in flight at once, as the benchmark's 16
connections do, and with `--latency` the fake answers each call after that many milliseconds
(`make bench` uses 2). It then prints each side's rate and the share of the time the process
was busy (its CPU time over the time taken): below 100 % while every request in flight waits
for DynamoDB at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import logging
import os
import pstats
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import orjson
import uvloop
from starlette.types import Message

from bench import dataset, workloads
from bench.fake_dynamodb import FakeDynamoDB, as_client
from bench.peers import graphql_core
from bench.runs import service_headers
from bench.serve import FAKE_ENDPOINT, service_settings
from datasource import PaymentStore
from domain.payment import Payment, PaymentRef
from resolvers.loaders import Loaders
from schema.compiler import Plan
from server.app import create_app
from server.logs import configure_logging
from server.runtime import tune_garbage_collector

WARMUP = 200
JSON = [(b"content-type", b"application/json")]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    names = [workload.name for workload in workloads.build(_stored())]
    parser.add_argument("workload", choices=names)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--sort", default="tottime", help="a pstats sort key (default tottime)")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument(
        "--peer", choices=("P3", "P1"), default="P3", help="whom to profile (default the service)"
    )
    parser.add_argument(
        "--in-flight", type=int, default=1, help="requests kept in flight at once (default 1)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="the fake's milliseconds per call (default 0)"
    )
    parser.add_argument(
        "--without",
        action="append",
        choices=SWITCHES,
        default=[],
        help="also measure the service with this piece switched off (repeatable): `log`, the "
        "request log line (the log level above INFO); `gc`, the garbage collector; `plans`, "
        "the compiled plans (graphql-core's `execute` instead); `dataloader`, the request's "
        "DataLoader for lookups (each lookup straight "
        "to the store); `coalescing`, lookups coalesced across requests (each request's own call)",
    )
    return parser.parse_args()


def _stored() -> list[Any]:
    return list(dataset.items(users=range(10), loans_per_user=4, payments_per_loan=120))


Request = Callable[[], Awaitable[bytes]]
ROUNDS = 5
SWITCHES = ("log", "gc", "plans", "dataloader", "coalescing")


@contextlib.contextmanager
def _switched_off(pieces: list[str], store: PaymentStore) -> Iterator[None]:
    """The service's request log line (INFO), the garbage collector, the compiled plans
    (`schema.compiler`), the lookups' DataLoader and/or their coalescing across requests
    (`store`'s), off in the block."""
    root = logging.getLogger()
    level = root.level
    if "log" in pieces:
        root.setLevel(logging.WARNING)
    if "gc" in pieces:
        gc.disable()
    with contextlib.ExitStack() as stack:
        if "dataloader" in pieces:
            stack.enter_context(mock.patch.object(Loaders, "payment", _without_dataloader))
        if "coalescing" in pieces:
            # The store's own path with coalescing off: each request's lookups a call of their own.
            stack.enter_context(mock.patch.object(store, "_lookups", None))
        if "plans" in pieces:
            stack.enter_context(mock.patch.object(Plan, "execute", Plan.execute_by_graphql_core))
        try:
            yield
        finally:
            root.setLevel(level)
            gc.enable()


async def _without_dataloader(self: Loaders, ref: PaymentRef) -> Payment | None:
    """A lookup straight through the batch function, without the request's DataLoader (its
    future, its batch and the task that dispatches it)."""
    found: list[Payment | None] = await self._reads.payments([ref])
    return found[0]


async def cpu_ms(
    call: Callable[[], Awaitable[Any]],
    requests: int,
    in_flight: int,
    flush: Callable[[], object] | None = None,
) -> float:
    """CPU milliseconds of this process (every thread) per call, `in_flight` callers at once;
    `flush` (a tracer's export) inside the timing."""

    async def caller(count: int) -> None:
        for _ in range(count):
            await call()

    per_caller = max(1, requests // in_flight)
    started = time.process_time()
    await asyncio.gather(*(caller(per_caller) for _ in range(in_flight)))
    if flush is not None:
        flush()
    return (time.process_time() - started) / (per_caller * in_flight) * 1000


def asgi_caller(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> Request:
    """One POST /graphql through `app`'s ASGI interface, answering the response body."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }

    async def request() -> bytes:
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        await app({**scope, "state": {}}, receive, send)
        answer: bytes = sent[1]["body"]
        return answer

    return request


@dataclass
class Spent:
    """CPU and wall-clock seconds over a number of requests."""

    requests: int = 0
    cpu: float = 0.0
    wall: float = 0.0

    def add(self, other: Spent) -> None:
        self.requests += other.requests
        self.cpu += other.cpu
        self.wall += other.wall

    @property
    def cpu_ms(self) -> float:
        return self.cpu / self.requests * 1000

    @property
    def rate(self) -> float:
        return self.requests / self.wall

    @property
    def busy(self) -> float:
        """The share of the time this process ran: below 1 while it waited with nothing to do."""
        return self.cpu / self.wall


async def _spent(request: Request, count: int, in_flight: int = 1) -> Spent:
    """`count` requests, `in_flight` at a time (each caller starting its next as one ends)."""
    left = count

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await request()

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return Spent(count, time.process_time() - cpu_started, time.perf_counter() - started)


async def _warm(name: str, request: Request) -> bytes:
    for _ in range(WARMUP):
        answer = await request()
    if b'"errors"' in answer:
        raise RuntimeError(f"{name} failed: {answer[:300]!r}")
    return answer


async def _profile(arguments: argparse.Namespace) -> None:
    stored = _stored()
    work = {workload.name: workload for workload in workloads.build(stored)}[arguments.workload]
    settings = service_settings(0, FAKE_ENDPOINT)
    latency = arguments.latency / 1000
    client = as_client(FakeDynamoDB(settings.table_name, stored, latency=latency))
    app = create_app(settings, dynamodb_endpoint=FAKE_ENDPOINT, dynamodb_client=client)
    floor_store = PaymentStore(
        as_client(FakeDynamoDB(settings.table_name, stored, latency=latency)),
        table_name=settings.table_name,
        cursor_secret=settings.cursor_secret.get_secret_value().encode(),
    )
    floor = asgi_caller(graphql_core.create_app(floor_store), work.body, JSON)
    headers = JSON + [
        (name.lower().encode(), value.encode()) for name, value in service_headers().items()
    ]
    service = asgi_caller(app, work.body, headers)

    async with app.router.lifespan_context(app):
        tune_garbage_collector()
        if (
            orjson.loads(await _warm("the service", service))["data"]
            != orjson.loads(await _warm("the engine floor", floor))["data"]
        ):
            raise RuntimeError(f"{work.name}: the service and the engine floor disagree")
        # Interleaved rounds, so that the machine's noise falls on both.
        spent = {"service": Spent(), "floor": Spent(), "switched": Spent()}
        per_round = max(1, arguments.requests // ROUNDS)
        in_flight = arguments.in_flight
        for _ in range(ROUNDS):
            spent["service"].add(await _spent(service, per_round, in_flight))
            spent["floor"].add(await _spent(floor, per_round, in_flight))
            if arguments.without:
                with _switched_off(arguments.without, app.state.store):
                    spent["switched"].add(await _spent(service, per_round, in_flight))
        for line in _report(work.name, spent, arguments):
            print(line)
        profiler = cProfile.Profile()
        profiled = floor if arguments.peer == "P1" else service
        profiler.enable()
        await _spent(profiled, arguments.requests, in_flight)
        profiler.disable()
    report = io.StringIO()
    stats = pstats.Stats(profiler, stream=report)
    stats.sort_stats(arguments.sort).print_stats(arguments.top)
    print(report.getvalue())


def _report(name: str, spent: dict[str, Spent], arguments: argparse.Namespace) -> list[str]:
    service, floor, switched = spent["service"], spent["floor"], spent["switched"]
    lines = [
        f"{name}: {service.cpu_ms:.3f} ms of CPU per request, without the profiler",
        f"the engine floor (P1, graphql-core on the same store): {floor.cpu_ms:.3f} ms; "
        f"P3 / P1 by CPU per request {floor.cpu_ms / service.cpu_ms:.2f}",
    ]
    if arguments.without:
        lines.append(
            f"the service without {' and '.join(arguments.without)}: {switched.cpu_ms:.3f} ms "
            f"({switched.cpu_ms / service.cpu_ms - 1:+.0%})"
        )
    if arguments.in_flight > 1 or arguments.latency:
        lines.append(
            f"{arguments.in_flight} in flight, the fake answering in {arguments.latency:g} ms: "
            f"P3 / P1 by rate {service.rate / floor.rate:.2f}"
        )
        sides = [("the service", service), ("the engine floor", floor)]
        if arguments.without:
            sides.append((f"the service without {' and '.join(arguments.without)}", switched))
        lines += [
            f"  {side}: {measured.rate:,.0f} requests/s, busy {measured.busy:.0%} of the time"
            for side, measured in sides
        ]
    return lines


def main() -> None:
    arguments = _arguments()
    with open(os.devnull, "w") as discarded:
        configure_logging(log_format="json", local=False, stream=discarded)
        uvloop.run(_profile(arguments))


if __name__ == "__main__":
    main()
