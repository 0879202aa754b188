"""The DynamoDB Local pass's references, made in a process of their own on the server core
(`RawClient`): the one call a workload needs, in a loop on as many connections as the service
is given, made by raw aioboto3 with one client kept open, like the service; and the same call as
a raw HTTP request, for wrk to send with no SDK at all, once it got the same items as aioboto3's
call. DynamoDB Local checks no signature, but it refuses a request without an `Authorization`
header and takes the access key and region from it, so they are the service's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aioboto3
import uvloop
from aiobotocore.config import AioConfig

from bench.data import Workload
from datasource.pages import MAX_PAGE_SIZE
from datasource.store import loan_query, status_query
from datasource.table import PK, SK
from domain import keys
from domain.enums import PaymentStatus
from domain.payment import LoanRef
from server.settings import LOCAL_AWS_CREDENTIALS, Settings


def call_parameters(call: str, variables: dict[str, Any], table_name: str) -> dict[str, Any]:
    """The service's own call for workload `call`: GetItem for one payment (eventually
    consistent, as it reads), its Query for a page with one item more than the page."""
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
    return {**query.parameters(table_name), "Limit": MAX_PAGE_SIZE + 1}


def percentile(values: list[int], fraction: float) -> float:
    """The nearest-rank percentile of `values` (0 < fraction <= 1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))])


@asynccontextmanager
async def raw_client(endpoint: str, **config: Any) -> AsyncIterator[Any]:
    """An aioboto3 client with the SDK's defaults but the service's pool size (the default of
    10 would hold 16 connections back), local credentials and region, and `config`."""
    settings = Settings(env="local", dynamodb_endpoint=endpoint)
    pool = {"max_pool_connections": settings.dynamodb_max_pool_connections}
    async with aioboto3.Session().client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=endpoint,
        config=AioConfig(**(pool | config)),
        **LOCAL_AWS_CREDENTIALS,
    ) as client:
        yield client


def _http_request(endpoint: str, call: str, parameters: dict[str, Any]) -> dict[str, Any]:
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


async def _answer(client: Any, endpoint: str, command: dict[str, Any]) -> dict[str, Any]:
    call = command["call"]
    parameters = call_parameters(call, command["variables"], command["table"])
    operation = client.get_item if call == "payment" else client.query

    def items(response: dict[str, Any]) -> Any:
        return [response["Item"]] if call == "payment" else response["Items"]

    if command["client"] == "http":
        # The raw request must get what the SDK's call gets, or the rates compare nothing.
        expected, request = (
            items(await operation(**parameters)),
            _http_request(endpoint, call, parameters),
        )
        sent = urllib.request.Request(request["url"], request["body"].encode(), request["headers"])
        with await asyncio.to_thread(urllib.request.urlopen, sent, timeout=30) as response:
            if items(json.loads(response.read())) != expected:
                raise RuntimeError(f"raw HTTP {call} on {command['table']}: not aioboto3's items")
        return request
    latencies: list[int] = []
    cpu, started = time.process_time(), time.perf_counter()
    deadline = started + command["seconds"]

    async def calls() -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter_ns()
            await operation(**parameters)
            latencies.append(time.perf_counter_ns() - began)

    await asyncio.gather(*(calls() for _ in range(command["connections"])))
    return {
        "calls": len(latencies),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "p50_ms": percentile(latencies, 0.50) / 1e6,
        "p99_ms": percentile(latencies, 0.99) / 1e6,
    }


# The worker process's event loop, and its client and endpoint, kept from call to call.
_worker: dict[str, Any] = {}


def _start_worker(endpoint: str, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    loop = _worker["loop"] = uvloop.new_event_loop()
    _worker["endpoint"], _worker["stack"] = endpoint, contextlib.AsyncExitStack()
    _worker["client"] = loop.run_until_complete(
        _worker["stack"].enter_async_context(raw_client(endpoint))
    )


def _in_worker(command: dict[str, Any]) -> dict[str, Any]:
    answer = _answer(_worker["client"], _worker["endpoint"], command)
    found: dict[str, Any] = _worker["loop"].run_until_complete(answer)
    return found


class RawClient:
    """The worker process, seen from the benchmark: one command, one answer."""

    def __init__(self, endpoint: str, core: int | None) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = context.Pool(1, _start_worker, (endpoint, core))

    def run(
        self,
        workload: Workload,
        table: str,
        connections: int,
        seconds: float,
        client: str = "aioboto3",
    ) -> dict[str, Any]:
        """`client`: `aioboto3` (the run's calls, seconds, CPU seconds, p50 and p99) or `http`
        (the raw request: its url, body and headers)."""
        command: dict[str, Any] = {"client": client, "call": workload.name, "table": table}
        command |= {"variables": workload.variables, "connections": connections, "seconds": seconds}
        found: dict[str, Any] = self._pool.apply(_in_worker, (command,))
        return found

    def stop(self) -> None:
        self._pool.terminate()
        self._pool.join()
