"""A fleet for the tests of SPEC §17: instances of `python -m cli serve` on one DynamoDB Local
table, all behind a proxy that counts their DynamoDB calls, with a broker (`RedisServer`); and
subscriptions watched over graphql-transport-ws with the close each ended with."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from harness.processes import Service
from harness.proxy import Proxy, proxy_to
from tests.api.conftest import SERVICE
from tests.api.live_instances import EVENTS, MAX_ATTEMPTS, METRICS, Instance
from tests.api.websocket_client import TRANSPORT_WS, acknowledged, send
from tests.backends import Backend, fresh_table
from tests.servers import serving

# A poll of 0.25 s is 4 GetRecords a second on a shard: under DynamoDB's 5 with one reader,
# 4 x N with a reader per instance.
POLL_SECONDS = "0.25"
LEASE_SECONDS = "2"
WAIT = 20.0  # seconds an expected event or close may take, at most
GET_RECORDS = "DynamoDBStreams_20120810.GetRecords"


@dataclass
class Fleet:
    services: list[Service]
    instances: list[Instance]
    dynamodb: Proxy
    table_name: str

    async def readiness(self) -> list[dict[str, Any]]:
        """Each instance's `/readyz`; `{}` for one that does not answer (killed)."""
        answers: list[dict[str, Any]] = []
        async with httpx.AsyncClient(timeout=5) as http:
            for instance in self.instances:
                try:
                    answers.append((await http.get(f"{instance.url}/readyz")).json())
                except httpx.TransportError:
                    answers.append({})
        return answers

    async def readers(self) -> list[int]:
        """The indexes of the instances that read the table's stream now."""
        return [n for n, ready in enumerate(await self.readiness()) if ready.get("streamReader")]

    async def wait_for_reader(self, among: list[int] | None = None) -> int:
        """The one instance reading the stream, once there is one (among `among`)."""
        deadline = time.monotonic() + WAIT
        while True:
            readers = [n for n in await self.readers() if among is None or n in among]
            if len(readers) == 1:
                return readers[0]
            assert time.monotonic() < deadline, f"readers: {readers}"
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def fleet(
    backend: Backend, count: int, broker_url: str | None, **settings: str
) -> AsyncIterator[Fleet]:
    table_name = await fresh_table(backend)
    options = {
        "stream_poll_interval": POLL_SECONDS,
        "max_attempts": MAX_ATTEMPTS,
        "live_lease_seconds": LEASE_SECONDS,
        **({} if broker_url is None else {"live_broker_url": broker_url}),
        "metrics": METRICS,
        **settings,
    }
    try:
        async with (
            proxy_to(backend.endpoint_url) as dynamodb,
            serving(dynamodb.url, table_name, count, **options) as services,
        ):
            yield Fleet(services, [Instance(s.url) for s in services], dynamodb, table_name)
    finally:
        await backend.client.delete_table(TableName=table_name)


@dataclass
class Watcher:
    """One subscription's events, and the close its socket ended with."""

    events: list[dict[str, Any]] = field(default_factory=list)
    closed: tuple[int, str] | None = None
    completed: bool = False  # the server sent `complete` (a client would not resubscribe)
    task: asyncio.Task[None] | None = None

    def versions(self, payment_id: str | None = None) -> list[int]:
        return [
            e["version"]
            for e in self.events
            if payment_id is None or e["payment"]["paymentId"] == payment_id
        ]

    async def wait(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not done():
            assert time.monotonic() < deadline, f"{what}; got {len(self.events)} events"
            assert self.task is not None
            if self.task.done() and not done():
                raise AssertionError(f"{what}; the socket closed with {self.closed}")
            await asyncio.sleep(0.02)

    async def wait_for(self, count: int) -> None:
        await self.wait(lambda: len(self.events) >= count, f"waiting for {count} events")

    async def wait_for_version(self, payment_id: str, version: int) -> None:
        await self.wait(
            lambda: version in self.versions(payment_id), f"waiting for {payment_id} v{version}"
        )

    async def wait_closed(self) -> tuple[int, str]:
        await self.wait(lambda: self.closed is not None, "waiting for the close")
        assert self.closed is not None
        return self.closed


async def _follow(socket: ClientConnection, watcher: Watcher) -> None:
    try:
        while True:
            message = json.loads(await socket.recv())
            if message["type"] == "next":
                assert "errors" not in message["payload"], message
                watcher.events.append(message["payload"]["data"]["paymentEvents"])
            elif message["type"] == "error":
                watcher.closed = (0, json.dumps(message))
                return
            elif message["type"] == "complete":
                watcher.completed = True
    except ConnectionClosed as ended:
        watcher.closed = (ended.rcvd.code, ended.rcvd.reason) if ended.rcvd else (1006, "")


@contextlib.asynccontextmanager
async def watching(
    instance: Instance, bearer: str = SERVICE, **variables: Any
) -> AsyncIterator[Watcher]:
    """A subscription to `paymentEvents(variables)` on `instance`, once the instance counts it
    live; on leaving (its socket not closed by the server), until it counts it no more."""
    before = await instance.subscriptions()
    async with connect(instance.ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, bearer)
        await send(
            socket,
            {"id": "1", "type": "subscribe", "payload": {"query": EVENTS, "variables": variables}},
        )
        watcher = Watcher()
        watcher.task = asyncio.create_task(_follow(socket, watcher))
        try:
            await instance.until_subscriptions(
                "live", lambda count: watcher.closed is not None or count > before
            )
            yield watcher
        finally:
            watcher.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher.task
    if watcher.closed is None:
        await instance.until_subscriptions("live", lambda count: count <= before)
