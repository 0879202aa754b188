"""Subscriptions within their caller's budget (SPEC §21, turn 6), against a real server through
real WebSocket clients: each event delivered is charged its answer's cost (`currentlyAvailable`
drops by it); with the budget empty the events wait, in order, until it holds their cost; a
subscriber whose waiting events pass the slow-consumer bound is closed 4413; and a caller's open
subscriptions are capped (the one over the cap is an `error` for that operation, the socket stays
open, a subscription completed, stopped or closed with its socket frees its slot), in
graphql-transport-ws and the legacy graphql-ws. The cap across a fleet, and a dead instance's
slots expiring: test_budgets_subscriptions_fleet.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from graphql import parse
from websockets.asyncio.client import connect

from engine import actual_cost
from resolvers.event_hub import SLOW_CONSUMER_CODE, SLOW_CONSUMER_REASON
from schema import payments_limits
from tests.api.conftest import SERVICE, token
from tests.api.live_instances import Instance
from tests.api.subscribers import Socket, moved, opened
from tests.api.test_budgets import SCHEMA, engine_cost
from tests.api.test_budgets_websocket import receive_past_keep_alive
from tests.api.websocket_client import LEGACY_WS, send
from tests.backends import Backend, fresh_table
from tests.eventually import WITHIN, eventually
from tests.servers import served

pytestmark = pytest.mark.ddblocal

# A payment's events from its first (a `next` as soon as the subscription is accepted), each
# answer with its loan's page: its actual cost is the page the loan holds.
PAGE_EVENTS = """subscription($u: ID!, $l: ID!, $p: ID!) {
  paymentEvents(userId: $u, loanId: $l, paymentId: $p, afterVersion: 0) {
    version toStatus
    payment { loan { payments(first: 40) { edges { node { paymentId status } } } } }
  }
}"""
# The same, each answer of a fixed cost, all of it used.
EVENTS = """subscription($u: ID!, $l: ID!, $p: ID!) {
  paymentEvents(userId: $u, loanId: $l, paymentId: $p, afterVersion: 0) {
    version toStatus a: version b: version c: version d: version e: version f: version
  }
}"""
# A customer's own payment's history, then its live events: a `next` as soon as it is accepted.
REPLAY = """subscription($l: ID!, $p: ID!) {
  paymentEvents(loanId: $l, paymentId: $p, afterVersion: 0) { version }
}"""
LOOKUP = '{ loan(userId: "nobody", loanId: "loan-1") { loanId userId } }'  # costs 3, all used
CAP = 3
QUEUE = 3
# Budgets of their own: one that never refills during a test, one that refills an event a
# second (EVENTS costs 10), one that takes 5 s an event.
STILL, STEADY, SLOW = "still", "steady", "slow"
OVERRIDES = f"{STILL}=0.001/1000,{STEADY}=10/200,{SLOW}=2/200"
PINLESS = {"amountCents": 4200, "method": "PINLESS"}


@pytest.fixture(scope="module")
async def url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            stream_poll_interval="0.1",
            max_attempts="40",
            max_query_cost="200",
            subscriber_queue_size=str(QUEUE),
            budget_overrides=OVERRIDES,
            budget_customer_max_subscriptions=str(CAP),
        ) as [url]:
            yield url
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


def client(name: str) -> str:
    return token(f"{name}-job", service=True, azp=name)


async def payment_of(url: str, user: str, loan: str) -> dict[str, Any]:
    return await Instance(url).mutate("createPayment", {"userId": user, "loanId": loan, **PINLESS})


def where(payment: dict[str, Any]) -> dict[str, str]:
    return {"u": payment["userId"], "l": payment["loanId"], "p": payment["paymentId"]}


async def drained(url: str, bearer: str) -> float:
    """Spends the budget until a request is refused (it holds less than LOOKUP's 3 then); when.
    LOOKUP is parsed here first for another caller: a text's first parse costs more."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        lookup = {"query": LOOKUP}
        await http.post("/graphql", json=lookup, headers={"authorization": f"Bearer {SERVICE}"})
        headers = {"authorization": f"Bearer {bearer}"}
        while (await http.post("/graphql", json=lookup, headers=headers)).status_code != 429:
            pass
    return time.monotonic()


async def test_each_event_is_charged_the_cost_of_its_answer(url: str) -> None:
    payment = await payment_of(url, "ann", "loan-a")
    await payment_of(url, "ann", "loan-a")  # a page of two
    async with opened(Instance(url).ws_url, client(STILL)) as socket:
        operation = await socket.subscribe(PAGE_EVENTS, where(payment))
        await eventually(
            lambda: socket.results(operation), what=lambda: f"the stored event: {socket.messages}"
        )
        for n in range(3):
            await moved(url, SERVICE, payment, f"move {n}")
        await eventually(
            lambda: len(socket.results(operation)) == 4, what=lambda: f"4 events: {socket.messages}"
        )

    results = socket.results(operation)
    assert [result["data"]["paymentEvents"]["version"] for result in results] == [1, 2, 3, 4]
    requested = engine_cost(PAGE_EVENTS, where(payment))
    available = []
    used = []
    for result in results:
        cost = result["extensions"]["cost"]
        answer = actual_cost(
            SCHEMA.served, parse(PAGE_EVENTS), None, payments_limits(), result["data"]
        )
        assert 0 < answer < requested  # a page of two payments, not of 40
        assert (cost["requestedQueryCost"], cost["actualQueryCost"]) == (requested, answer), cost
        available.append(cost["throttleStatus"]["currentlyAvailable"])
        used.append(answer)
    # Nothing refills meanwhile: each event takes what it cost from what the last one left.
    assert [available[n - 1] - available[n] for n in (1, 2, 3)] == used[1:], (available, used)


async def test_events_the_budget_cannot_pay_wait_in_order_until_it_can(url: str) -> None:
    payment = await payment_of(url, "bea", "loan-b")
    cost = engine_cost(EVENTS, where(payment))
    async with opened(Instance(url).ws_url, client(STEADY)) as socket:
        operation = await socket.subscribe(EVENTS, where(payment))
        await eventually(
            lambda: socket.results(operation), what=lambda: f"the stored event: {socket.messages}"
        )
        emptied = await drained(url, client(STEADY))
        for n in range(3):
            await moved(url, SERVICE, payment, f"move {n}")
        await eventually(
            lambda: len(socket.results(operation)) == 4, what=lambda: f"4 events: {socket.messages}"
        )
        arrived = time.monotonic()

    results = socket.results(operation)[1:]
    assert [result["data"]["paymentEvents"]["version"] for result in results] == [2, 3, 4]
    assert socket.kinds(operation) == ["next"] * 4
    # The budget held less than 3 when it was emptied and refills at 10 a second: the third
    # event could not be paid for before (3 x cost - 3) / 10 s.
    assert arrived - emptied >= (3 * cost - 3) / 10 - 0.05, (arrived - emptied, cost)
    for result in results:
        assert result["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"] < cost


async def test_a_subscriber_whose_waiting_events_pass_the_bound_is_closed_4413(url: str) -> None:
    payment = await payment_of(url, "cid", "loan-c")
    async with opened(Instance(url).ws_url, client(SLOW)) as socket:
        operation = await socket.subscribe(EVENTS, where(payment))
        await eventually(
            lambda: socket.results(operation), what=lambda: f"the stored event: {socket.messages}"
        )
        await drained(url, client(SLOW))
        # One event waits to be paid (5 s), QUEUE wait behind it, and one more is too many.
        for n in range(QUEUE + 2):
            await moved(url, SERVICE, payment, f"move {n}")
        await eventually(
            lambda: socket.closed is not None, what=lambda: f"a close: {socket.messages}"
        )

    assert socket.closed == (SLOW_CONSUMER_CODE, SLOW_CONSUMER_REASON)
    # Never completed: graphql-ws and Apollo Client resubscribe after the close.
    assert set(socket.kinds(operation)) <= {"next"}
    versions = [result["data"]["paymentEvents"]["version"] for result in socket.results(operation)]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) <= QUEUE + 2


async def test_a_caller_over_its_cap_gets_an_error_and_a_freed_slot_is_taken_again(
    url: str,
) -> None:
    customer = token("cara")
    payment = await payment_of(url, "cara", "loan-c")
    replay = {"l": payment["loanId"], "p": payment["paymentId"]}
    ws_url = Instance(url).ws_url
    async with opened(ws_url, customer) as first, opened(ws_url, customer) as second:
        held = [await first.subscribe(REPLAY, replay) for _ in range(CAP)]
        await eventually(
            lambda: all(first.results(op) for op in held),
            what=lambda: f"accepted: {first.messages}",
        )

        over = await second.subscribe(REPLAY, replay)
        await eventually(
            lambda: second.kinds(over) == ["error"], what=lambda: f"an error: {second.messages}"
        )
        assert second.error_code(over) == "TOO_MANY_SUBSCRIPTIONS"
        # The socket is open, and its other operations run.
        await second.ping()
        query = await second.subscribe('{ loan(loanId: "loan-c") { loanId } }')
        await eventually(
            lambda: second.kinds(query) == ["next", "complete"], what=lambda: str(second.messages)
        )
        assert second.pongs == 1 and second.closed is None

        # A subscription completed frees its slot.
        await first.complete(held[0])
        taken = await subscribed(second, REPLAY, replay)
        assert first.closed is None
    # So does a socket's close, for each of its subscriptions.
    async with opened(ws_url, customer) as third:
        for _ in range(CAP):
            await subscribed(third, REPLAY, replay)
        over = await third.subscribe(REPLAY, replay)
        await eventually(
            lambda: third.kinds(over) == ["error"], what=lambda: f"an error: {third.messages}"
        )
    assert second.results(taken)


async def subscribed(socket: Socket, query: str, variables: dict[str, Any]) -> str:
    """Subscribes until accepted (a freed slot is given back as its operation ends, a moment
    after the client asked); the accepted operation's id."""
    deadline = time.monotonic() + WITHIN
    while True:
        operation = await socket.subscribe(query, variables)
        if await socket.answered(operation) == "next":
            return operation
        assert socket.error_code(operation) == "TOO_MANY_SUBSCRIPTIONS", socket.messages
        assert time.monotonic() < deadline, f"no slot freed: {socket.messages}"


async def test_the_legacy_protocol_answers_a_subscription_over_the_cap_with_its_error(
    url: str,
) -> None:
    customer = token("cleo")
    payment = await payment_of(url, "cleo", "loan-c")
    replay = {"l": payment["loanId"], "p": payment["paymentId"]}
    async with connect(Instance(url).ws_url, subprotocols=[LEGACY_WS]) as socket:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {customer}"}}
        await send(socket, init)
        assert await receive_past_keep_alive(socket) == {"type": "connection_ack"}
        for n in range(1, CAP + 2):
            payload = {"query": REPLAY, "variables": replay}
            await send(socket, {"type": "start", "id": str(n), "payload": payload})
            answer = await receive_past_keep_alive(socket)
            if n <= CAP:
                assert (answer["type"], answer["id"]) == ("data", str(n)), answer
        assert (answer["type"], answer["id"]) == ("error", str(CAP + 1)), answer
        assert answer["payload"]["extensions"]["code"] == "TOO_MANY_SUBSCRIPTIONS"
        # Stopped, the first frees its slot.
        await send(socket, {"type": "stop", "id": "1"})
        assert await receive_past_keep_alive(socket) == {"type": "complete", "id": "1"}
        deadline = time.monotonic() + WITHIN
        n = CAP + 2
        while True:
            payload = {"query": REPLAY, "variables": replay}
            await send(socket, {"type": "start", "id": str(n), "payload": payload})
            answer = await receive_past_keep_alive(socket)
            if answer["type"] == "data":
                break
            assert answer["payload"]["extensions"]["code"] == "TOO_MANY_SUBSCRIPTIONS", answer
            assert time.monotonic() < deadline, answer
            n += 1
