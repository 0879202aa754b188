"""The second pass and the scale measurement, on DynamoDB Local (in memory).

Two tables: `base` with 1,000 payments (10 users x 1 loan x 100 payments) and `scale` with the
same 1,000 and 99,000 more (990 more users), written by the generator while DynamoDB Local has
both cores. Then DynamoDB Local is moved to the load generator's core, as if it ran on another
machine, and a service (`loc-payments serve`) per table runs on the server core.

1. The service on `base` against the Node.js peer (`bench/peers/node`, what a team would write
   instead), against raw aioboto3 making the one call each workload needs (same client
   settings, same concurrency, same core), and against the same call sent over raw HTTP by wrk
   with no SDK (DynamoDB Local's own rate: the limit of anything in front of it; wrk runs on
   the server core, where the service would be, and its CPU is reported), in rotating order.
   The Node peer must answer the service's `data` for every workload before anything is timed.
   The service's resident memory is read after each repetition.
2. Scale: p50 at one connection of a loan's first page and of `paymentsByStatus`, on `base` and
   on `scale` in rotating order; the loan and the page are the same in both tables, so only the
   table's size differs. Raw aioboto3 makes the same two calls on both tables, which shows how
   much of any growth is DynamoDB Local's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aioboto3
from aiobotocore.config import AioConfig

from bench import dataset, generator, workloads
from bench.engine_pass import check_same_data
from bench.processes import (
    LOAD_CORE,
    ROOT,
    SERVER_CORE,
    Server,
    children,
    load_generator_core,
    memory_record,
    pin_process,
    pinning,
)
from bench.runs import Run, answer, service_headers, summary, timed_run
from bench.shards_pass import measure_shards
from bench.workloads import Workload
from bench.wrk import run_load
from datasource.items import Item
from datasource.table import create_table_if_missing
from domain.keys import SEED_LAYOUT, StatusLayout
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.settings import LOCAL_AWS_CREDENTIALS, Settings

COMPARED = ("loan_page", "by_status", "payment")
# Who makes the calls compared: raw aioboto3, the service, the Node peer, the same call over raw
# HTTP (wrk).
SIDES = ("raw", "service", "node", "http")
SCALED = ("loan_page", "by_status")
SCALE_TABLE = "bench-scale-loc-service"
DEBUG_DYNAMODB = {"X-Debug-DynamoDB": "1"}


@dataclass(frozen=True, slots=True)
class LocalOptions:
    seconds: float
    warmup_seconds: float
    repetitions: int
    connections: int = 16
    base_users: int = 10
    scale_users: int = 1_000
    payments_per_user: int = 100


class RawClient:
    """The `bench.raw_dynamodb` worker process: one command, one timed loop of raw calls, made
    by aioboto3 or over raw HTTP."""

    def __init__(self, endpoint: str) -> None:
        command = [sys.executable, "-m", "bench.raw_dynamodb", "--endpoint", endpoint]
        if pinning():
            command += ["--core", str(SERVER_CORE)]
        self._process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(
        self,
        workload: Workload,
        *,
        table: str,
        connections: int,
        seconds: float,
        client: str = "aioboto3",
    ) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        command = {
            "client": client,
            "call": workload.name,
            "variables": workload.variables,
            "table": table,
            "connections": connections,
            "seconds": seconds,
        }
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError("the raw DynamoDB worker exited")
        result: dict[str, Any] = json.loads(line)
        if result.get("errors"):
            raise RuntimeError(f"{client} {workload.name}: {result['errors']:.0f} failed calls")
        return result

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@dataclass
class _Setup:
    """What the measurements run on."""

    base: Server
    node: Server
    scale: Server
    raw: RawClient
    base_table: str
    work: dict[str, Workload]
    headers: dict[str, str]
    # Each workload's call as a raw HTTP request (`bench.raw_dynamodb`), for wrk.
    http: dict[str, dict[str, Any]]


def _items(
    options: LocalOptions, users: range, layout: StatusLayout = SEED_LAYOUT
) -> Iterator[Item]:
    return dataset.items(
        users=users,
        loans_per_user=1,
        payments_per_loan=options.payments_per_user,
        first_number=users.start * options.payments_per_user,
        layout=layout,
    )


async def _compare(
    setup: _Setup, options: LocalOptions
) -> tuple[list[dict[str, Any]], list[float]]:
    """The service, raw aioboto3 and raw HTTP taking turns at going first, each workload, each
    repetition; the rows, and the service's resident memory (MiB) after each repetition."""
    rows: list[dict[str, Any]] = []
    resident: list[float] = []
    for repetition in range(-1 if options.warmup_seconds else 0, options.repetitions):
        warmup = repetition < 0
        seconds = options.warmup_seconds if warmup else options.seconds
        for turn, name in enumerate(COMPARED):
            workload = setup.work[name]
            first = (repetition + turn) % len(SIDES)
            for side in SIDES[first:] + SIDES[:first]:
                if side in ("service", "node"):
                    run = await timed_run(
                        setup.base if side == "service" else setup.node, workload.body,
                        setup.headers, workload=name, connections=options.connections,
                        seconds=seconds, repetition=repetition,
                    )  # fmt: skip
                    row = {"rate": run.rate} | summary([run])
                elif side == "http":
                    request = setup.http[name]
                    load = await run_load(
                        request["url"],
                        request["body"].encode(),
                        request["headers"],
                        connections=options.connections,
                        seconds=seconds,
                        core=SERVER_CORE if pinning() else None,
                    )
                    if load.errors:
                        raise RuntimeError(f"raw HTTP {name}: {load.errors} failed calls")
                    row = {
                        "rate": load.rate,
                        "p50_ms": load.p50_ms,
                        "p99_ms": load.p99_ms,
                        "load_generator_core_share": load.core_share,
                    }
                else:
                    result = setup.raw.run(
                        workload,
                        table=setup.base_table,
                        connections=options.connections,
                        seconds=seconds,
                    )
                    row = {
                        "rate": result["calls"] / result["seconds"],
                        "cpu_ms_per_call": 1000 * result["cpu_seconds"] / max(1, result["calls"]),
                        "p50_ms": result["p50_ms"],
                        "p99_ms": result["p99_ms"],
                    }
                if not warmup:
                    rows.append({"side": side, "workload": name} | row)
        if not warmup:
            resident.append(setup.base.resident_mib())
    return rows, resident


async def _scale_latencies(setup: _Setup, options: LocalOptions) -> dict[str, Any]:
    """p50 and p99 at one connection: the service and raw aioboto3, on both tables in turn."""
    runs: list[Run] = []
    raw: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"base": [], "scale": []} for name in SCALED
    }
    sizes = (("base", setup.base, setup.base_table), ("scale", setup.scale, SCALE_TABLE))
    for repetition in range(options.repetitions):
        for turn, name in enumerate(SCALED):
            workload = setup.work[name]
            for size, server, table in sizes if (repetition + turn) % 2 else sizes[::-1]:
                run = await timed_run(
                    server, workload.body, setup.headers, workload=f"{name}@{size}",
                    connections=1, seconds=options.seconds, repetition=repetition,
                )  # fmt: skip
                runs.append(run)
                raw[name][size].append(
                    setup.raw.run(workload, table=table, connections=1, seconds=options.seconds)
                )
    return {
        "service": {
            name: {
                size: summary(run for run in runs if run.workload == f"{name}@{size}")
                for size in ("base", "scale")
            }
            for name in SCALED
        },
        # The median of the repetitions' percentiles.
        "raw": {
            name: {
                size: {
                    key: sorted(result[key] for result in results)[len(results) // 2]
                    for key in ("p50_ms", "p99_ms")
                }
                for size, results in by_size.items()
            }
            for name, by_size in raw.items()
        },
    }


class LocalPass:
    """`start` runs DynamoDB Local, makes both tables and starts the services and the raw client
    (with the other pass's servers, so that they all load at once); `run` writes the payments,
    waits for the processes and measures."""

    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        self.base_table = Settings(env="local").table_name
        self.base_items = list(_items(options, range(options.base_users)))
        # In memory, several tables of 100,000 payments: far past the development heap.
        self.database = EmbeddedDynamoDB(data_dir=None, heap="2g")
        self.servers: list[Server] = []
        self.node: Server | None = None
        self.raw: RawClient | None = None

    def _client(self) -> Any:
        return aioboto3.Session().client(
            "dynamodb",
            region_name=Settings(env="local").region,
            endpoint_url=self.database.endpoint_url,
            config=AioConfig(max_pool_connections=generator.WRITERS, parameter_validation=False),
            **LOCAL_AWS_CREDENTIALS,
        )

    async def start(self) -> None:
        endpoint = self.database.start()
        async with self._client() as client:
            for table in (self.base_table, SCALE_TABLE):
                # No stream: nothing here reads one, and DynamoDB Local's writes slow down as a
                # stream grows (a second 100,000-payment table took ~15 writes a second).
                await create_table_if_missing(client, table, stream=False)
        for name, table in (("P3 on 1k", self.base_table), ("P3 on 100k", SCALE_TABLE)):
            server = Server(name, "service-local", "--endpoint", endpoint, "--table", table)
            server.start()
            self.servers.append(server)
        self.node = Server("Node peer", "node", "--endpoint", endpoint, "--table", self.base_table)
        self.node.start()
        self.servers.append(self.node)
        self.raw = RawClient(endpoint)

    def stop(self) -> None:
        if self.raw is not None:
            self.raw.stop()
        for server in self.servers:
            server.stop()
        self.database.stop()

    async def run(self, log: Callable[[str], None]) -> dict[str, Any]:
        options, base_items = self.options, self.base_items
        async with self._client() as client:
            for table in (self.base_table, SCALE_TABLE):
                await generator.load(client, table, iter(base_items))
            more = range(options.base_users, options.scale_users)
            extra = await generator.load(client, SCALE_TABLE, _items(options, more))
        log(
            f"DynamoDB Local: {len(base_items):,} payments in one table, "
            f"{len(base_items) + extra.items:,} in the other ({extra.items:,} written in "
            f"{extra.seconds:.1f} s, {extra.rate:,.0f}/s)"
        )
        if pinning():
            for jvm in children("java"):
                pin_process(jvm, {LOAD_CORE})
        for server in self.servers:
            server.wait_ready()
        assert self.raw is not None and self.node is not None
        work = {w.name: w for w in workloads.build(base_items)}
        setup = _Setup(
            base=self.servers[0],
            node=self.node,
            scale=self.servers[1],
            raw=self.raw,
            base_table=self.base_table,
            work=work,
            headers=service_headers(),
            http={
                name: self.raw.run(
                    work[name], table=self.base_table, connections=1, seconds=0, client="http"
                )
                for name in COMPARED
            },
        )
        check_same_data(
            [work[name] for name in COMPARED], {"P3": setup.base, "Node peer": setup.node},
            setup.headers,
        )  # fmt: skip
        calls = {
            name: answer(setup.base.port, setup.work[name].body, setup.headers | DEBUG_DYNAMODB)[
                "extensions"
            ]["dynamodb"]
            for name in COMPARED
        }
        with load_generator_core():
            comparison, resident = await _compare(setup, options)
            log("service against raw aioboto3 and raw HTTP done; p50 at both sizes")
            scale = await _scale_latencies(setup, options)
        log("p50 at both sizes done; paymentsByStatus at 1, 4 and 16 GSI2 shards")
        shards = await measure_shards(
            endpoint=self.database.endpoint_url,
            table=SCALE_TABLE,
            first_server=setup.scale,
            workload=setup.work["by_status"],
            headers=setup.headers,
            seconds=options.seconds,
            repetitions=options.repetitions,
            items=lambda layout: _items(options, range(options.scale_users), layout),
            client=self._client,
        )
        return {
            "connections": options.connections,
            "service_calls": calls,
            "comparison": comparison,
            "base_payments": len(base_items),
            "scale_payments": len(base_items) + extra.items,
            "load": {
                "payments": extra.items,
                "seconds": extra.seconds,
                "payments_per_second": extra.rate,
                "batch_write_requests": extra.requests,
                "writers": generator.WRITERS,
            },
            "scale": scale,
            "shards": shards,
            "service_memory": memory_record(setup.base, resident),
        }
