"""Budgets over WebSocket (SPEC §21), against a real server, in both protocols (graphql-transport-ws
and the legacy graphql-ws): a subscription is charged when it starts and each event its own
cost, which the event's `extensions.cost` shows; an operation over budget is an `error` message
with THROTTLED for that operation alone, and the socket stays open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.api.conftest import token
from tests.api.test_budgets import CREATE, PAGE, create_input, engine_cost
from tests.api.websocket_client import LEGACY_WS, TRANSPORT_WS, acknowledged, receive, send
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

EVENTS = """subscription($loan: ID!, $payment: ID!) {
  paymentEvents(userId: "alice", loanId: $loan, paymentId: $payment, afterVersion: 0) {
    version fromStatus toStatus at reason a: version b: version c: version d: version e: version
  }
}"""
CLIENT = token("job", service=True, azp="socket-client")


@pytest.fixture(scope="module")
async def url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        # A budget of 100 refilling at 1 a minute: nothing refills during the test.
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            max_query_cost="100",
            budget_service_rate=str(1 / 60),
            budget_service_burst="100",
            # A first parse costs what the operation does (tested in tests/api/test_budgets.py).
            budget_new_document_cost="1",
        ) as [url]:
            yield url
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


async def test_a_subscription_is_charged_as_it_starts_and_over_budget_is_an_error(
    url: str,
) -> None:
    headers = {"authorization": f"Bearer {CLIENT}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        created = (
            await http.post(
                "/graphql",
                json={
                    "query": CREATE.replace(
                        "__typename", "... on PaymentPayload { payment { paymentId } }"
                    ),
                    "variables": {"input": create_input()},
                },
            )
        ).json()
        payment = created["data"]["createPayment"]["payment"]["paymentId"]
        variables = {"loan": "loan-1", "payment": payment}
        async with connect(
            url.replace("http", "ws", 1) + "/graphql",
            subprotocols=[TRANSPORT_WS],  # type: ignore[list-item]
        ) as socket:
            await acknowledged(socket, CLIENT)
            await send(
                socket,
                {
                    "type": "subscribe",
                    "id": "1",
                    "payload": {"query": EVENTS, "variables": variables},
                },
            )
            event = await receive(socket)
            assert event["type"] == "next", event
            assert event["payload"]["data"]["paymentEvents"]["version"] == 1
            cost = event["payload"]["extensions"]["cost"]
            requested = engine_cost(EVENTS, variables)
            assert cost["requestedQueryCost"] == cost["actualQueryCost"] == requested
            assert cost["throttleStatus"]["maximumAvailable"] == 100
            assert requested > 10  # more than the budget holds once the mutations used it
            # The creation's 10, the subscription's start and its first event (all it selects).
            assert cost["throttleStatus"]["currentlyAvailable"] == 100 - 10 - 2 * requested

            while (
                await http.post(
                    "/graphql", json={"query": CREATE, "variables": {"input": create_input()}}
                )
            ).status_code != 429:
                pass
            page = {"query": PAGE, "variables": {"loan": "loan-1", "first": 20}}
            await send(socket, {"type": "subscribe", "id": "2", "payload": page})
            refused = await receive(socket)
            assert refused["type"] == "error" and refused["id"] == "2", refused
            [error] = refused["payload"]
            assert error["extensions"]["code"] == "THROTTLED"
            assert error["extensions"]["retryAfter"] > 0
            payload = {"query": EVENTS, "variables": variables}
            await send(socket, {"type": "subscribe", "id": "3", "payload": payload})
            refused = await receive(socket)
            assert (refused["type"], refused["id"]) == ("error", "3")
            # The socket is open: it answers a ping.
            await send(socket, {"type": "ping"})
            assert await receive(socket) == {"type": "pong"}


async def test_the_legacy_protocol_charges_a_subscription_and_over_budget_is_an_error(
    url: str,
) -> None:
    """subscriptions-transport-ws (`graphql-ws`): the same charges, its own `error` message (a
    payload object, not a list); the socket stays open and its subscription running."""
    client = token("job", service=True, azp="legacy-socket-client")
    headers = {"authorization": f"Bearer {client}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        created = (
            await http.post(
                "/graphql",
                json={
                    "query": CREATE.replace(
                        "__typename", "... on PaymentPayload { payment { paymentId } }"
                    ),
                    "variables": {"input": create_input()},
                },
            )
        ).json()
        payment = created["data"]["createPayment"]["payment"]["paymentId"]
        variables = {"loan": "loan-1", "payment": payment}
        async with connect(
            url.replace("http", "ws", 1) + "/graphql",
            subprotocols=[LEGACY_WS],  # type: ignore[list-item]
        ) as socket:
            await send(
                socket,
                {"type": "connection_init", "payload": {"Authorization": f"Bearer {client}"}},
            )
            assert await receive_past_keep_alive(socket) == {"type": "connection_ack"}
            payload = {"query": EVENTS, "variables": variables}
            await send(socket, {"type": "start", "id": "1", "payload": payload})
            event = await receive_past_keep_alive(socket)
            assert (event["type"], event["id"]) == ("data", "1"), event
            assert event["payload"]["data"]["paymentEvents"]["version"] == 1
            cost = event["payload"]["extensions"]["cost"]
            requested = engine_cost(EVENTS, variables)
            assert cost["requestedQueryCost"] == cost["actualQueryCost"] == requested
            assert cost["throttleStatus"]["currentlyAvailable"] == 100 - 10 - 2 * requested

            while (
                await http.post(
                    "/graphql", json={"query": CREATE, "variables": {"input": create_input()}}
                )
            ).status_code != 429:
                pass
            # The legacy protocol runs subscriptions alone.
            await send(socket, {"type": "start", "id": "2", "payload": payload})
            refused = await receive_past_keep_alive(socket)
            assert (refused["type"], refused["id"]) == ("error", "2"), refused
            assert refused["payload"]["extensions"]["code"] == "THROTTLED"
            assert refused["payload"]["extensions"]["retryAfter"] > 0
            # The socket is open and the first subscription still runs: stopping it completes it.
            await send(socket, {"type": "stop", "id": "1"})
            assert await receive_past_keep_alive(socket) == {"type": "complete", "id": "1"}


async def receive_past_keep_alive(socket: ClientConnection) -> dict[str, Any]:
    """The next message but the legacy protocol's keep-alives (`ka`)."""
    while (message := await receive(socket))["type"] == "ka":
        pass
    return message
