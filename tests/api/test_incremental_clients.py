"""`@defer` and `@stream` as real clients read them from a real `python -m cli serve` (issue 66,
SPEC §22): over graphql-transport-ws, spoken by hand, a `next` a part, then `complete`, the loan
page with `history @defer` and `edges @stream(initialCount: 5)` ending with the data of the plain
query; `@defer` on a subscription's root field refused with the operation's `error`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from engine import Merged
from tests.api.conftest import SERVICE, token
from tests.api.test_incremental_delivery import LOAN_PAGE, PLAIN_LOAN_PAGE
from tests.api.websocket_client import TRANSPORT_WS, acknowledged, receive, send
from tests.backends import Backend, fresh_table
from tests.servers import served

pytestmark = pytest.mark.ddblocal

ALICE = token("alice")
PAYMENTS = 8
CREATE = """mutation($input: CreatePaymentInput!) {
  createPayment(input: $input) { ... on PaymentPayload { payment { paymentId } } }
}"""


@pytest.fixture(scope="module")
async def url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(ddblocal_backend.endpoint_url, table_name) as [url]:
            async with httpx.AsyncClient(
                base_url=url, headers={"authorization": f"Bearer {SERVICE}"}, timeout=30
            ) as http:
                for amount in range(PAYMENTS):
                    variables = {
                        "input": {
                            "userId": "alice",
                            "loanId": "loan-1",
                            "amountCents": 1000 + amount,
                            "method": "ACH",
                            "reason": "seed",
                        }
                    }
                    created = await http.post(
                        "/graphql", json={"query": CREATE, "variables": variables}
                    )
                    assert created.status_code == 200, created.text
            yield f"{url}/graphql"
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


async def plain_data(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            url,
            json={"query": PLAIN_LOAN_PAGE, "variables": {"loanId": "loan-1"}},
            headers={"authorization": f"Bearer {ALICE}"},
        )
    body = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def test_over_websocket_each_part_is_a_next_then_complete(url: str) -> None:
    plain = await plain_data(url)
    async with connect(url.replace("http://", "ws://"), subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, ALICE)
        await send(
            socket,
            {
                "type": "subscribe",
                "id": "page",
                "payload": {"query": LOAN_PAGE, "variables": {"loanId": "loan-1"}},
            },
        )
        messages: list[dict[str, Any]] = []
        while not messages or messages[-1]["type"] == "next":
            messages.append(await receive(socket))

    assert [message["type"] for message in messages[-1:]] == ["complete"]
    payloads = [message["payload"] for message in messages[:-1]]
    assert len(payloads) >= 2
    assert payloads[0]["hasNext"] is True and payloads[-1]["hasNext"] is False
    merged = Merged(payloads[0])
    for payload in payloads[1:]:
        merged.apply(payload)
    assert merged.data == plain
    assert not merged.errors


async def test_over_websocket_a_deferred_subscription_root_is_refused(url: str) -> None:
    async with connect(url.replace("http://", "ws://"), subprotocols=[TRANSPORT_WS]) as socket:  # type: ignore[list-item]
        await acknowledged(socket, ALICE)
        await send(
            socket,
            {
                "type": "subscribe",
                "id": "events",
                "payload": {"query": "subscription { ... @defer { paymentEvents { version } } }"},
            },
        )
        message = await receive(socket)

    assert message["type"] == "error"
    words = [error["message"] for error in message["payload"]]
    assert any("cannot be used on root subscription type" in w for w in words), words
    assert not any("Unknown directive" in w for w in words), words
