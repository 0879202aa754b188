"""Live updates (issue 14, SPEC §10): subscriptions over WebSocket, fed by the DynamoDB Stream.

Two real server processes (`python -m cli serve`) share one DynamoDB Local table, as two
instances behind a load balancer would; a third-party client (`gql` over graphql-transport-ws)
subscribes on one while writes go through the other.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import jwt
import pytest
from gql import Client
from gql.graphql_request import GraphQLRequest
from gql.transport.exceptions import TransportConnectionFailed, TransportQueryError
from gql.transport.websockets import WebsocketsTransport
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from resolvers.event_hub import SLOW_CONSUMER_CODE, SLOW_CONSUMER_REASON
from tests.api.conftest import ALICE, SERVICE, token
from tests.api.graphql_ws_client import live_client
from tests.api.live_instances import EVENTS, METRICS, WAIT, Instance, Subscription, instances
from tests.api.websocket_client import TRANSPORT_WS, acknowledged, send
from tests.backends import Backend, fresh_table
from tests.servers import serving

REPO = Path(__file__).resolve().parents[2]


def transport(instance: Instance, bearer: str | None) -> WebsocketsTransport:
    return WebsocketsTransport(
        url=instance.ws_url,
        init_payload={} if bearer is None else {"Authorization": f"Bearer {bearer}"},
        subprotocols=[WebsocketsTransport.GRAPHQLWS_SUBPROTOCOL],
    )


@asynccontextmanager
async def subscribed(
    instance: Instance, bearer: str | None = SERVICE, *, state: str = "live", **variables: Any
) -> AsyncIterator[Subscription]:
    """A subscription on `instance`, once the instance counts it in `state` (`quiet`: another
    user's events); on leaving, until it counts it no more."""
    events: list[dict[str, Any]] = []
    before = await instance.subscriptions(state)

    async def run() -> None:
        async with Client(transport=transport(instance, bearer)) as session:
            request = GraphQLRequest(EVENTS, variable_values=variables)
            async for result in session.subscribe(request):
                events.append(result["paymentEvents"])

    task = asyncio.create_task(run())
    try:
        await instance.until_subscriptions(state, lambda count: task.done() or count > before)
        if task.done():
            task.result()  # raises what ended it
        yield Subscription(events, task)
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await task
    await instance.until_subscriptions(state, lambda count: count <= before)


CREATE = {"loanId": "loan-1", "amountCents": 4200, "method": "PINLESS"}


@pytest.mark.ddblocal
async def test_a_write_through_one_instance_reaches_a_subscriber_of_the_other(
    ddblocal_backend: Backend,
) -> None:
    async with (
        instances(ddblocal_backend, 2) as (a, b),
        subscribed(a, SERVICE, u="alice") as subscription,
    ):
        created = await b.mutate("createPayment", {"userId": "alice", **CREATE})
        declined = await b.mutate("failPayment", {**_ids(created), "reason": "card declined"})
        first, second = await subscription.wait_for(2)

    assert first["version"] == 1 and first["fromStatus"] is None
    assert first["toStatus"] == "PENDING"
    assert second == {
        "version": 2,
        "fromStatus": "PENDING",
        "toStatus": "FAILED",
        "reason": "card declined",
        "actorKind": "SERVICE",
        "actorId": "collections-job",
        # As stored now.
        "payment": {
            "paymentId": created["paymentId"],
            "userId": "alice",
            "status": declined["status"],
            "version": 2,
        },
    }


def _ids(payment: dict[str, Any]) -> dict[str, Any]:
    return {key: payment[key] for key in ("userId", "loanId", "paymentId")}


@pytest.mark.ddblocal
@pytest.mark.parametrize(
    ("bearer", "filters"),
    [
        pytest.param(ALICE, {}, id="a customer's own"),
        pytest.param(SERVICE, {"u": "alice"}, id="one user's"),
        pytest.param(ALICE, {"l": "loan-1", "p": "created"}, id="one payment's"),
        pytest.param(SERVICE, {}, id="every user's"),
    ],
)
async def test_without_after_version_only_events_stored_after_subscribing_arrive(
    ddblocal_backend: Backend, bearer: str, filters: dict[str, str]
) -> None:
    """SPEC §10: none of what was stored before. The poll is slow, so the creation stored just
    before subscribing is still unread when the subscription registers (Apollo Client got
    such a creation in 3 of 3 tries); writes go on until events arrive, so however long the
    subscription takes to be accepted, what it gets must be every version from one on."""
    async with instances(ddblocal_backend, 1, stream_poll_interval="1.0") as (server,):
        created = await server.mutate("createPayment", {"userId": "alice", **CREATE})
        variables = {k: created["paymentId"] if v == "created" else v for k, v in filters.items()}
        async with subscribed(server, bearer, **variables) as subscription:
            written = 1
            deadline = time.monotonic() + WAIT
            while len(subscription.events) < 2:
                assert time.monotonic() < deadline, subscription.events
                await server.mutate(
                    "schedulePaymentRetry", {**_ids(created), "reason": f"declined {written}"}
                )
                written += 1
                await asyncio.sleep(0.2)
            await subscription.wait_for(written - subscription.events[0]["version"] + 1)
            # Nothing else arrives: a move written now comes after anything else would.
            await server.mutate("schedulePaymentRetry", {**_ids(created), "reason": "sentinel"})
            written += 1
            await subscription.wait_for_version(created["paymentId"], written)
            versions = [event["version"] for event in subscription.events]

    assert versions[0] > 1  # not the creation, stored before
    assert versions == list(range(versions[0], written + 1))


@pytest.mark.ddblocal
async def test_customers_receive_their_own_events_only(ddblocal_backend: Backend) -> None:
    async with (
        instances(ddblocal_backend, 1) as (server,),
        subscribed(server, ALICE) as own,
        subscribed(server, ALICE, state="quiet", u="bob") as aimed_at_bob,
    ):
        await server.mutate("createPayment", {"userId": "bob", **CREATE})
        mine = await server.mutate("createPayment", {"userId": "alice", **CREATE})
        [event] = await own.wait_for(1)
        # Bob's event came first; had alice been sent it, it would be here before hers. Nothing
        # else arrives: alice's next payment comes after anything else would.
        sentinel = await server.mutate("createPayment", {"userId": "alice", **CREATE})
        await own.wait_for_version(sentinel["paymentId"], 1)
        assert own.events[:-1] == [event]
        assert aimed_at_bob.events == []
        assert not aimed_at_bob.task.done()  # a quiet stream, no error

    assert event["payment"]["paymentId"] == mine["paymentId"]
    assert event["actorKind"] == "SERVICE"
    assert event["actorId"] is None  # who inside the lender acted is internal


@pytest.mark.ddblocal
async def test_a_connection_without_a_valid_token_is_closed_as_forbidden(
    ddblocal_backend: Backend,
) -> None:
    async with instances(ddblocal_backend, 1) as (server,):
        for bearer in (None, "not-a-token", token("alice", ttl=-3600)):
            await _refused(server, bearer)


async def _refused(server: Instance, bearer: str | None) -> None:
    with pytest.raises(TransportConnectionFailed) as refused:
        async with Client(transport=transport(server, bearer)):
            pass
    closed = refused.value.__cause__
    # graphql-transport-ws's answer to a refused `connection_init`.
    assert isinstance(closed, ConnectionClosed), refused.value
    assert closed.rcvd is not None and closed.rcvd.code == 4403, closed


PROD_SECRET = "a-production-secret-that-is-long-enough-0123"


@pytest.mark.ddblocal
async def test_subscriptions_work_in_prod_with_its_own_tokens(ddblocal_backend: Backend) -> None:
    prod = {
        "env": "prod",
        "auth_jwt_secret": PROD_SECRET,
        "cursor_secret": "a-production-cursor-secret-long-enough-0123",
    }
    claims = {"sub": "svc", "scope": "payments:service", "exp": int(time.time()) + 60}
    service = jwt.encode(claims, PROD_SECRET, algorithm="HS256")
    async with (
        instances(ddblocal_backend, 1, **prod) as (server,),
        subscribed(server, service, u="alice") as subscription,
    ):
        await server.mutate("createPayment", {"userId": "alice", **CREATE}, as_=service)
        [event] = await subscription.wait_for(1)
        assert event["actorId"] == "svc"
        await _refused(server, SERVICE)  # the development token, refused as over HTTP


@pytest.mark.ddblocal
async def test_replay_across_reconnects_sends_every_version_once_in_order(
    ddblocal_backend: Backend,
) -> None:
    moves = 30  # PENDING -> RETRY, then RETRY -> RETRY: one presentment each
    async with instances(ddblocal_backend, 2) as (a, b):
        created = await b.mutate("createPayment", {"userId": "alice", **CREATE})
        final_version = 1 + moves

        async def write() -> None:
            for move in range(moves):
                await b.mutate(
                    "schedulePaymentRetry", {**_ids(created), "reason": f"declined {move}"}
                )
                await asyncio.sleep(0.02)

        writer = asyncio.create_task(write())
        seen: list[int] = []
        # Reconnect every few events, each time after the last version seen, as a client would.
        while not seen or seen[-1] < final_version:
            after = seen[-1] if seen else 0
            async with subscribed(
                a, ALICE, l="loan-1", p=created["paymentId"], after=after
            ) as subscription:
                await subscription.wait_for(min(3, final_version - after))
                seen += [event["version"] for event in subscription.events]
        await writer

    assert seen == list(range(1, final_version + 1))


@pytest.mark.ddblocal
async def test_bad_input_and_query_limits_are_refused_before_subscribing(
    ddblocal_backend: Backend,
) -> None:
    deep = (
        "subscription { paymentEvents { payment { loan { payments { edges { node { loan {"
        " payments { edges { node { loan { payments { edges { node { paymentId } } } } } } } }"
        " } } } } } } }"
    )
    refusals = [
        (GraphQLRequest(deep), "exceeds maximum operation depth"),
        (GraphQLRequest(EVENTS, variable_values={"after": 3}), "afterVersion: needs userId"),
        (
            GraphQLRequest(EVENTS, variable_values={"u": "a", "l": "l", "p": "x", "after": 0}),
            "paymentId:",
        ),
        (GraphQLRequest(EVENTS, variable_values={"u": "a#b"}), "userId:"),
        (GraphQLRequest(EVENTS, variable_values={"p": _UUID}), "paymentId: needs userId"),
    ]
    async with (
        instances(ddblocal_backend, 1) as (server,),
        Client(transport=transport(server, SERVICE)) as session,
    ):
        for request, words in refusals:
            with pytest.raises(TransportQueryError) as refused:
                async for _ in session.subscribe(request):
                    pass
            assert words in str(refused.value), refused.value
            if "depth" not in words:
                assert refused.value.errors is not None
                assert refused.value.errors[0]["extensions"]["code"] == "INVALID_INPUT"


_UUID = "0190f5a4-0000-7000-8000-000000000000"


# A poll slow enough that a burst of writes arrives in one batch or two: more events at once
# than a subscriber may hold (the hub's own tests show the bound).
POLL_SECONDS = 1.0


async def _burst(server: Instance, user: str) -> None:
    await asyncio.gather(
        *(server.mutate("createPayment", {"userId": user, **CREATE}) for _ in range(10))
    )


@pytest.mark.ddblocal
async def test_a_subscriber_that_falls_behind_is_closed_with_4413_without_completing(
    ddblocal_backend: Backend,
) -> None:
    """Its operation is not completed first: a `complete` tells graphql-ws and Apollo Client the
    stream ended normally, and they would not resubscribe (SPEC §17)."""
    # A queue of one: a drop leaves nothing queued, so an operation that ended with its
    # subscriber would end before its connection's close.
    settings = {"subscriber_queue_size": "1", "stream_poll_interval": str(POLL_SECONDS)}
    async with (
        instances(ddblocal_backend, 1, **settings) as (server,),
        connect(server.ws_url, subprotocols=[TRANSPORT_WS]) as socket,  # type: ignore[list-item]
    ):
        await acknowledged(socket, SERVICE)
        # One user's: accepted at once (every user's waits for a round of the slow poll, and
        # the burst could land before it).
        subscribe = {"query": EVENTS, "variables": {"u": "alice"}}
        await send(socket, {"id": "1", "type": "subscribe", "payload": subscribe})
        await server.until_subscriptions("live", lambda count: count == 1)
        await _burst(server, "alice")
        received: list[dict[str, Any]] = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                received.append(json.loads(await asyncio.wait_for(socket.recv(), WAIT)))

    assert closed.value.rcvd is not None, closed.value
    assert closed.value.rcvd.code == SLOW_CONSUMER_CODE, closed.value
    assert "afterVersion" in closed.value.rcvd.reason
    assert [message["type"] for message in received] == ["next"] * len(received), received


@pytest.mark.ddblocal
async def test_graphql_ws_resubscribes_after_falling_behind_and_misses_nothing(
    ddblocal_backend: Backend,
) -> None:
    """What an app sees across the 4413 close: graphql-ws retries, sends its subscriptions
    again, and gets what was written meanwhile (from its last afterVersion) and after."""
    settings = {"subscriber_queue_size": "3", "stream_poll_interval": str(POLL_SECONDS)}
    async with instances(ddblocal_backend, 1, **settings) as (server,):
        payment = await server.mutate("createPayment", {"userId": "gina", **CREATE})
        where = {"userId": "gina", "loanId": "loan-1", "paymentId": payment["paymentId"]}

        async def move(version: int) -> None:
            await server.mutate(
                "schedulePaymentRetry", {**_ids(payment), "reason": f"to {version}"}
            )

        async with (
            # Another user's: it falls behind no one.
            subscribed(server, SERVICE, u="sentinel") as sentinel,
            live_client(
                server, user={"userId": "gina"}, payment={**where, "afterVersion": 0}
            ) as client,
        ):
            await move(2)
            await client.wait_for_versions("payment", {1, 2})
            # The user's subscription falls behind; the payment's moves on meanwhile.
            await asyncio.gather(_burst(server, "gina"), move(3))
            await client.wait_resubscribed(0)
            # The burst's tail, read a poll later, may drop it again: write once an event
            # written after the burst was sent (the feed has read the burst), to subscriptions
            # taken up again.
            marker = await server.mutate("createPayment", {"userId": "sentinel", **CREATE})
            await sentinel.wait_for_version(marker["paymentId"], 1)
            await client.wait_subscribed()
            await move(4)
            await client.wait_for_versions("user", {4})
            await client.wait_for_versions("payment", {1, 2, 3, 4})

    assert (SLOW_CONSUMER_CODE, SLOW_CONSUMER_REASON) in client.closes
    assert client.completed == []
    assert set(client.versions("payment")) == {1, 2, 3, 4}


@pytest.mark.ddblocal
async def test_a_stopping_instance_closes_its_subscriptions_without_completing(
    ddblocal_backend: Backend,
) -> None:
    """A rolling deploy stops instances: their subscriptions are not completed first, so that
    graphql-ws and Apollo Client resubscribe (on another instance) rather than end."""
    table_name = await fresh_table(ddblocal_backend)
    async with (
        serving(
            ddblocal_backend.endpoint_url,
            table_name,
            stream_poll_interval=str(POLL_SECONDS),
            metrics=METRICS,
        ) as (service,),
        connect(service.ws_url, subprotocols=[TRANSPORT_WS]) as socket,  # type: ignore[list-item]
    ):
        await acknowledged(socket, SERVICE)
        subscribe = {"query": EVENTS, "variables": {"u": "alice"}}
        await send(socket, {"id": "1", "type": "subscribe", "payload": subscribe})
        await Instance(service.url).until_subscriptions("live", lambda count: count == 1)
        stopping = asyncio.create_task(asyncio.to_thread(service.stop))
        received: list[dict[str, Any]] = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                received.append(json.loads(await asyncio.wait_for(socket.recv(), WAIT)))
        await stopping
    await ddblocal_backend.client.delete_table(TableName=table_name)

    assert closed.value.rcvd is not None, closed.value
    assert closed.value.rcvd.code == 1012, closed.value
    assert received == [], received
