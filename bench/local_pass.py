"""The second pass, on DynamoDB Local (in memory): the service against the Node peer, raw
aioboto3 and DynamoDB Local's own rate; its latency at scale; GSI2 shards and the reshard's rate.

Two tables: `base` with 1,000 payments (10 users x 1 loan x 100) and `scale` with the same and
99,000 more, written while DynamoDB Local has both cores; then DynamoDB Local moves to the load
generator's core, as if on another machine, and a service per table runs on the server core.

1. The service on `base` against the Node.js peer (`bench/peers/node`, which must answer the
   service's `data` first), raw aioboto3 making the one call each workload needs, and that call
   sent over raw HTTP by wrk on the server core (DynamoDB Local's own rate), in rotating order;
   the service's resident memory after each repetition.
2. Scale: p50 at one connection of a loan's page and of `paymentsByStatus` on both tables (the
   same loan and page), and raw aioboto3's, which shows DynamoDB Local's own growth.
3. `paymentsByStatus` at 1, 4 and 16 GSI2 shards: the scale table's payments written afresh in
   each layout to a table of its own, served with `LOC_GSI2_SHARDS=N`, its first page the
   one-shard page but for ids; last, `server.reshard.reshard` moves the scale table to 4 shards
   for at most RESHARD_SECONDS, for its rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import data, load
from bench.raw_dynamodb import RawClient, raw_client
from datasource import open_store
from datasource.items import Item
from datasource.table import create_table_if_missing
from domain.keys import SEED_LAYOUT, StatusLayout
from harness.processes import REGION, Process, Service, children
from server.embedded_dynamodb import EmbeddedDynamoDB
from server.reshard import ReshardCheckpoint, ReshardCounts, reshard
from server.settings import DEV_CURSOR_SECRET, DEV_JWT_SECRET, Settings

COMPARED = ("loan_page", "by_status", "payment")
SIDES = ("raw", "service", "node", "http")
SCALED = ("loan_page", "by_status")
SCALE_TABLE = "bench-scale-loc-service"
LAYOUTS = (1, 4, 16)
RESHARD_SECONDS = 20.0
# What differs between two writings of the same payments: their ids, and cursors made of them.
IDS = {"id", "paymentId", "cursor", "endCursor"}
NODE_PEER = Path(__file__).resolve().parent / "peers" / "node"


@dataclass(frozen=True, slots=True)
class LocalOptions:
    seconds: float
    warmup_seconds: float
    repetitions: int
    connections: int = 16
    base_users: int = 10
    scale_users: int = 1_000
    payments_per_user: int = 100


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in IDS}
    return [_without_ids(item) for item in value] if isinstance(value, list) else value


class LocalPass:
    """`start` runs DynamoDB Local, makes both tables and starts the servers and the raw client
    (with the other pass's servers, so that they all load at once); `run` writes the payments,
    waits for the processes and measures."""

    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        self.table = Settings(env="local").table_name
        self.base_items = list(self._items(range(options.base_users)))
        self.work = data.workloads(self.base_items)
        self.headers = load.service_headers()
        # In memory, several tables of 100,000 payments: far past the development heap.
        self.database = EmbeddedDynamoDB(data_dir=None, heap="2g")
        self.servers: list[Process] = []
        self.raw: RawClient | None = None

    def _items(self, users: range, layout: StatusLayout = SEED_LAYOUT) -> Iterator[Item]:
        per_user = self.options.payments_per_user
        first, loans = users.start * per_user, 1
        return data.items(
            users=users,
            loans_per_user=loans,
            payments_per_loan=per_user,
            first_number=first,
            layout=layout,
        )

    @contextlib.asynccontextmanager
    async def _writer(self) -> AsyncIterator[Any]:
        async with raw_client(
            self.database.endpoint_url,
            max_pool_connections=data.WRITERS,
            parameter_validation=False,
        ) as client:
            yield client

    def _service(self, name: str, table: str, shards: int = 1) -> Service:
        """The service as `loc-payments serve` runs it (its request log, its metrics), without
        live updates: the pass's tables have no stream."""
        settings = {"live_updates": "false", "gsi2_shards": str(shards), "metrics": "app"}
        endpoint = self.database.endpoint_url
        service = Service(endpoint, table, settings | {"log_level": "INFO"}, keep_stdout=False)
        service.name = name
        service.start()
        return service

    async def start(self) -> None:
        endpoint = self.database.start()
        async with self._writer() as client:
            for table in (self.table, SCALE_TABLE):
                # No stream: nothing here reads one, and DynamoDB Local's writes slow down as a
                # stream grows.
                await create_table_if_missing(client, table, stream=False)
        if not (NODE_PEER / "node_modules").is_dir():
            raise SystemExit(f"the Node peer is not installed: npm ci --prefix {NODE_PEER}")
        node = Process(
            "Node peer",
            [
                *("node", NODE_PEER / "server.mjs", "--port", "{port}", "--endpoint", endpoint),
                *("--table", self.table, "--region", REGION, "--jwt-secret", DEV_JWT_SECRET),
                *("--cursor-secret", DEV_CURSOR_SECRET),
            ],
            keep_stdout=False,
        )
        node.start()
        services = [self._service("P3 on 1k", self.table), self._service("P3 on 100k", SCALE_TABLE)]
        self.servers = [*services, node]
        self.raw = RawClient(endpoint, load.SERVER_CORE if load.pinning() else None)

    def stop(self) -> None:
        if self.raw is not None:
            self.raw.stop()
        for server in self.servers:
            server.stop()
        self.database.stop()

    async def run(self, log: Callable[[str], None]) -> dict[str, Any]:
        options, base_items = self.options, self.base_items
        async with self._writer() as client:
            for table in (self.table, SCALE_TABLE):
                await data.load(client, table, iter(base_items))
            more = range(options.base_users, options.scale_users)
            extra = await data.load(client, SCALE_TABLE, self._items(more))
        scale_payments = len(base_items) + extra.items
        log(
            f"DynamoDB Local: {len(base_items):,} payments in one table, {scale_payments:,} in "
            f"the other ({extra.items:,} written in {extra.seconds:.1f} s, {extra.rate:,.0f}/s)"
        )
        if load.pinning():
            for jvm in children("java"):
                load.pin_process(jvm, {load.LOAD_CORE})
        for server in self.servers:
            load.listening(server)
        service, _, node = self.servers
        calls = load.check_same_data([self.work[n] for n in COMPARED], service, node, self.headers)
        with load.load_generator_core():
            comparison, resident = await self._compare()
            log("service against the Node peer, raw aioboto3 and raw HTTP done; p50 at both sizes")
            scale = await self._scale()
        log("p50 at both sizes done; paymentsByStatus at 1, 4 and 16 GSI2 shards")
        return {
            "connections": options.connections,
            "service_calls": calls,
            "comparison": comparison,
            "base_payments": len(base_items),
            "scale_payments": scale_payments,
            "load": {
                "payments": extra.items,
                "seconds": extra.seconds,
                "payments_per_second": extra.rate,
                "batch_write_requests": extra.requests,
                "writers": data.WRITERS,
            },
            "scale": scale,
            "shards": await self._shards(),
            "service_memory": load.memory_record(service, resident),
        }

    async def _side(self, side: str, name: str, seconds: float) -> dict[str, Any]:
        """One run of one side on workload `name`, at the pass's connections."""
        assert self.raw is not None
        workload, connections = self.work[name], self.options.connections
        if side in ("service", "node"):
            server = self.servers[0 if side == "service" else 2]
            run = await load.timed_run(server, workload, self.headers, connections, seconds)
            return {"rate": run.rate} | load.summary([run])
        if side == "raw":
            found = self.raw.run(workload, self.table, connections, seconds)
            return {
                "rate": found["calls"] / found["seconds"],
                "cpu_ms_per_call": 1000 * found["cpu_seconds"] / max(1, found["calls"]),
                "p50_ms": found["p50_ms"],
                "p99_ms": found["p99_ms"],
            }
        request = self.raw.run(workload, self.table, 1, 0, client="http")
        core = load.SERVER_CORE if load.pinning() else None
        wrk = await load.run_load(
            request["url"],
            request["body"].encode(),
            request["headers"],
            connections=connections,
            seconds=seconds,
            core=core,
        )
        if wrk.errors:
            raise RuntimeError(f"raw HTTP {name}: {wrk.errors} failed calls")
        return {
            "rate": wrk.rate,
            "p50_ms": wrk.p50_ms,
            "p99_ms": wrk.p99_ms,
            "load_generator_core_share": wrk.core_share,
        }

    async def _compare(self) -> tuple[list[dict[str, Any]], list[float]]:
        """Each side taking its turn at going first, each workload, each repetition; the rows,
        and the service's resident memory (MiB) after each repetition."""
        options = self.options
        rows: list[dict[str, Any]] = []
        resident: list[float] = []
        for repetition in range(-1 if options.warmup_seconds else 0, options.repetitions):
            seconds = options.seconds if repetition >= 0 else options.warmup_seconds
            for turn, name in enumerate(COMPARED):
                first = (repetition + turn) % len(SIDES)
                for side in SIDES[first:] + SIDES[:first]:
                    row = await self._side(side, name, seconds)
                    rows += [{"side": side, "workload": name} | row] if repetition >= 0 else []
            if repetition >= 0:
                resident.append(self.servers[0].resident_mib())
        return rows, resident

    async def _scale(self) -> dict[str, Any]:
        """p50 and p99 at one connection of the service and raw aioboto3 on both tables in turn;
        raw aioboto3's, the median of the repetitions' percentiles."""
        assert self.raw is not None
        runs, raw = [], []
        sizes = (("base", self.servers[0], self.table), ("scale", self.servers[1], SCALE_TABLE))
        for repetition in range(self.options.repetitions):
            for turn, name in enumerate(SCALED):
                for size, server, table in sizes if (repetition + turn) % 2 else sizes[::-1]:
                    workload, seconds = self.work[name], self.options.seconds
                    label = f"{name}@{size}"
                    runs.append(
                        await load.timed_run(
                            server, workload, self.headers, 1, seconds, repetition, label
                        )
                    )
                    raw.append((label, self.raw.run(workload, table, 1, seconds)))

        def median(label: str, key: str) -> Any:
            return statistics.median_high(found[key] for name, found in raw if name == label)

        cell = [(name, size, f"{name}@{size}") for name in SCALED for size in ("base", "scale")]
        service: dict[str, Any] = {name: {} for name in SCALED}
        raw_latency: dict[str, Any] = {name: {} for name in SCALED}
        for name, size, label in cell:
            service[name][size] = load.summary(run for run in runs if run.workload == label)
            raw_latency[name][size] = {key: median(label, key) for key in ("p50_ms", "p99_ms")}
        return {"service": service, "raw": raw_latency}

    async def _layout(self, server: Process) -> dict[str, Any]:
        workload, seconds = self.work["by_status"], self.options.seconds
        document = load.answer(server.port, workload.body, self.headers | load.DEBUG_DYNAMODB)
        runs = [
            await load.timed_run(server, workload, self.headers, 1, seconds, repetition)
            for repetition in range(self.options.repetitions)
        ]
        calls = document["extensions"]["dynamodb"]["operations"]
        return {"calls": calls, "service": load.summary(runs), "data": document["data"]}

    async def _shards(self) -> dict[str, Any]:
        """Per layout: the service's latency and calls for a `paymentsByStatus` page; and the
        reshard's rate (last: DynamoDB Local stays slow for minutes after index-key rewrites)."""
        one_shard = await self._layout(self.servers[1])
        layouts: dict[str, Any] = {"1": one_shard}
        for shards in LAYOUTS[1:]:
            table = f"{SCALE_TABLE}-{shards}-shards"
            items = self._items(range(self.options.scale_users), StatusLayout(shards))
            async with self._writer() as writer:
                await create_table_if_missing(writer, table, stream=False)
                await data.load(writer, table, items)
            server = self._service(f"P3 on {shards} shards", table, shards)
            try:
                load.listening(server)
                layouts[str(shards)] = await self._layout(server)
            finally:
                server.stop()
                async with self._writer() as writer:
                    await writer.delete_table(TableName=table)
            if _without_ids(layouts[str(shards)].pop("data")) != _without_ids(one_shard["data"]):
                raise RuntimeError(f"paymentsByStatus at {shards} shards differs from one shard's")
        one_shard.pop("data")
        return {"layouts": layouts, "reshard": await self._reshard_rate()}

    async def _reshard_rate(self) -> dict[str, Any]:
        layout = StatusLayout(4, also_read=(1,))
        endpoint = self.database.endpoint_url
        config = Settings(
            env="local",
            table_name=SCALE_TABLE,
            dynamodb_endpoint=endpoint,
            dynamodb_read_timeout=60.0,
        ).dynamo_config()
        sources = tuple(layout.source_partitions())
        start = ReshardCheckpoint(table_name=SCALE_TABLE, shards=layout.shards, sources=sources)
        done = ReshardCounts()

        def on_page(listed: int, counts: ReshardCounts) -> None:
            nonlocal done
            done = counts

        secret = DEV_CURSOR_SECRET.encode()
        async with open_store(config, cursor_secret=secret, layout=layout) as store:
            began = time.perf_counter()
            with contextlib.suppress(TimeoutError):
                job = reshard(store, start, checkpoint_path=None, on_page=on_page)
                await asyncio.wait_for(job, RESHARD_SECONDS)
            elapsed = time.perf_counter() - began
        return {
            "scanned": done.scanned,
            "moved": done.moved,
            "seconds": elapsed,
            "payments_per_second": done.scanned / elapsed if elapsed else 0.0,
        }
