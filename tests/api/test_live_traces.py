"""A live update's trace leads back to the write (issue 32): two server processes on one DynamoDB
Local table export OTLP to the test's receiver; a subscriber on one instance (its trace named in
`connection_init`'s payload) receives a payment written through the other (its trace named in
`traceparent`), and the spans that read the event from the stream and deliver it are linked to
the mutation's span."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx
import pytest
from gql import Client
from gql.graphql_request import GraphQLRequest
from gql.transport.websockets import WebsocketsTransport

from tests.api.conftest import RESULT_FIELDS, SERVICE
from tests.api.live_instances import EVENTS, Instance, Subscription, instances
from tests.backends import Backend
from tests.otlp_receiver import ReceivedSpan, receiving

WRITE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
WRITE_PARENT = "00f067aa0ba902b7"
SUBSCRIBER_TRACE = "5ce0e9a56015fec5aadfa328ae398115"
SUBSCRIBER_PARENT = "ab3e9c3a1b9b2a11"


@asynccontextmanager
async def traced_subscription(instance: Instance, **variables: Any) -> AsyncIterator[Subscription]:
    """A subscription whose `connection_init` payload names the subscriber's trace."""
    transport = WebsocketsTransport(
        url=instance.ws_url,
        init_payload={
            "Authorization": f"Bearer {SERVICE}",
            "traceparent": f"00-{SUBSCRIBER_TRACE}-{SUBSCRIBER_PARENT}-01",
        },
        subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL],
    )
    events: list[dict[str, Any]] = []
    before = await instance.subscriptions()

    async def run() -> None:
        async with Client(transport=transport) as session:
            request = GraphQLRequest(EVENTS, variable_values=variables)
            async for result in session.subscribe(request):
                events.append(result["paymentEvents"])

    task = asyncio.create_task(run())
    try:
        await instance.until_subscriptions("live", lambda count: task.done() or count > before)
        if task.done():
            task.result()  # raises what ended it
        yield Subscription(events, task)
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await task


async def _create(instance: Instance) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=instance.url, timeout=10) as http:
        response = await http.post(
            "/graphql",
            json={
                "query": "mutation Create($input: CreatePaymentInput!) "
                f"{{ createPayment(input: $input) {{ {RESULT_FIELDS} }} }}",
                "variables": {
                    "input": {
                        "userId": "alice",
                        "loanId": "loan-1",
                        "amountCents": 4200,
                        "method": "PINLESS",
                    }
                },
            },
            headers={
                "Authorization": f"Bearer {SERVICE}",
                "traceparent": f"00-{WRITE_TRACE}-{WRITE_PARENT}-01",
            },
        )
    assert response.status_code == 200, response.text
    payment: dict[str, Any] = response.json()["data"]["createPayment"]["payment"]
    return payment


def _linked_to(span: ReceivedSpan, written: ReceivedSpan) -> bool:
    return any(
        (link.trace_id, link.span_id, link.attributes.get("loc.link"))
        == (written.trace_id, written.span_id, "write")
        for link in span.links
    )


@pytest.mark.ddblocal
async def test_a_live_update_is_linked_to_the_write_across_two_instances(
    ddblocal_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiving() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        async with (
            instances(ddblocal_backend, 2, otel_exporter="otlp") as (subscribed_to, written_to),
            traced_subscription(subscribed_to, u="alice") as subscription,
        ):
            created = await _create(written_to)
            [event] = await subscription.wait_for(1)
            spans = await receiver.wait_for(
                lambda found: (
                    sum(span.name == "receive payment event" for span in found) >= 2
                    and any(span.name == "deliver paymentEvents" for span in found)
                )
            )
    assert event["payment"]["paymentId"] == created["paymentId"]

    # The write: the mutation's span, a child of the caller's trace.
    [write] = [span for span in spans if span.name == "mutation Create"]
    assert (write.trace_id, write.parent_span_id) == (WRITE_TRACE, WRITE_PARENT)
    # Each instance read the event from the stream: a span of its own, linked to the write.
    received = [span for span in spans if span.name == "receive payment event"]
    assert len(received) == 2
    assert all(_linked_to(span, write) for span in received)
    assert all(span.kind == "SPAN_KIND_CONSUMER" for span in received)
    # The subscriber's instance sent it: linked to the write and to the subscription, whose
    # span continues the trace `connection_init` named.
    [subscribe] = [span for span in spans if span.name == "subscription"]
    assert (subscribe.trace_id, subscribe.parent_span_id) == (SUBSCRIBER_TRACE, SUBSCRIBER_PARENT)
    [delivered] = [span for span in spans if span.name == "deliver paymentEvents"]
    assert _linked_to(delivered, write)
    assert any(
        (link.trace_id, link.span_id, link.attributes.get("loc.link"))
        == (subscribe.trace_id, subscribe.span_id, "subscription")
        for link in delivered.links
    )
    assert delivered.attributes["loc.payment.version"] == 1
    # The event's `payment` was read for the delivery: a call in the delivery's trace.
    reads = [
        span
        for span in spans
        if span.trace_id == delivered.trace_id and span.kind == "SPAN_KIND_CLIENT"
    ]
    assert [span.name for span in reads] == ["DynamoDB.GetItem"]
