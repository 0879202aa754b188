"""The second pass, on DynamoDB Local (in memory): the service against the Node peer, raw
aioboto3 and DynamoDB Local's own rate, and the service's latency at scale.

Two tables, `base` (1,000 payments) and `scale` (the same and 99,000 more); then DynamoDB Local
moves to the load generator's core and a service per table runs on the server core.
1. The service on `base` against the Node.js peer (`bench/peers/node`, which must answer the
   service's `data` first), raw aioboto3 making the one call each workload needs, and that call
   over raw HTTP sent by wrk from the server core (DynamoDB Local's own rate), in rounds, the
   sides' order rotating; on the 100-item lists each run lasts 10 s after a warm-up
   (`LocalOptions`), and the report gives each ratio's spread over the rounds.
2. p50 at one connection on both tables (the same loan and page), the service's and raw
   aioboto3's (DynamoDB Local's own growth).
3. `by_status` at the default layout (SPEC §20: GSI2 in `LOC_GSI2_SHARDS` shards, merged), its
   own row: a service at the default settings on a third table holding `base`'s payments in
   that layout, against the one-shard service of 1., in turns.
The comparisons of 1. are like for like: every side reads the seed's one-shard GSI2 (`PAYMENT`).
Raw aioboto3 runs in a worker process on the server core, one client kept open; the raw HTTP
request (unsigned: DynamoDB Local checks no signature) is used once it got aioboto3's items.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import multiprocessing
import os
import statistics
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop
from graphql import parse

from bench import cpu_breakdown, data, load
from bench.data import Workload
from datasource import (
    GSI2PK,
    MAX_PAGE_SIZE,
    PK,
    SK,
    Item,
    create_table_if_missing,
    loan_query,
    projected_attributes,
    status_query,
)
from domain import keys
from domain.enums import PaymentStatus
from domain.keys import StatusLayout
from domain.payment import LoanRef
from engine import coordinates
from harness.processes import REGION, Process, Service, children
from process.embedded_dynamodb import EmbeddedDynamoDB
from process.settings import DEV_CURSOR_SECRET, DEV_JWT_SECRET, LOCAL_AWS_CREDENTIALS, Settings
from schema import build_schema
from schema.projection import payment_fields

__all__ = ["NODE_PEER", "LocalOptions", "LocalPass", "call_parameters", "raw_http_request"]

COMPARED = ("loan_page", "by_status", "payment")
LISTS = ("loan_page", "by_status")
SIDES = ("raw", "service", "node", "http")
SCALED = ("loan_page", "by_status")
SCALE_TABLE = "bench-scale-loc-service"
DEFAULTS_TABLE = "bench-defaults-loc-service"
NODE_PEER = Path(__file__).resolve().parent / "peers" / "node"
# GSI2's layout at the default settings (what `make run` and the stack write).
DEFAULT_LAYOUT = StatusLayout(keys.DEFAULT_GSI2_SHARDS)
# by_status at the default layout is timed at fewer connections than the comparison: at 16, its
# merge's 72 Queries a page each queued behind the others' on DynamoDB Local, and on a loaded
# machine pages ran past the request's time budget (3 s) into UNAVAILABLE answers, which are not
# pages served (`load.run_load` counts an answer holding GraphQL errors as failed).
DEFAULTS_CONNECTIONS = 4


@dataclass(frozen=True, slots=True)
class LocalOptions:
    """`seconds`, `warmup_seconds`, `repetitions`: every run's but the compared lists'. The
    comparison (1.) runs `compared_rounds` interleaved rounds; on the 100-item lists the service,
    the Node peer and raw aioboto3 each run `compared_seconds`, DynamoDB Local's own rate
    `raw_http_seconds`, after one warm-up run each of `compared_warmup_seconds` (issue 59: two
    seconds measured the peer's warm-up and idle costs as much as its pages)."""

    seconds: float
    warmup_seconds: float
    repetitions: int
    compared_seconds: float = 10.0
    compared_warmup_seconds: float = 3.0
    compared_rounds: int = 5
    raw_http_seconds: float = 5.0
    connections: int = 16
    base_users: int = 10
    scale_users: int = 1_000
    payments_per_user: int = 100


def call_parameters(
    workload: Workload, table_name: str, *, projected: bool = True
) -> dict[str, Any]:
    """The service's own call for `workload`: GetItem for one payment (eventually consistent,
    as it reads), its Query for a page with one item more than the page, reading the attributes
    the workload's document selects, as the service does (`schema.projection`); unless not
    `projected`: whole items, as the Node peer reads them."""
    call, variables = workload.name, workload.variables
    if call == "payment":
        key = {
            PK: {"S": keys.user_partition(variables["u"])},
            SK: {"S": keys.payment_sort_key(variables["l"], variables["p"])},
        }
        return {"TableName": table_name, "Key": key, "ConsistentRead": False}
    if call == "loan_page":
        query = loan_query(LoanRef(variables["u"], variables["l"]), status=None)
    else:
        query = status_query(PaymentStatus.PENDING, keys.GSI2_PARTITION)
    fields = payment_fields(coordinates(build_schema().served, parse(workload.query)))
    if fields is not None and projected:
        query = dataclasses.replace(query, projection=projected_attributes(fields))
    return {**query.parameters(table_name), "Limit": MAX_PAGE_SIZE + 1}


def percentile(values: list[int], fraction: float) -> float:
    """The nearest-rank percentile of `values` (0 < fraction <= 1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))])


def raw_http_request(endpoint: str, call: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Unsigned: the scope names the service's access key and region, the signature is none."""
    day = time.strftime("%Y%m%d", time.gmtime())
    scope = f"{LOCAL_AWS_CREDENTIALS['aws_access_key_id']}/{day}/{Settings(env='local').region}"
    return {
        "url": f"{endpoint}/",
        "body": json.dumps(parameters),  # the SDK's parameters are DynamoDB's own shapes
        "headers": {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810." + ("GetItem" if call == "payment" else "Query"),
            "Authorization": f"AWS4-HMAC-SHA256 Credential={scope}/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    }


async def _raw_run(
    client: Any,
    endpoint: str,
    kind: str,
    workload: Workload,
    table: str,
    connections: int,
    seconds: float,
) -> dict[str, Any]:
    """`kind` `aioboto3`: the workload's call in a loop on `connections` for `seconds`, its calls,
    seconds, CPU seconds, p50 and p99; `http`: the raw request for it (url, body, headers)."""
    parameters = call_parameters(workload, table)
    operation = client.get_item if workload.name == "payment" else client.query

    def items(response: dict[str, Any]) -> Any:
        return [response["Item"]] if workload.name == "payment" else response["Items"]

    if kind == "http":
        # The raw request must get what the SDK's call gets, or the rates compare nothing.
        expected = items(await operation(**parameters))
        request = raw_http_request(endpoint, workload.name, parameters)
        sent = urllib.request.Request(request["url"], request["body"].encode(), request["headers"])
        with await asyncio.to_thread(urllib.request.urlopen, sent, timeout=30) as response:
            if items(json.loads(response.read())) != expected:
                raise RuntimeError(f"raw HTTP {workload.name} on {table}: not aioboto3's items")
        return request
    latencies: list[int] = []
    cpu, started = time.process_time(), time.perf_counter()

    async def calls() -> None:
        while time.perf_counter() < started + seconds:
            began = time.perf_counter_ns()
            await operation(**parameters)
            latencies.append(time.perf_counter_ns() - began)

    await asyncio.gather(*(calls() for _ in range(connections)))
    return {
        "calls": len(latencies),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "p50_ms": percentile(latencies, 0.50) / 1e6,
        "p99_ms": percentile(latencies, 0.99) / 1e6,
    }


# The raw worker process's event loop, client and endpoint, kept from call to call.
_worker: dict[str, Any] = {}


def _start_worker(endpoint: str, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    loop = _worker["loop"] = uvloop.new_event_loop()
    stack = _worker["stack"] = contextlib.AsyncExitStack()  # kept: it holds the client open
    client = loop.run_until_complete(stack.enter_async_context(data.raw_client(endpoint)))
    _worker.update(endpoint=endpoint, client=client)


def _in_worker(*arguments: Any) -> dict[str, Any]:
    run = _raw_run(_worker["client"], _worker["endpoint"], *arguments)
    found: dict[str, Any] = _worker["loop"].run_until_complete(run)
    return found


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
        self.raw: Any = None  # the raw worker process (a multiprocessing pool of one)

    def _items(self, users: range) -> Iterator[Item]:
        per_user = self.options.payments_per_user
        first = users.start * per_user
        return data.items(
            users=users, loans_per_user=1, payments_per_loan=per_user, first_number=first
        )

    def _writer(self) -> Any:
        """A client for the writers: as many connections as writers, no parameter checks."""
        pool = {"max_pool_connections": data.WRITERS, "parameter_validation": False}
        return data.raw_client(self.database.endpoint_url, **pool)

    def _service(self, name: str, table: str, *, one_shard: bool = True) -> Service:
        """The service as `loc-payments serve` runs it (its request log, its metrics), without
        live updates (the pass's tables have no stream) or webhook delivery (no endpoint: its
        poll of the feed would be a Query a second the peer does not make)."""
        settings = {
            "live_updates": "false",
            "webhooks": "false",
            "metrics": "app",
            "log_level": "INFO",
        }
        if one_shard:
            # Like for like with the Node peer and raw aioboto3, which read the seed's one-shard
            # GSI2 (`PAYMENT`), as the pass's data is written.
            settings |= {"gsi2_shards": "1", "events_shards": "1"}
        service = Service(self.database.endpoint_url, table, settings, keep_stdout=False)
        service.name = name
        service.start()
        return service

    async def start(self) -> None:
        endpoint = self.database.start()
        async with self._writer() as client:
            for table in (self.table, SCALE_TABLE, DEFAULTS_TABLE):
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
        defaults = self._service("P3 at the defaults", DEFAULTS_TABLE, one_shard=False)
        # The comparisons' sides by index (`_side`): the one-shard service first, the peer third.
        self.servers = [*services, node, defaults]
        core = load.SERVER_CORE if load.pinning() else None
        self.raw = multiprocessing.get_context("spawn").Pool(1, _start_worker, (endpoint, core))

    def stop(self) -> None:
        if self.raw is not None:
            self.raw.terminate()
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
            # The same payments in the layout the service at the defaults writes.
            relaid = (
                item | {GSI2PK: {"S": DEFAULT_LAYOUT.partition(item["loc_payment_id"]["S"])}}
                for item in base_items
            )
            await data.load(client, DEFAULTS_TABLE, relaid)
        scale_payments = len(base_items) + extra["payments"]
        log(
            f"DynamoDB Local: {len(base_items):,} payments in one table, {scale_payments:,} in "
            f"the other ({extra['payments']:,} written in {extra['seconds']:.1f} s)"
        )
        if load.pinning():
            for jvm in children("java"):
                load.pin_process(jvm, {load.LOAD_CORE})
        for server in self.servers:
            load.listening(server)
        service, _, node, defaults = self.servers
        calls = load.check_same_data([self.work[n] for n in COMPARED], service, node, self.headers)
        # The same page at the defaults (cursors aside: an edge's cursor carries its shard).
        page = self.work["by_status"]
        uncursored = dataclasses.replace(page, query=page.query.replace(" endCursor", ""))
        calls_at_defaults = load.check_same_data([uncursored], defaults, service, self.headers)
        for server in self.servers if load.pinning() else ():
            # The threads its first requests made (libuv's pool) off its event loop's core.
            load.pin_event_loop(server.pid, {load.SERVER_CORE})
        with load.load_generator_core():
            comparison, resident = await self._compare()
            breakdown = await self._cpu_breakdown()
            log("service against the Node peer, raw aioboto3 and raw HTTP done; p50 at both sizes")
            scale = await self._scale()
            at_defaults = await self._by_status_at_defaults()
            log(f"by_status at the default layout ({DEFAULT_LAYOUT.shards} shards) done")
        return {
            "connections": options.connections,
            "compared": {
                "rounds": options.compared_rounds,
                "list_seconds": options.compared_seconds,
                "raw_http_seconds": options.raw_http_seconds,
                "warmup_seconds": options.compared_warmup_seconds,
                "payment_seconds": options.seconds,
            },
            "service_calls": calls,
            "comparison": comparison,
            "cpu_breakdown": breakdown,
            "base_payments": len(base_items),
            "scale_payments": scale_payments,
            "load": extra,
            "scale": scale,
            "by_status_defaults": {
                "gsi2_shards": DEFAULT_LAYOUT.shards,
                "connections": DEFAULTS_CONNECTIONS,
                "service_calls": calls_at_defaults["by_status"],
                **at_defaults,
            },
            # Its peak, read while it still runs.
            "service_memory": {
                "rss_mib_after_repetition": resident,
                "peak_rss_mib": service.peak_resident_mib(),
            },
        }

    async def _side(self, side: str, name: str, seconds: float) -> dict[str, Any]:
        """One run of one side on workload `name`, at the pass's connections."""
        workload, connections = self.work[name], self.options.connections
        if side in ("service", "node"):
            server = self.servers[0 if side == "service" else 2]
            run = await load.timed_run(server, workload, self.headers, connections, seconds)
            return {"rate": run.rate} | load.summary([run])
        if side == "raw":
            found = self.raw.apply(
                _in_worker, ("aioboto3", workload, self.table, connections, seconds)
            )
            return {
                "rate": found["calls"] / found["seconds"],
                "cpu_ms_per_call": 1000 * found["cpu_seconds"] / max(1, found["calls"]),
                "p50_ms": found["p50_ms"],
                "p99_ms": found["p99_ms"],
            }
        request = self.raw.apply(_in_worker, ("http", workload, self.table, 1, 0))
        core = load.SERVER_CORE if load.pinning() else None
        url, body, headers = request["url"], request["body"].encode(), request["headers"]
        wrk = await load.run_load(
            url, body, headers, connections=connections, seconds=seconds, core=core
        )
        if wrk.errors:
            raise RuntimeError(f"raw HTTP {name}: {wrk.errors} failed calls")
        return {
            "rate": wrk.rate,
            "p50_ms": wrk.p50_ms,
            "p99_ms": wrk.p99_ms,
            "load_generator_core_share": wrk.core_share,
        }

    async def _cpu_breakdown(self, name: str = "loan_page") -> dict[str, Any]:
        """Where the service's CPU goes on `name`, at the pass's connections: py-spy sampling
        it during one more run (`bench.cpu_breakdown`), apart from the measured ones."""
        service, seconds = self.servers[0], self.options.seconds
        workload, connections = self.work[name], self.options.connections
        run, parts = await cpu_breakdown.sampled(
            service.pid,
            seconds - 1,
            lambda: load.timed_run(service, workload, self.headers, connections, seconds),
        )
        cpu_ms = 1000 * run.server_cpu_seconds / max(1, run.requests)
        return {"workload": name, "server_cpu_ms_per_request": cpu_ms, "shares": parts}

    def _seconds(self, side: str, name: str, *, warmup: bool = False) -> float:
        """How long `side` runs on `name`: the lists long, one payment as every other run."""
        options = self.options
        if name not in LISTS:
            return options.warmup_seconds if warmup else options.seconds
        if warmup:
            return options.compared_warmup_seconds
        return options.raw_http_seconds if side == "http" else options.compared_seconds

    async def _compare(self) -> tuple[list[dict[str, Any]], list[float]]:
        """One warm-up run of each side on each workload, then the rounds: each side taking its
        turn at going first, each workload; the rows (each with its round), and the service's
        resident memory (MiB) after each round."""
        rows: list[dict[str, Any]] = []
        resident: list[float] = []
        for name in COMPARED:
            for side in SIDES:
                if seconds := self._seconds(side, name, warmup=True):
                    await self._side(side, name, seconds)
        for round_ in range(self.options.compared_rounds):
            for turn, name in enumerate(COMPARED):
                first = (round_ + turn) % len(SIDES)
                for side in SIDES[first:] + SIDES[:first]:
                    row = await self._side(side, name, self._seconds(side, name))
                    rows.append({"side": side, "workload": name, "round": round_} | row)
            resident.append(self.servers[0].resident_mib())
        return rows, resident

    async def _by_status_at_defaults(self) -> dict[str, Any]:
        """`by_status` (a PENDING page of 100) at `DEFAULTS_CONNECTIONS`, by the one-shard service
        and the service at the default layout in turns: each one's median rate, p50, p99."""
        one_shard, defaults = self.servers[0], self.servers[3]
        workload, connections = self.work["by_status"], DEFAULTS_CONNECTIONS
        runs: dict[str, list[load.Run]] = {"one_shard": [], "defaults": []}
        for repetition in range(self.options.repetitions):
            sides = [("one_shard", one_shard), ("defaults", defaults)]
            for side, server in sides if repetition % 2 == 0 else sides[::-1]:
                run = await load.timed_run(
                    server, workload, self.headers, connections, self.options.seconds
                )
                runs[side].append(run)
        return {side: load.summary(found) for side, found in runs.items()}

    async def _scale(self) -> dict[str, Any]:
        """p50 and p99 at one connection of the service and raw aioboto3 on both tables in turn;
        raw aioboto3's, the median of the repetitions' percentiles."""
        found: dict[str, Any] = {"service": {n: {} for n in SCALED}, "raw": {n: {} for n in SCALED}}
        sizes = (("base", self.servers[0], self.table), ("scale", self.servers[1], SCALE_TABLE))
        for repetition in range(self.options.repetitions):
            for turn, name in enumerate(SCALED):
                for size, server, table in sizes if (repetition + turn) % 2 else sizes[::-1]:
                    workload, seconds = self.work[name], self.options.seconds
                    run = await load.timed_run(server, workload, self.headers, 1, seconds)
                    raw = self.raw.apply(_in_worker, ("aioboto3", workload, table, 1, seconds))
                    found["service"][name].setdefault(size, []).append(run)
                    found["raw"][name].setdefault(size, []).append(raw)
        for name, size in [(name, size) for name in SCALED for size in ("base", "scale")]:
            found["service"][name][size] = load.summary(found["service"][name][size])
            raws = found["raw"][name][size]
            found["raw"][name][size] = {
                key: statistics.median_high(raw[key] for raw in raws)
                for key in ("p50_ms", "p99_ms")
            }
        return found
