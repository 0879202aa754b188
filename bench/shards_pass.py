"""GSI2 sharding on the scale table (SPEC §11): `paymentsByStatus` at 1, 4 and 16 shards, and the
reshard job's rate between them.

Runs after the scale measurement, on its table (100,000 payments, written in the seed's layout):
the service's p50/p99 at one connection and the DynamoDB calls of one page, with one shard; then
`server.reshard.reshard` (the job `loc-payments reshard` runs) moves every payment to 4 shards,
timed, and a service started with `LOC_GSI2_SHARDS=4` is measured the same way; then 4 -> 16.
"""

from __future__ import annotations

import time
from typing import Any

from bench.processes import Server
from bench.runs import answer, summary, timed_run
from bench.workloads import Workload
from datasource import open_store
from domain.keys import StatusLayout
from server.reshard import ReshardCheckpoint, reshard
from server.settings import DEV_CURSOR_SECRET, Settings

LAYOUTS = (1, 4, 16)
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
) -> dict[str, Any]:
    """Per layout: the service's latency and calls for `workload` (a `paymentsByStatus` page),
    and the reshard that led to it (payments, seconds, rate)."""
    results: dict[str, Any] = {}
    previous = 1
    for shards in LAYOUTS:
        moved: dict[str, Any] | None = None
        if shards != previous:
            moved = await _reshard(endpoint, table, StatusLayout(shards, also_read=(previous,)))
        server = first_server if shards == 1 else _service(endpoint, table, shards)
        try:
            calls = answer(server.port, workload.body, headers | DEBUG_DYNAMODB)["extensions"][
                "dynamodb"
            ]["operations"]
            runs = [
                await timed_run(
                    server,
                    workload.body,
                    headers,
                    workload=f"{workload.name}@{shards}",
                    connections=1,
                    seconds=seconds,
                    repetition=repetition,
                )
                for repetition in range(repetitions)
            ]
        finally:
            if server is not first_server:
                server.stop()
        results[str(shards)] = {"calls": calls, "service": summary(runs), "reshard": moved}
        previous = shards
    return results


def _service(endpoint: str, table: str, shards: int) -> Server:
    server = Server(
        f"P3 on {shards} shards",
        "service-local",
        "--endpoint", endpoint, "--table", table, "--gsi2-shards", str(shards),
    )  # fmt: skip
    server.start()
    server.wait_ready()
    return server


async def _reshard(endpoint: str, table: str, layout: StatusLayout) -> dict[str, Any]:
    config = Settings(env="local", table_name=table, dynamodb_endpoint=endpoint).dynamo_config()
    start = ReshardCheckpoint(
        table_name=table, shards=layout.shards, sources=tuple(layout.source_partitions())
    )
    async with open_store(config, cursor_secret=DEV_CURSOR_SECRET.encode(), layout=layout) as store:
        began = time.perf_counter()
        final = await reshard(store, start, checkpoint_path=None)
        elapsed = time.perf_counter() - began
    counts = final.counts
    return {
        "from": layout.also_read[0],
        "to": layout.shards,
        "scanned": counts.scanned,
        "moved": counts.moved,
        "in_place": counts.in_place,
        "seconds": elapsed,
        "payments_per_second": counts.scanned / elapsed if elapsed else 0.0,
    }
