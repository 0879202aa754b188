"""The app in-process through ASGI (no uvicorn, no network) and the CPU it spends per request:
`python -m bench.profile`, and the helpers of `bench.tracing_cost` and `bench.documents_cost`.

    python -m bench.profile WORKLOAD [--local] [--in-flight N] [--latency MS] [--requests N]
                            [--sort KEY] [--top N]

The real app (the JSON request log on) on the fake DynamoDB answering after `--latency` ms, or
on an embedded DynamoDB Local (`--local`), `--in-flight` requests at once: its CPU ms per
request, rate, share of the time busy and DynamoDB calls per request, then cProfile's top
functions (`--top 0`: none, for a sampling profiler such as py-spy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import uvloop

from bench import data, local_database
from bench.data import Workload
from bench.fake_dynamodb import FAKE_ENDPOINT, FakeDynamoDB, as_client
from bench.load import BUDGET_OVERRIDES, service_headers
from datasource import create_table_if_missing
from harness.asgi import asgi_caller, asgi_headers
from process.logs import configure_logging
from process.runtime import tune_garbage_collector
from process.settings import Settings
from server.app import create_app

__all__ = [
    "Request",
    "Rounds",
    "Spent",
    "caller",
    "interleaved",
    "local_dynamodb",
    "main",
    "paired",
    "quietly",
    "running",
    "spent",
]

Request = Callable[[], Awaitable[Any]]
Result = TypeVar("Result")


@dataclass(frozen=True)
class Rounds:
    requests: int  # per side and round
    rounds: int
    warmup: int  # requests per side before any is timed


@dataclass
class Spent:
    """CPU and wall-clock seconds over a number of requests."""

    requests: int = 0
    cpu: float = 0.0
    wall: float = 0.0

    @property
    def cpu_ms(self) -> float:
        return self.cpu / self.requests * 1000


async def spent(
    request: Request, count: int, in_flight: int = 1, flush: Callable[[], object] | None = None
) -> Spent:
    """`count` requests, `in_flight` at a time (each caller starting its next as one ends), and
    this process's CPU time (every thread's), `flush` (a tracer's export) inside the timing."""
    left = count

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await request()

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    if flush is not None:
        flush()
    return Spent(count, time.process_time() - cpu_started, time.perf_counter() - started)


async def interleaved(
    callers: dict[str, Request],
    rounds: Rounds,
    in_flight: int,
    flushes: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, list[Spent]]:
    """Each side warmed (its last answer must hold no errors), then the rounds, the sides taking
    turns one way and then the other so that the machine's noise falls on all."""
    for side, call in callers.items():
        for _ in range(rounds.warmup):
            answer = await call()
        if rounds.warmup and isinstance(answer, bytes) and b'"errors"' in answer:
            raise RuntimeError(f"{side} failed: {answer[:300]!r}")
    found: dict[str, list[Spent]] = {side: [] for side in callers}
    for number in range(rounds.rounds):
        for side in list(callers) if number % 2 == 0 else list(callers)[::-1]:
            flush = (flushes or {}).get(side)
            found[side].append(await spent(callers[side], rounds.requests, in_flight, flush))
    return found


def paired(found: dict[str, list[Spent]], first: str, second: str) -> dict[str, float]:
    """The median CPU ms per request of the two sides, and the median of each round's second
    over first (the two ran back to back, on the machine as it was then)."""
    ratios = [b.cpu_ms / a.cpu_ms for a, b in zip(found[first], found[second], strict=True)]
    cells = {f"{side}_cpu_ms": statistics.median(s.cpu_ms for s in found[side]) for side in found}
    return cells | {"ratio": statistics.median(ratios)}


def caller(app: Any, body: bytes) -> Request:
    """A service caller's POST of `body` to `app`."""
    return asgi_caller(app, body, asgi_headers(service_headers()))


@contextlib.asynccontextmanager
async def local_dynamodb() -> AsyncIterator[tuple[Settings, dict[str, Workload]]]:
    """An embedded DynamoDB Local (in memory) holding 2 users' loans of 110 payments on local's
    table: the settings of an app on it (no live updates, no webhook delivery), and the
    workloads."""
    stored = list(data.items(users=range(2), loans_per_user=1, payments_per_loan=110))
    with local_database.dynamodb() as endpoint:
        # The one-shard layout the items are loaded in (`bench.data`), and the bench's budget.
        settings = Settings(
            env="local",
            table_name=local_database.table("bench"),
            dynamodb_endpoint=endpoint,
            live_updates=False,
            webhooks=False,
            gsi2_shards=1,
            events_shards=1,
            budget_overrides=BUDGET_OVERRIDES,
        )
        async with data.raw_client(endpoint) as client:
            await create_table_if_missing(client, settings.table_name, stream=False)
            await data.load(client, settings.table_name, iter(stored))
        yield settings, data.workloads(stored)


@contextlib.asynccontextmanager
async def running(*apps: Any) -> AsyncIterator[None]:
    """The apps started (their lifespans), the garbage collector tuned as `serve` tunes it."""
    async with contextlib.AsyncExitStack() as stack:
        for app in apps:
            await stack.enter_async_context(app.router.lifespan_context(app))
        tune_garbage_collector()
        yield


def quietly(measurement: Coroutine[Any, Any, Result]) -> Result:
    """`measurement` on uvloop, with the JSON request log on and written nowhere."""
    with open(os.devnull, "w") as discarded:
        configure_logging(log_format="json", local=False, stream=discarded)
        return uvloop.run(measurement)


async def _profile(arguments: argparse.Namespace) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if arguments.local:
            settings, work = await stack.enter_async_context(local_dynamodb())
            workload, app, where = work[arguments.workload], create_app(settings), "DynamoDB Local"
        else:
            stored = list(data.items(users=range(10), loans_per_user=4, payments_per_loan=120))
            # The one-shard layout the items are made in (`bench.data`), and the bench's budget.
            settings = Settings(
                env="local",
                dynamodb_endpoint=FAKE_ENDPOINT,
                gsi2_shards=1,
                events_shards=1,
                budget_overrides=BUDGET_OVERRIDES,
            )
            fake = FakeDynamoDB(settings.table_name, stored, latency=arguments.latency / 1000)
            client = as_client(fake)
            app = create_app(settings, dynamodb_endpoint=FAKE_ENDPOINT, dynamodb_client=client)
            workload = data.workloads(stored)[arguments.workload]
            where = f"the fake DynamoDB ({arguments.latency:g} ms a call)"
        service = caller(app, workload.body)
        requests, in_flight = arguments.requests, arguments.in_flight
        await stack.enter_async_context(running(app))
        await interleaved({"the service": service}, Rounds(0, 0, 200), in_flight)
        calls = [0]
        app.state.store.client.meta.events.register(
            "before-call.dynamodb", lambda **_: calls.__setitem__(0, calls[0] + 1)
        )
        found = await spent(service, requests, in_flight)
        print(
            f"{workload.name} on {where}, {in_flight} in flight: {found.cpu_ms:.3f} ms of CPU per "
            f"request without the profiler, {requests / found.wall:,.0f} requests/s, busy "
            f"{found.cpu / found.wall:.0%} of the time, {calls[0] / requests:.2f} DynamoDB calls "
            "per request"
        )
        if arguments.top:
            with cProfile.Profile() as profiler:
                await spent(service, requests, in_flight)
            pstats.Stats(profiler).sort_stats(arguments.sort).print_stats(arguments.top)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument(
        "workload", choices=("payment", "loan_page", "by_status", "nodes", "nested")
    )
    parser.add_argument("--local", action="store_true", help="on an embedded DynamoDB Local")
    parser.add_argument("--requests", type=int, default=3000, help="per side (default 3000)")
    parser.add_argument("--in-flight", type=int, default=1, help="requests at once (default 1)")
    parser.add_argument("--latency", type=float, default=0.0, help="the fake's ms (default 0)")
    parser.add_argument("--sort", default="tottime", help="a pstats sort key (default tottime)")
    parser.add_argument("--top", type=int, default=35, help="functions profiled (0: no profile)")
    quietly(_profile(parser.parse_args()))


if __name__ == "__main__":
    main()
