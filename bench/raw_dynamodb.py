"""The DynamoDB Local pass's references, in a process of their own on the server's core: the one
call a workload needs, in a loop, on as many connections as the service is given, made by raw
aioboto3; and the same call as a raw HTTP request, for wrk to send.

    python -m bench.raw_dynamodb --endpoint URL [--core 1]

It keeps one aioboto3 client open, like the service, and reads commands from stdin, one JSON
object a line: the client, the workload, its GraphQL variables, the table, the concurrency and
how long to run, `{"client": "aioboto3", "call": "loan_page", "variables": {"u": "user-0000",
"l": "loan-00"}, "table": "...", "connections": 16, "seconds": 2.0}`. For each it answers one JSON
line, `{"calls": ..., "errors": ..., "seconds": ..., "cpu_seconds": ..., "p50_ms": ...,
"p99_ms": ...}`. End of input ends it.

With `"client": "http"` it answers the raw HTTP request for the call instead, `{"url": ...,
"body": ..., "headers": {...}}`, once it got the same items as aioboto3's call: wrk sends it with
no SDK at all (`bench.local_pass`), which gives DynamoDB Local's own rate for the call, the
physical limit of anything in front of it on this machine. DynamoDB Local checks no signature,
but it refuses a request without an `Authorization` header and takes the access key and region
from it (its database is per key and region unless started with -sharedDb), so they are the
service's.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import aioboto3
import uvloop
from aiobotocore.config import AioConfig

from datasource.pages import MAX_PAGE_SIZE
from datasource.store import loan_query, status_query
from datasource.table import PK, SK
from domain import keys
from domain.enums import PaymentStatus
from domain.payment import LoanRef
from server.settings import LOCAL_AWS_CREDENTIALS, Settings

# What the service asks for a full page: one item more, to learn whether a next page exists.
PAGE_LIMIT = MAX_PAGE_SIZE + 1
CONTENT_TYPE = "application/x-amz-json-1.0"
TARGET_PREFIX = "DynamoDB_20120810."


def call_parameters(call: str, variables: dict[str, str], table_name: str) -> dict[str, Any]:
    if call == "payment":
        key = {
            PK: {"S": keys.user_partition(variables["u"])},
            SK: {"S": keys.payment_sort_key(variables["l"], variables["p"])},
        }
        # As the service reads one payment: GetItem, eventually consistent.
        return {"TableName": table_name, "Key": key, "ConsistentRead": False}
    # The service's own Query for the page, one item more than the page.
    if call == "loan_page":
        query = loan_query(LoanRef(variables["u"], variables["l"]), status=None)
    else:
        query = status_query(PaymentStatus.PENDING, keys.GSI2_PARTITION)
    return {**query.parameters(table_name), "Limit": PAGE_LIMIT}


def percentile(values: list[int], fraction: float) -> float:
    """The nearest-rank percentile of `values` (0 < fraction <= 1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))
    return float(ordered[rank])


async def _calls(
    operation: Any, parameters: dict[str, Any], deadline: float, latencies: list[int]
) -> None:
    while time.perf_counter() < deadline:
        started = time.perf_counter_ns()
        await operation(**parameters)
        latencies.append(time.perf_counter_ns() - started)


def _operation_name(call: str) -> str:
    return "GetItem" if call == "payment" else "Query"


def _items(call: str, response: dict[str, Any], table_name: str) -> Any:
    return [response["Item"]] if call == "payment" else response["Items"]


def _http_headers(call: str, region: str) -> dict[str, str]:
    """Unsigned: the scope names the service's access key and region, the signature is none."""
    key, day = LOCAL_AWS_CREDENTIALS["aws_access_key_id"], time.strftime("%Y%m%d", time.gmtime())
    scope = f"{key}/{day}/{region}/dynamodb/aws4_request"
    return {
        "X-Amz-Target": TARGET_PREFIX + _operation_name(call),
        "Authorization": (f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"),
    }


def _post(host: str, port: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request(
            "POST", "/", body=body, headers={"Content-Type": CONTENT_TYPE, **headers}
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class Call:
    """One workload's DynamoDB call, ready for either client."""

    def __init__(self, client: Any, endpoint: str, region: str, command: dict[str, Any]) -> None:
        self.call: str = command["call"]
        self.table: str = command["table"]
        self.parameters = call_parameters(self.call, command["variables"], self.table)
        self.operation = client.get_item if self.call == "payment" else client.query
        address = urlsplit(endpoint)
        assert address.hostname is not None and address.port is not None
        self.host, self.port = address.hostname, address.port
        # The wire format is the SDK's parameters as JSON: they are DynamoDB's own shapes.
        self.body = json.dumps(self.parameters).encode()
        self.headers = _http_headers(self.call, region)

    async def check_http(self) -> None:
        """The raw request must get what the SDK's call gets, or the rates compare nothing."""
        expected = _items(self.call, await self.operation(**self.parameters), self.table)
        loop = asyncio.get_running_loop()
        status, raw = await loop.run_in_executor(
            None, _post, self.host, self.port, self.body, self.headers
        )
        what = f"raw HTTP {_operation_name(self.call)} on {self.table}"
        if status != 200:
            raise RuntimeError(f"{what}: HTTP {status} {raw[:500]!r}")
        found = _items(self.call, json.loads(raw), self.table)
        if found != expected:
            raise RuntimeError(
                f"{what}: {len(found)} items, aioboto3's call {len(expected)} (or other ones)"
            )

    def http_request(self) -> dict[str, Any]:
        return {
            "url": f"http://{self.host}:{self.port}/",
            "body": self.body.decode(),
            "headers": {"Content-Type": CONTENT_TYPE, **self.headers},
        }


async def _timed(call: Call, command: dict[str, Any]) -> dict[str, float]:
    latencies: list[int] = []
    cpu = time.process_time()
    started = time.perf_counter()
    deadline = started + command["seconds"]
    await asyncio.gather(
        *(
            _calls(call.operation, call.parameters, deadline, latencies)
            for _ in range(command["connections"])
        )
    )
    seconds = time.perf_counter() - started
    return {
        "calls": len(latencies),
        "errors": 0,
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "p50_ms": percentile(latencies, 0.50) / 1e6,
        "p99_ms": percentile(latencies, 0.99) / 1e6,
    }


@asynccontextmanager
async def raw_client(endpoint: str) -> AsyncIterator[Any]:
    """An aioboto3 client with the SDK's defaults but the service's pool size (the default of
    10 would hold 16 connections back) and its local credentials and region."""
    settings = Settings(env="local", dynamodb_endpoint=endpoint)
    config = AioConfig(max_pool_connections=settings.dynamodb_max_pool_connections)
    async with aioboto3.Session().client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=endpoint,
        config=config,
        **LOCAL_AWS_CREDENTIALS,
    ) as client:
        yield client


async def serve_commands(endpoint: str) -> None:
    settings = Settings(env="local", dynamodb_endpoint=endpoint)
    loop = asyncio.get_running_loop()
    async with raw_client(endpoint) as client:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command = json.loads(line)
            call = Call(client, endpoint, settings.region, command)
            if command["client"] == "http":
                await call.check_http()
                print(json.dumps(call.http_request()), flush=True)
            else:
                print(json.dumps(await _timed(call, command)), flush=True)


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
