"""`@defer` and `@stream` as real clients read them from a real `python -m cli serve` (issue 66,
SPEC §22). The loan page with `history @defer` and `edges @stream(initialCount: 5)` ends with the
data of the plain query over graphql-transport-ws (spoken by hand: a `next` a part, then
`complete`) and through the clients `tools/trusted-documents/`'s lock pins (`loan-page.mjs`):
Apollo Client 4 with each of its two incremental handlers, urql, and relay-runtime over meros,
each sending its own Accept header and served its format. `@defer` on a subscription's root
field is refused with the operation's `error`."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
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

TOOL = Path(__file__).resolve().parents[2] / "tools" / "trusted-documents"

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


async def loan_page_client(url: str, client: str) -> dict[str, Any]:
    """What `loan-page.mjs` printed: the client's final data, the Accept header it sent, the
    parts it read."""
    node = shutil.which("node")
    assert node is not None, "the clients run under Node (installed with npm)"
    if client == "relay":  # its artifacts, from the document (git-ignored)
        compiler = await asyncio.create_subprocess_exec(
            str(TOOL / "node_modules" / ".bin" / "relay-compiler"),
            "relay.loan-page.config.json",
            cwd=TOOL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        compiled, _ = await asyncio.wait_for(compiler.communicate(), 60)
        assert compiler.returncode == 0, compiled.decode()
    process = await asyncio.create_subprocess_exec(
        node,
        str(TOOL / "loan-page.mjs"),
        "--client",
        client,
        "--url",
        url,
        "--token",
        ALICE,
        "--loan-id",
        "loan-1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize(
    ("client", "accept", "content_type"),
    [
        (
            "apollo-defer20220824",
            "multipart/mixed;deferSpec=20220824,application/graphql-response+json,"
            "application/json;q=0.9",
            'multipart/mixed; boundary="-"; deferSpec=20220824',
        ),
        (
            "apollo-graphql17alpha9",
            "multipart/mixed;incrementalSpec=v0.2,application/graphql-response+json,"
            "application/json;q=0.9",
            'multipart/mixed; boundary="-"; incrementalSpec=v0.2',
        ),
        (
            "urql",
            "application/graphql-response+json, application/graphql+json, application/json,"
            " text/event-stream, multipart/mixed",
            'multipart/mixed; boundary="-"; deferSpec=20220824',
        ),
        (
            "relay",
            "multipart/mixed;deferSpec=20220824, application/json",
            'multipart/mixed; boundary="-"; deferSpec=20220824',
        ),
    ],
)
async def test_a_real_client_ends_with_the_plain_data(
    url: str, client: str, accept: str, content_type: str
) -> None:
    plain = await plain_data(url)

    read = await loan_page_client(url, client)

    assert read["accept"] == accept
    assert read["contentType"] == content_type
    # The app had the page's first five payments, without their history, before the rest.
    assert read["updates"][0] == 5
    assert read["updates"][-1] == PAYMENTS
    assert without_typenames(read["data"]) == plain


def without_typenames(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_typenames(v) for k, v in value.items() if k != "__typename"}
    if isinstance(value, list):
        return [without_typenames(item) for item in value]
    return value
