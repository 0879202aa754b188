"""Trusted documents over WebSocket (SPEC §14): a customer under `trusted-for-customers`
subscribes by a document's id, its text is refused with an `error` message, a malformed id
closes the socket as a malformed message (4400); graphql-transport-ws spoken by hand."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator

import pytest
from websockets.asyncio.client import connect

from tests.api.conftest import SERVICE, token, without_cost
from tests.api.websocket_client import (
    TRANSPORT_WS,
    acknowledged,
    close_of,
    receive,
    send,
)
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

EVENTS = "subscription Events { paymentEvents { version } }"
DOCUMENT_ID = f"sha256:{hashlib.sha256(EVENTS.encode()).hexdigest()}"
ALICE = token("alice")


@pytest.fixture(scope="module")
async def ws_url(
    ddblocal_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    manifest = tmp_path_factory.mktemp("documents") / "persisted-documents.json"
    manifest.write_text(json.dumps({"events-v1": EVENTS}))
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            documents="trusted-for-customers",
            trusted_documents=str(manifest),
        ) as [url]:
            yield url.replace("http://", "ws://") + "/graphql"
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


@pytest.mark.parametrize("named", [{"documentId": DOCUMENT_ID}, {"doc_id": "events-v1"}])
async def test_a_customer_subscribes_by_id_and_its_text_is_refused(
    ws_url: str, named: dict[str, str]
) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, ALICE)
        await send(socket, {"type": "subscribe", "id": "text", "payload": {"query": EVENTS}})
        refused = await receive(socket)
        await send(socket, {"type": "subscribe", "id": "by-id", "payload": named})
        # The subscription runs: completing it is answered by nothing, a ping by a pong.
        await send(socket, {"type": "complete", "id": "by-id"})
        await send(socket, {"type": "ping"})
        pong = await receive(socket)

    assert refused["type"] == "error" and refused["id"] == "text"
    assert refused["payload"][0]["extensions"] == {"code": "DOCUMENT_NOT_TRUSTED"}
    assert pong == {"type": "pong"}


async def test_a_service_subscribes_by_text(ws_url: str) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, SERVICE)
        await send(socket, {"type": "subscribe", "id": "1", "payload": {"query": "{ __typename }"}})
        answer = await receive(socket)

    assert answer | {"payload": without_cost(answer["payload"])} == {
        "type": "next",
        "id": "1",
        "payload": {"data": {"__typename": "Query"}},
    }


@pytest.mark.parametrize(
    "payload",
    [{"documentId": "sha256:abc"}, {"documentId": 7}, {"doc_id": ""}],
    ids=["short-hash", "number", "empty"],
)
async def test_a_malformed_document_id_closes_the_socket_4400(
    ws_url: str, payload: dict[str, object]
) -> None:
    async with connect(ws_url, subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, ALICE)
        await send(socket, {"type": "subscribe", "id": "1", "payload": payload})
        code, _reason = await close_of(socket)

    assert code == 4400
