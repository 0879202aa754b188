"""GSI2 sharding at scale (SPEC §11): `paymentsByStatus` on 100,000 payments at 1, 4 and 16
shards, and the reshard job's rate.

Runs after the scale measurement. With one shard, the scale table and its service as they are.
For 4 and 16 shards, the same 100,000 payments are written afresh in that layout to a table of
their own, and a service started with `LOC_GSI2_SHARDS=N` is measured the same way: the first
page must be the one-shard service's, payment for payment (but for their ids, new ones at each
writing). Last, `server.reshard.reshard` (what `loc-payments reshard` runs) moves the scale
table's payments to 4 shards for at most `RESHARD_SECONDS`, which gives its rate: DynamoDB Local
applies writes one at a time, a few hundred a second here, so the whole table would take
minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench import generator
from bench.processes import Server
from bench.runs import answer, summary, timed_run
from bench.workloads import Workload
from datasource import open_store
from datasource.items import Item
from datasource.table import create_table_if_missing
from domain.keys import StatusLayout
from server.reshard import ReshardCheckpoint, ReshardCounts, reshard
from server.settings import DEV_CURSOR_SECRET, Settings

LAYOUTS = (1, 4, 16)
RESHARD_SECONDS = 20.0
DEBUG_DYNAMODB = {"X-Debug-DynamoDB": "1"}


async def measure_shards(
    *,
    endpoint: str,
    table: str,
    first_server: Server,
    workload: Workload,
    headers: dict[str, str],
    seconds: float,
    repetitions: int,
    items: Callable[[StatusLayout], Iterator[Item]],
    client: Callable[[], Any],
) -> dict[str, Any]:
    """Per layout: the service's latency and calls for `workload` (a `paymentsByStatus` page);
    and the reshard's rate. `items(layout)` are the scale table's items in `layout`; `client()`
    a DynamoDB client to write them with."""
    one_shard = await _measure(first_server, workload, headers, seconds, repetitions)
    results: dict[str, Any] = {"1": one_shard}
    for shards in LAYOUTS[1:]:
        sharded = f"{table}-{shards}-shards"
        async with client() as writer:
            await create_table_if_missing(writer, sharded, stream=False)
            await generator.load(writer, sharded, items(StatusLayout(shards)))
        server = Server(
            f"P3 on {shards} shards", "service-local",
            "--endpoint", endpoint, "--table", sharded, "--gsi2-shards", str(shards),
        )  # fmt: skip
        server.start()
        try:
            server.wait_ready()
            results[str(shards)] = await _measure(server, workload, headers, seconds, repetitions)
        finally:
            server.stop()
            async with client() as writer:
                await writer.delete_table(TableName=sharded)
        if _without_ids(results[str(shards)].pop("data")) != _without_ids(one_shard["data"]):
            raise RuntimeError(f"paymentsByStatus at {shards} shards differs from one shard's")
    one_shard.pop("data")
    # Last: DynamoDB Local stays slow for minutes after index-key rewrites on a large table.
    rate = await _reshard_rate(endpoint, table)
    return {"layouts": results, "reshard": rate}


def _without_ids(value: Any) -> Any:
    """A page without what differs between two writings of the same payments: their ids (new
    UUIDv7s each time, in the same order) and the cursors made of them."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _IDS}
    if isinstance(value, list):
        return [_without_ids(item) for item in value]
    return value


_IDS = {"id", "paymentId", "cursor", "endCursor"}


async def _measure(
    server: Server, workload: Workload, headers: dict[str, str], seconds: float, repetitions: int
) -> dict[str, Any]:
    document = answer(server.port, workload.body, headers | DEBUG_DYNAMODB)
    runs = []
    for repetition in range(repetitions):
        run = await timed_run(
            server, workload.body, headers, workload=workload.name,
            connections=1, seconds=seconds, repetition=repetition,
        )  # fmt: skip
        runs.append(run)
    return {
        "calls": document["extensions"]["dynamodb"]["operations"],
        "service": summary(runs),
        "data": document["data"],
    }


async def _reshard_rate(endpoint: str, table: str) -> dict[str, Any]:
    """The job, 1 -> 4 shards on `table`, for at most `RESHARD_SECONDS`."""
    layout = StatusLayout(4, also_read=(1,))
    config = Settings(
        env="local", table_name=table, dynamodb_endpoint=endpoint, dynamodb_read_timeout=60.0
    ).dynamo_config()
    start = ReshardCheckpoint(
        table_name=table, shards=layout.shards, sources=tuple(layout.source_partitions())
    )
    done = ReshardCounts()

    def on_page(listed: int, counts: ReshardCounts) -> None:
        nonlocal done
        done = counts

    async with open_store(config, cursor_secret=DEV_CURSOR_SECRET.encode(), layout=layout) as store:
        began = time.perf_counter()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                reshard(store, start, checkpoint_path=None, on_page=on_page), RESHARD_SECONDS
            )
        elapsed = time.perf_counter() - began
    return {
        "scanned": done.scanned,
        "moved": done.moved,
        "seconds": elapsed,
        "payments_per_second": done.scanned / elapsed if elapsed else 0.0,
    }
