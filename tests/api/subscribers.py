"""Many operations on one graphql-transport-ws socket, each one's messages gathered in the
background, and the close the socket ended with: for the tests of subscriptions within their
caller's budget (tests/api/test_budgets_subscriptions*.py)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.api.websocket_client import TRANSPORT_WS, acknowledged, send
from tests.eventually import eventually

__all__ = ["Socket", "moved", "objects", "opened"]


class Socket:
    """One acknowledged socket: `messages` by operation id, when the last came (`last_at`,
    `time.monotonic()`), `pongs`, and `closed` (its code and reason) once the server closed it."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.last_at = 0.0
        self.pongs = 0
        self.closed: tuple[int, str] | None = None
        self._ids = itertools.count(1)

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        """Sends a `subscribe`; its operation id."""
        operation = str(next(self._ids))
        payload = {"query": query, "variables": variables or {}}
        await send(self.connection, {"type": "subscribe", "id": operation, "payload": payload})
        return operation

    async def complete(self, operation: str) -> None:
        await send(self.connection, {"type": "complete", "id": operation})

    async def ping(self) -> None:
        await send(self.connection, {"type": "ping"})

    async def answered(self, operation: str) -> str:
        """The type of the first message for `operation`, once it came."""
        messages = self.messages[operation]
        await eventually(
            lambda: messages, what=lambda: f"an answer to {operation}: {self.messages}"
        )
        kind: str = messages[0]["type"]
        return kind

    def kinds(self, operation: str) -> list[str]:
        return [message["type"] for message in self.messages[operation]]

    def results(self, operation: str) -> list[dict[str, Any]]:
        """The payloads of its `next` messages, in order."""
        return [m["payload"] for m in self.messages[operation] if m["type"] == "next"]

    def error_code(self, operation: str) -> str | None:
        """The code of its `error` message, if one came."""
        for message in self.messages[operation]:
            if message["type"] == "error":
                code: str = message["payload"][0]["extensions"]["code"]
                return code
        return None

    async def _gather(self) -> None:
        try:
            async for raw in self.connection:
                message = json.loads(raw)
                self.last_at = time.monotonic()
                if message["type"] == "pong":
                    self.pongs += 1
                elif "id" in message:
                    self.messages[message["id"]].append(message)
        except ConnectionClosed as closed:
            if closed.rcvd is not None:
                self.closed = (closed.rcvd.code, closed.rcvd.reason)
            return
        if self.connection.close_code is not None:
            self.closed = (self.connection.close_code, self.connection.close_reason or "")


@contextlib.asynccontextmanager
async def opened(ws_url: str, bearer: str) -> AsyncIterator[Socket]:
    """A socket acknowledged for `bearer`, its messages gathered until the block ends."""
    async with connect(ws_url, subprotocols=[TRANSPORT_WS], max_size=None) as connection:  # type: ignore[list-item]
        await acknowledged(connection, bearer)
        socket = Socket(connection)
        task = asyncio.create_task(socket._gather())
        try:
            yield socket
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def moved(url: str, bearer: str, payment: dict[str, Any], reason: str) -> int:
    """`schedulePaymentRetry` on `payment` (PINless: RETRY again and again); the new version."""
    ids = {key: payment[key] for key in ("userId", "loanId", "paymentId")}
    query = """mutation($input: SchedulePaymentRetryInput!) {
      schedulePaymentRetry(input: $input) { ... on PaymentPayload { payment { version } } }
    }"""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        answer = await http.post(
            "/graphql",
            json={"query": query, "variables": {"input": {**ids, "reason": reason}}},
            headers={"authorization": f"Bearer {bearer}"},
        )
    body = answer.json()
    assert "errors" not in body, body
    version: int = body["data"]["schedulePaymentRetry"]["payment"]["version"]
    return version


def objects(value: object) -> int:
    """The JSON objects in `value`, itself included."""
    if isinstance(value, dict):
        return 1 + sum(objects(item) for item in value.values())
    if isinstance(value, list):
        return sum(objects(item) for item in value)
    return 0
