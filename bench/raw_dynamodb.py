"""Raw aioboto3, the DynamoDB Local pass's reference: the one call a workload needs, in a loop,
on as many connections as the service is given, in a process of its own on the server's core.

    python -m bench.raw_dynamodb --endpoint URL [--core 1]

It keeps one client open, like the service, and reads commands from stdin, one JSON object a
line: the workload, its GraphQL variables, the table, the concurrency and how long to run,
`{"call": "loan_page", "variables": {"u": "user-0000", "l": "loan-00"}, "table": "...",
"connections": 16, "seconds": 2.0}`. For each it answers one JSON line,
`{"calls": ..., "seconds": ..., "cpu_seconds": ..., "p50_ms": ..., "p99_ms": ...}`.
End of input ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

import aioboto3
import uvloop
from aiobotocore.config import AioConfig

from bench.loadgen import percentile
from datasource.table import GSI2
from domain import keys
from domain.enums import PaymentStatus
from server.settings import LOCAL_AWS_CREDENTIALS, Settings

# What the service asks for a page of 100: one item more, to learn whether a next page exists.
PAGE_LIMIT = 101


def _parameters(call: str, variables: dict[str, str], table_name: str) -> dict[str, Any]:
    if call == "payment":
        key = {
            "PK": {"S": keys.user_partition(variables["u"])},
            "SK": {"S": keys.payment_sort_key(variables["l"], variables["p"])},
        }
        return {"RequestItems": {table_name: {"Keys": [key], "ConsistentRead": True}}}
    if call == "loan_page":
        partition, prefix, index = (
            ("PK", keys.user_partition(variables["u"])),
            ("SK", keys.loan_payments_prefix(variables["l"])),
            None,
        )
    else:
        partition, prefix, index = (
            ("GSI2PK", keys.GSI2_PARTITION),
            ("GSI2SK", keys.status_prefix(PaymentStatus.PENDING)),
            GSI2,
        )
    parameters: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": f"{partition[0]} = :pk AND begins_with({prefix[0]}, :prefix)",
        "ExpressionAttributeValues": {":pk": {"S": partition[1]}, ":prefix": {"S": prefix[1]}},
        "ScanIndexForward": False,
        "Limit": PAGE_LIMIT,
    }
    if index is not None:
        parameters["IndexName"] = index
    return parameters


async def _calls(
    operation: Any, parameters: dict[str, Any], deadline: float, latencies: list[int]
) -> None:
    while time.perf_counter() < deadline:
        started = time.perf_counter_ns()
        await operation(**parameters)
        latencies.append(time.perf_counter_ns() - started)


async def _timed(client: Any, command: dict[str, Any]) -> dict[str, float]:
    call = command["call"]
    operation = client.batch_get_item if call == "payment" else client.query
    parameters = _parameters(call, command["variables"], command["table"])
    latencies: list[int] = []
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + command["seconds"]
    await asyncio.gather(
        *(_calls(operation, parameters, deadline, latencies) for _ in range(command["connections"]))
    )
    return {
        "calls": len(latencies),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "p50_ms": percentile(latencies, 0.50) / 1e6,
        "p99_ms": percentile(latencies, 0.99) / 1e6,
    }


async def serve_commands(endpoint: str) -> None:
    settings = Settings(env="local", dynamodb_endpoint=endpoint)
    session = aioboto3.Session()
    loop = asyncio.get_running_loop()
    # The service's pool size; the SDK's default of 10 would hold 16 connections back.
    config = AioConfig(max_pool_connections=settings.dynamodb_max_pool_connections)
    async with session.client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=endpoint,
        config=config,
        **LOCAL_AWS_CREDENTIALS,
    ) as client:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            print(json.dumps(await _timed(client, json.loads(line))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_dynamodb")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--core", type=int, help="run on this CPU core only")
    arguments = parser.parse_args()
    if arguments.core is not None:
        os.sched_setaffinity(0, {arguments.core})
    uvloop.run(serve_commands(arguments.endpoint))


if __name__ == "__main__":
    main()
