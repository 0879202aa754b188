"""graphql-transport-ws as its protocol document says (SPEC §13): a test for every close code
(`server.websocket_protocol`), spoken by hand with `websockets` against a real server, and the
token's expiry closing a socket at `exp` and the leeway past it (SPEC §7), on both protocols."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import jwt
import pytest
from websockets.asyncio.client import connect

from tests.api.conftest import token, without_cost
from tests.api.websocket_client import (
    LEGACY_WS,
    TRANSPORT_WS,
    acknowledged,
    close_of,
    receive,
    send,
)
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

INIT_TIMEOUT = 1.0  # the server's LOC_WEBSOCKET_INIT_TIMEOUT here
LEEWAY = 1.0  # its LOC_AUTH_LEEWAY_SECONDS: the clock skew allowed past `exp`, short to wait little
EVENTS = "subscription { paymentEvents { version } }"


@pytest.fixture(scope="module")
async def ws_url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            websocket_init_timeout=str(INIT_TIMEOUT),
            auth_leeway_seconds=str(LEEWAY),
        ) as [url]:
            yield url.replace("http://", "ws://") + "/graphql"
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


def subscribe(operation_id: Any, **payload: Any) -> dict[str, Any]:
    return {"type": "subscribe", "id": operation_id, "payload": {"query": EVENTS, **payload}}


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("not json", "WebSocket message must be valid JSON"),
        ([{"type": "ping"}], "Failed to parse message"),
        ({"type": 5}, "Failed to parse message"),
        ({"payload": {}}, "Failed to parse message"),
        ({"type": "next", "id": "1", "payload": {}}, "Unknown message type: next"),
        ({"type": "subscribe", "payload": {"query": EVENTS}}, "needs a string id"),
        (subscribe(7), "needs a string id"),
        ({"type": "subscribe", "id": "1", "payload": "x"}, "payload with a string query"),
        ({"type": "subscribe", "id": "1", "payload": {}}, "payload with a string query"),
        (subscribe("1", operationName={"a": 1}), "`operationName` must be a string"),
        (subscribe("1", variables=[1]), "`variables` must be an object"),
        (subscribe("1", extensions="x"), "`extensions` must be an object"),
        ({"type": "complete"}, "needs a string id"),
    ],
)
async def test_a_malformed_message_closes_with_4400(ws_url: str, message: Any, words: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket)
        await send(socket, message)
        code, reason = await close_of(socket)
    assert code == 4400
    assert words in reason


async def test_a_connection_init_payload_that_is_not_an_object_closes_with_4400(
    ws_url: str,
) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await send(socket, {"type": "connection_init", "payload": "Bearer x"})
        assert await close_of(socket) == (4400, "Invalid connection init payload")


async def test_a_subscribe_before_the_ack_closes_with_4401(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await send(socket, subscribe("1"))
        assert await close_of(socket) == (4401, "Unauthorized")


@pytest.mark.parametrize("bearer", [None, "not-a-token", token("alice", ttl=-60 - int(LEEWAY))])
async def test_a_refused_token_closes_with_4403(ws_url: str, bearer: str | None) -> None:
    payload = {} if bearer is None else {"Authorization": f"Bearer {bearer}"}
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await send(socket, {"type": "connection_init", "payload": payload})
        assert await close_of(socket) == (4403, "Forbidden")


@pytest.mark.parametrize("subprotocols", [None, ["graphql-sse"]])
async def test_no_subprotocol_the_server_speaks_closes_with_4406(
    ws_url: str, subprotocols: list[str] | None
) -> None:
    async with connect(ws_url, subprotocols=subprotocols) as socket:  # type: ignore[arg-type]
        assert socket.subprotocol is None
        assert await close_of(socket) == (4406, "Subprotocol not acceptable")


async def test_no_connection_init_in_time_closes_with_4408(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        opened = time.monotonic()
        code, reason = await close_of(socket)
        waited = time.monotonic() - opened
    assert (code, reason) == (4408, "Connection initialisation timeout")
    assert INIT_TIMEOUT - 0.1 <= waited < INIT_TIMEOUT + 2


async def test_an_id_still_in_use_closes_with_4409(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket)
        await send(socket, subscribe("same"))
        await send(socket, {"type": "ping"})
        assert await receive(socket) == {"type": "pong"}  # the subscription is running
        await send(socket, subscribe("same"))
        assert await close_of(socket) == (4409, "Subscriber for same already exists")


async def test_an_id_completed_may_be_used_again(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket)
        await send(socket, subscribe("again"))
        await send(socket, {"type": "complete", "id": "again"})
        await send(
            socket, {"type": "subscribe", "id": "again", "payload": {"query": "{ __typename }"}}
        )
        answer = await receive(socket)
        assert answer | {"payload": without_cost(answer["payload"])} == {
            "id": "again",
            "type": "next",
            "payload": {"data": {"__typename": "Query"}},
        }


async def test_a_second_connection_init_closes_with_4429(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket)
        await send(socket, {"type": "connection_init", "payload": {}})
        assert await close_of(socket) == (4429, "Too many initialisation requests")


async def test_a_null_connection_init_payload_is_no_payload(ws_url: str) -> None:
    # The protocol document allows `payload: null`; without a token, that is a refusal.
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await send(socket, {"type": "connection_init", "payload": None})
        assert await close_of(socket) == (4403, "Forbidden")


async def test_the_socket_closes_with_4403_when_its_token_expires(ws_url: str) -> None:
    short = token("alice", ttl=2)
    expires = jwt.decode(short, options={"verify_signature": False})["exp"]
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, short)
        await send(socket, subscribe("events"))
        await send(socket, {"type": "ping"})
        assert await receive(socket) == {"type": "pong"}  # alive before `exp`
        code, reason = await close_of(socket)
        closed_at = time.time()
    assert (code, reason) == (4403, "token expired: reconnect with a fresh token")
    # When the HTTP endpoint stops accepting the token: `exp` and the leeway past it.
    assert expires + LEEWAY - 0.05 <= closed_at < expires + LEEWAY + 1.5


async def test_the_legacy_protocol_closes_when_its_token_expires(ws_url: str) -> None:
    short = token("alice", ttl=2)
    expires = jwt.decode(short, options={"verify_signature": False})["exp"]
    async with connect(ws_url, subprotocols=[LEGACY_WS]) as socket:  # type: ignore[list-item]
        await send(
            socket, {"type": "connection_init", "payload": {"Authorization": f"Bearer {short}"}}
        )
        assert await receive(socket) == {"type": "connection_ack"}
        await send(socket, {"type": "start", "id": "1", "payload": {"query": EVENTS}})
        code, reason = await close_of(socket)
        closed_at = time.time()
    assert (code, reason) == (4403, "token expired: reconnect with a fresh token")
    assert expires + LEEWAY - 0.05 <= closed_at < expires + LEEWAY + 1.5


@pytest.mark.parametrize(
    "query",
    ['query { payment(userId: "alice", loanId: "l", paymentId: "p") { id } }', "mutation { x }"],
    ids=["a-query", "a-mutation"],
)
async def test_the_legacy_protocol_answers_an_operation_not_a_subscription_with_an_error(
    ws_url: str, query: str
) -> None:
    """The legacy protocol runs subscriptions alone (Strawberry's handler): anything else is that
    operation's `error` message, not silence, and the socket goes on serving."""
    async with connect(ws_url, subprotocols=[LEGACY_WS]) as socket:  # type: ignore[list-item]
        await send(
            socket,
            {"type": "connection_init", "payload": {"Authorization": "Bearer " + token("alice")}},
        )
        assert await receive(socket) == {"type": "connection_ack"}
        await send(socket, {"type": "start", "id": "1", "payload": {"query": query}})
        while (answer := await receive(socket))["type"] == "ka":
            pass
        assert (answer["type"], answer["id"]) == ("error", "1"), answer
        assert "not allowed" in answer["payload"]["message"], answer
        # Still serving: the next operation is answered.
        await send(socket, {"type": "start", "id": "2", "payload": {"query": "subscription { x }"}})
        while (answer := await receive(socket))["type"] == "ka":
            pass
        assert (answer["type"], answer["id"]) == ("error", "2"), answer
        assert "Cannot query field 'x'" in answer["payload"]["message"], answer


@pytest.mark.parametrize(
    "payload",
    [
        {"operationName": "Nope"},
        {
            "query": "subscription A { paymentEvents { version } } subscription B { "
            "paymentEvents { version } }"
        },
        {"query": "subscription { nope }"},
        {"query": "query { nope"},
    ],
    ids=["an-unknown-operation-name", "no-operation-named", "invalid", "unparsable"],
)
async def test_a_subscribe_that_cannot_run_answers_an_error_and_the_socket_stays(
    ws_url: str, payload: dict[str, Any]
) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket)
        await send(socket, subscribe("1", **payload))
        answer = await receive(socket)
        assert (answer["type"], answer["id"]) == ("error", "1"), answer
        assert answer["payload"] and all("message" in error for error in answer["payload"])
        # The connection still serves: the same id may be used again for a valid operation.
        await send(socket, {"type": "ping"})
        assert await receive(socket) == {"type": "pong"}
