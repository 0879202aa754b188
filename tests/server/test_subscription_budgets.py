"""Subscriptions within their callers' budgets, in-process (SPEC §21, turn 6): a caller's slots
counted against its class's cap, by this instance (its share) or across instances in Redis
(Debian's redis-server), a dead instance's expiring and a failed broker handing over to the
share; a subscription's start charged and its slot taken; a caller's events paid in the order
they came, each once its budget holds it. What a client sees:
tests/api/test_budgets_subscriptions*.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio

from datasource import KEY_PREFIX
from domain.budgets import Limit
from harness.redis_server import RedisServer
from resolvers.callers import Caller
from resolvers.context import Context
from server.budgets import BudgetPolicy, Budgets
from server.errors import Throttled, TooManySubscriptions
from server.subscription_budgets import SubscriptionBudgets
from server.subscription_slots import SubscriptionSlots
from tests.eventually import eventually

CAPS = {"customer": 3, "service": 30}


def customer(user: str) -> Context:
    context = Context.__new__(Context)
    context.authenticated = Caller(user)
    context.cost = None
    context.least_cost = 0
    return context


def budgets(rate: float = 100, burst: float = 100) -> Budgets:
    policy = BudgetPolicy(
        customer=Limit(rate, burst),
        service=Limit(rate, burst),
        overrides={},
        mutation_cost=10,
        new_document_cost=1,
        instances=1,
        max_cost=10,
    )
    return Budgets(policy)


@contextlib.asynccontextmanager
async def held(slots: SubscriptionSlots, user: str, count: int) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            await stack.enter_async_context(slots.slot(f"customer:{user}", "customer"))
        yield


async def takes(slots: SubscriptionSlots, user: str) -> bool:
    """Whether one more slot is given to `user` now (given back at once)."""
    try:
        async with slots.slot(f"customer:{user}", "customer"):
            return True
    except TooManySubscriptions as refused:
        assert refused.error.extensions == {"code": "TOO_MANY_SUBSCRIPTIONS", "maxSubscriptions": 3}
        return False


async def test_without_a_broker_an_instance_holds_its_share_of_the_cap() -> None:
    alone = SubscriptionSlots(CAPS, instances=1, lease_seconds=15)
    async with held(alone, "ann", 3):
        assert not await takes(alone, "ann")
        assert await takes(alone, "bea")  # another caller's own
    assert await takes(alone, "ann")  # given back at the block's end
    # One of two instances: a cap of 3 is 1 here (never 0).
    shared_by_two = SubscriptionSlots(CAPS, instances=2, lease_seconds=15)
    async with held(shared_by_two, "ann", 1):
        assert not await takes(shared_by_two, "ann")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


async def test_instances_count_a_caller_together_and_a_dead_ones_slots_expire(
    redis_server: RedisServer,
) -> None:
    # Each holds the whole cap alone: only the broker's count keeps them to 3 together.
    one = SubscriptionSlots(CAPS, instances=1, lease_seconds=0.3)
    other = SubscriptionSlots(CAPS, instances=1, lease_seconds=0.3)
    async with (
        contextlib.AsyncExitStack() as dead,
        other.sharing(redis_server.redis_url),
        held(other, "cid", 1),
    ):
        async with one.sharing(redis_server.redis_url):
            await dead.enter_async_context(held(one, "cid", 2))
            assert not await takes(one, "cid")
            assert not await takes(other, "cid")
        # `one` stopped renewing with its slots held, as a killed process's stay in the broker:
        # within its lease they stop counting, while `other`'s, renewed, go on counting.
        await eventually(lambda: takes(other, "cid"), what="a dead instance's slots expiring")
        async with held(other, "cid", 2):
            # Renewed past when they would have expired unrenewed, they still count.
            taken = await broker_ms(redis_server)
            await eventually(
                lambda: renewed_past(redis_server, "customer:cid", taken + 2 * 300),
                what="the living instance's slots renewed",
            )
            assert not await takes(other, "cid")


async def broker_ms(server: RedisServer) -> float:
    async with redis.asyncio.Redis.from_url(server.redis_url) as client:
        seconds, microseconds = await client.time()
    return int(seconds) * 1000 + int(microseconds) / 1000


async def renewed_past(server: RedisServer, key: str, ms: float) -> bool:
    """Whether every lease of `key`'s slots ends after `ms` on the broker's clock."""
    async with redis.asyncio.Redis.from_url(server.redis_url) as client:
        held: Any = await client.zrange(KEY_PREFIX + key, 0, -1, withscores=True)
    return all(float(score) > ms for _member, score in held)


async def test_a_broker_that_fails_hands_over_to_the_instances_share(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopped = RedisServer()
    stopped.start()
    slots = SubscriptionSlots(CAPS, instances=3, lease_seconds=15)
    async with slots.sharing(stopped.redis_url):
        async with held(slots, "dot", 2):  # counted in the broker: the fleet's 3
            stopped.stop()
            with caplog.at_level(logging.WARNING, logger="loc_payments.budgets"):
                # The share of 3 among 3 is 1, which this instance holds twice over.
                assert not await takes(slots, "dot")
                assert await takes(slots, "eve")
        assert "counted here meanwhile" in caplog.records[0].message


async def test_a_subscription_takes_a_slot_and_is_charged_as_it_starts() -> None:
    subscriptions = SubscriptionBudgets(
        budgets(rate=1 / 60, burst=100), SubscriptionSlots(CAPS, instances=1, lease_seconds=15)
    )
    context = customer("fay")
    async with subscriptions.hold(context, 40) as events:
        assert events is not None
        assert context.cost == (40, 40)
        with pytest.raises(Throttled):  # 60 left
            async with subscriptions.hold(customer("fay"), 70):
                pass
        paid = await events.pay()
        assert paid.settle(15)["cost"]["throttleStatus"]["currentlyAvailable"] == 100 - 40 - 15
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(subscriptions.hold(customer("gus"), 1))
        with pytest.raises(TooManySubscriptions):
            await stack.enter_async_context(subscriptions.hold(customer("gus"), 1))


async def test_a_callers_events_are_paid_in_the_order_they_came_once_its_budget_holds_them() -> (
    None
):
    # 10 a second, an event 5: two from the 10 held, then one each half second.
    subscriptions = SubscriptionBudgets(
        budgets(rate=10, burst=10), SubscriptionSlots(CAPS, instances=1, lease_seconds=15)
    )
    paid: list[tuple[str, float]] = []

    async def pay(name: str) -> None:
        context = customer("hal")
        assert isinstance(context.authenticated, Caller)
        charge = await subscriptions.pay(context, context.authenticated, "customer:hal", 5)
        charge.settle(5)
        paid.append((name, time.monotonic()))

    started = time.monotonic()
    tasks = []
    for name in "abcd":
        tasks.append(asyncio.create_task(pay(name)))
        await asyncio.sleep(0)  # each asks in turn
    await asyncio.gather(*tasks)
    assert [name for name, _ in paid] == list("abcd")
    assert paid[1][1] - started < 0.5 <= paid[2][1] - started + 0.01, paid
    assert paid[3][1] - started >= 1.0 - 0.01, paid
