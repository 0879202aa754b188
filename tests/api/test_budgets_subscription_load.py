"""Issue 64's "Done when" for subscriptions (SPEC §21, turn 6), through real processes: a customer
holding 4 sockets of 20 subscriptions, each answering every event with its loan's page of 40
payments, while 8 moves are made on its payments. The objects delivered to it, from its first
subscribe to its last event, are at most 1.25 x (restoreRate x that time + maximumAvailable),
and every subscriber (each keeps up) gets every event of its payment, none lost, none reordered.

Each subscription replays its payment's stored event first (`afterVersion: 0`), so that it is
known to be accepted before the moves; half watch one payment, half another, and the moves go
to each in turn: 80 x 5 events costing 126 each, and 80 starts as much, against a budget of 5,000
a second and 11,000 held (the starts), so it binds for most of the run (about 10 s). Besides the
bound, what the budget was charged (each start, each event's actual cost) fits what it held and
refilled: with the events not charged, it did not (every event showed the start's charge)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.api.conftest import SERVICE, token
from tests.api.live_instances import Instance
from tests.api.subscribers import Socket, moved, objects, opened
from tests.backends import Backend, fresh_table
from tests.eventually import eventually
from tests.servers import served

pytestmark = pytest.mark.ddblocal

SOCKETS, PER_SOCKET = 4, 20
PAGE = 40
MOVES = 8
WATCHED = 2  # the payments the subscriptions watch, the moves made on each in turn
RATE, BURST = 5_000, 11_000  # the burst holds the 80 starts
SUBSCRIPTION = """subscription($l: ID!, $p: ID!) {
  paymentEvents(loanId: $l, paymentId: $p, afterVersion: 0) {
    version payment { paymentId loan { payments(first: 40) { edges { node { paymentId } } } } }
  }
}"""
CUSTOMER = "dora"
LOAN = "loan-d"
RUN = 60.0  # seconds the events may take, at most (about 10 here)


@pytest.fixture(scope="module")
async def url(ddblocal_backend: Backend) -> AsyncIterator[str]:
    table_name = await fresh_table(ddblocal_backend)
    try:
        async with served(
            ddblocal_backend.endpoint_url,
            table_name,
            stream_poll_interval="0.1",
            max_attempts="40",
            budget_customer_rate=str(RATE),
            budget_customer_burst=str(BURST),
        ) as [url]:
            yield url
    finally:
        await ddblocal_backend.client.delete_table(TableName=table_name)


async def test_a_customers_subscriptions_get_no_more_than_its_budget_and_miss_nothing(
    url: str,
) -> None:
    instance = Instance(url)
    created = {"userId": CUSTOMER, "loanId": LOAN, "amountCents": 4200, "method": "PINLESS"}
    payments = await asyncio.gather(
        *(instance.mutate("createPayment", created) for _ in range(PAGE))
    )
    watched = payments[:WATCHED]
    customer = token(CUSTOMER)
    async with contextlib.AsyncExitStack() as stack:
        sockets = [
            await stack.enter_async_context(opened(instance.ws_url, customer))
            for _ in range(SOCKETS)
        ]
        started = time.monotonic()
        subscriptions: list[tuple[Socket, str, int]] = []
        for n in range(SOCKETS * PER_SOCKET):
            socket, payment = sockets[n // PER_SOCKET], n % WATCHED
            variables = {"l": LOAN, "p": watched[payment]["paymentId"]}
            subscriptions.append((socket, await socket.subscribe(SUBSCRIPTION, variables), payment))

        def versions() -> list[list[int]]:
            return [
                [result["data"]["paymentEvents"]["version"] for result in s.results(op)]
                for s, op, _ in subscriptions
            ]

        await eventually(
            lambda: all(versions()), what=lambda: f"every replay: {versions()}", within=RUN
        )
        replayed = time.monotonic() - started
        for n in range(MOVES):
            await moved(url, SERVICE, watched[n % WATCHED], f"move {n}")
        moves_made = time.monotonic() - started
        expected = [1, *range(2, 2 + MOVES // WATCHED)]
        await eventually(
            lambda: all(v == expected for v in versions()),
            what=lambda: f"every event: {versions()}",
            within=RUN,
        )
        last = max(socket.last_at for socket in sockets)

    results = [result for s, op, _ in subscriptions for result in s.results(op)]
    costs = [result["extensions"]["cost"] for result in results]
    delivered = sum(objects(result["data"]) for result in results)
    status = costs[-1]["throttleStatus"]
    seconds = last - started
    bound = 1.25 * (status["restoreRate"] * seconds + status["maximumAvailable"])
    # What the budget was charged for it: the 80 starts, and each event's answer.
    charged = len(subscriptions) * costs[0]["requestedQueryCost"]
    charged += sum(cost["actualQueryCost"] for cost in costs)
    figures = {
        "events": len(results),
        "objects delivered": delivered,
        "seconds": round(seconds, 2),
        "bound": round(bound),
        "charged": charged,
        "the budget's rate x seconds + burst": round(RATE * seconds + BURST),
        "replays in (s)": round(replayed, 2),
        "moves made by (s)": round(moves_made, 2),
        "throttleStatus": status,
    }
    print(figures)
    assert versions() == [expected] * len(subscriptions)
    assert all(set(s.kinds(op)) == {"next"} for s, op, _ in subscriptions)
    assert all(socket.closed is None for socket in sockets)
    assert (status["restoreRate"], status["maximumAvailable"]) == (RATE, BURST)
    assert delivered <= bound, figures
    # Every event was paid for from the one budget, and held no more objects than it was charged.
    assert charged <= RATE * seconds + BURST + 1, figures
    assert all(
        objects(result["data"]) <= cost["actualQueryCost"]
        for result, cost in zip(results, costs, strict=True)
    )
