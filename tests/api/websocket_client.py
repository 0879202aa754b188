"""graphql-transport-ws spoken by hand with `websockets`: the subprotocols' names, and sending,
receiving, the acknowledged `connection_init` and the close a socket ends with. For the protocol's
tests (tests/api/test_websocket_protocol.py) and the trusted subscriptions'
(tests/api/test_trusted_subscriptions.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tests.api.conftest import SERVICE

TRANSPORT_WS = "graphql-transport-ws"
LEGACY_WS = "graphql-ws"
WAIT = 10.0


async def send(socket: ClientConnection, message: Any) -> None:
    await socket.send(message if isinstance(message, str) else json.dumps(message))


async def receive(socket: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), WAIT))
    return message


async def acknowledged(socket: ClientConnection, bearer: str = SERVICE) -> None:
    await send(
        socket, {"type": "connection_init", "payload": {"Authorization": f"Bearer {bearer}"}}
    )
    assert await receive(socket) == {"type": "connection_ack"}


async def close_of(socket: ClientConnection) -> tuple[int, str]:
    """The code and reason the server closed with; every message before it is read past."""
    with pytest.raises(ConnectionClosed) as ended:
        while True:
            await asyncio.wait_for(socket.recv(), WAIT)
    assert ended.value.rcvd is not None, ended.value
    return ended.value.rcvd.code, ended.value.rcvd.reason
