"""The budgets' arithmetic and where they live (SPEC §21): the GCRA with refunds on one instance,
the same in Redis in one round trip (Debian's redis-server), a broker that fails or stops
answering handing over to the instance's share (logged once, `/readyz` says so) and taking back
when it answers; and the settings that refuse a budget no operation fits."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from strawberry.types.graphql import OperationType

from datasource import open_shared_budgets
from domain.budgets import HAIR, Limit, LocalBudgets
from harness.redis_server import RedisServer
from process.settings import Settings
from resolvers.callers import Caller
from resolvers.context import Context
from server.budgets import BudgetPolicy, Budgets
from server.errors import Throttled

LIMIT = Limit(rate=10, burst=100)
# How long a charge waits on the broker: long beside a healthy broker's answer on a loaded
# machine, so that only a broker paused or stopped by the test is taken for unavailable.
CHARGE_WITHIN = 0.5


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_budget_admits_its_burst_then_its_rate() -> None:
    clock = Clock()
    budgets = LocalBudgets(clock=clock)
    assert budgets.charge("a", 60, LIMIT).available == 40
    refused = budgets.charge("a", 50, LIMIT)
    assert not refused.admitted
    assert refused.retry_after == pytest.approx(1.0)  # 10 more at 10 a second
    clock.now += 1.0
    assert budgets.charge("a", 50, LIMIT).admitted
    assert budgets.charge("b", 100, LIMIT).admitted  # another key, its own budget


def test_a_refund_comes_back_but_never_beyond_the_burst() -> None:
    clock = Clock()
    budgets = LocalBudgets(clock=clock)
    budgets.charge("a", 90, LIMIT)
    assert budgets.charge("a", 50, LIMIT, refund=80).available == 40
    assert budgets.charge("a", 0, LIMIT, refund=1000).available == 100


@given(
    now=st.floats(1.0, 1e7),
    rate=st.sampled_from([1 / 60, 1.0, 3.0, 300.0, 20_000.0]),
    burst=st.integers(1, 20_000),
    spent=st.integers(0, 100),
)
def test_a_charge_of_what_the_budget_holds_is_admitted_at_any_clock(
    now: float, rate: float, burst: int, spent: int
) -> None:
    """The clock's float rounding is no part of a unit: at 4,057.5 s since boot, a budget of 100
    at 1 a minute charged 33 showed 75.999… (75 shown), and a fresh budget refused a charge of
    its whole burst about one time in four."""
    limit, clock = Limit(rate, burst), Clock()
    clock.now = now
    budgets = LocalBudgets(clock=clock)
    spent = min(spent, burst)
    first = budgets.charge("a", spent, limit)
    assert first.admitted and math.floor(first.available + HAIR) == burst - spent
    assert budgets.charge("a", burst - spent, limit).admitted
    assert not budgets.charge("a", 1, limit).admitted


def test_an_instance_share_divides_the_fleets_but_never_below_the_costliest_operation() -> None:
    assert Limit(90, 3000).share(3, floor=100) == Limit(30, 1000)
    assert Limit(90, 300).share(3, floor=150) == Limit(30, 150)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A broker of the test's own: the tests' callers' budgets start full, however often they
    run (a module's broker kept a budget spent by the run before)."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()


async def test_the_broker_runs_the_same_gcra_in_one_round_trip(redis_server: RedisServer) -> None:
    redis_server.command("SCRIPT", "FLUSH")
    redis_server.command("CONFIG", "RESETSTAT")
    async with open_shared_budgets(redis_server.redis_url, charge_within=1.0) as shared:
        # The budget refills at 10 a second between the charges: the bounds allow a loaded
        # machine half a second between them.
        first = await shared.charge("one", 60, LIMIT, refund=0)
        assert first.admitted and 40 <= first.available < 45
        refused = await shared.charge("one", 50, LIMIT, refund=0)
        assert not refused.admitted
        assert 0.5 < refused.retry_after <= 1.0  # the 10 it lacks, at 10 a second
        # The refund of the previous operation rides on the next charge.
        refunded = await shared.charge("one", 50, LIMIT, refund=30)
        assert refunded.admitted and 20 <= refunded.available < 30
        # Its whole burst at once, at Redis's clock in microseconds since the epoch (a third of
        # a second a unit: no whole number of them).
        for key in ("whole-1", "whole-2", "whole-3", "whole-4", "whole-5", "whole-6"):
            whole = await shared.charge(key, 100, Limit(rate=3, burst=100), refund=0)
            assert whole.admitted and whole.available == 0
    client = redis.asyncio.Redis.from_url(redis_server.redis_url)
    try:
        # Kept until the budget is full again: 80 used at 10 a second, 8 s.
        ttl = await client.pttl("loc-payments:budget:one")
        assert 6_000 < ttl <= 8_000
        info: Any = await client.info("commandstats")
        # One script call a charge: EVALSHA, the first's NOSCRIPT answered by loading it once.
        evalsha = info["cmdstat_evalsha"]
        assert (evalsha["calls"], evalsha["rejected_calls"] + evalsha["failed_calls"]) == (10, 1)
        assert info["cmdstat_script|load"]["calls"] == 1
    finally:
        await client.aclose()


def customer(user: str = "alice") -> Context:
    context = Context.__new__(Context)
    context.authenticated = Caller(user)
    context.cost = None
    return context


def policy(instances: int = 1) -> BudgetPolicy:
    return BudgetPolicy(
        customer=Limit(300, 3000),
        service=Limit(300, 3000),
        overrides={},
        mutation_cost=10,
        new_document_cost=100,
        instances=instances,
        max_cost=1000,
    )


async def spend(budgets: Budgets, user: str, cost: int, times: int) -> int:
    """How many of `times` operations of `cost` the budget admits."""
    admitted = 0
    for _ in range(times):
        try:
            charge = await budgets.admit(customer(user), OperationType.QUERY, cost)
        except Throttled:
            continue
        assert charge is not None
        charge.settle(cost)
        admitted += 1
    return admitted


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def shared(redis_server: RedisServer, clock: Clock) -> AsyncIterator[Budgets]:
    budgets = Budgets(policy(instances=3), clock=clock)
    async with budgets.sharing(redis_server.redis_url, charge_within=CHARGE_WITHIN):
        yield budgets


async def test_a_broker_that_fails_hands_over_to_the_instances_share_and_takes_back(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    budgets = Budgets(policy(instances=3))
    stopped = RedisServer()
    stopped.start()
    async with budgets.sharing(stopped.redis_url, charge_within=CHARGE_WITHIN):
        assert await spend(budgets, "bob", 1000, 3) == 3  # the fleet's 3000, in the broker
        assert budgets.state == "shared"
        stopped.stop()
        with caplog.at_level(logging.WARNING, logger="loc_payments.budgets"):
            # The instance's share: 1000 of burst (3000 / 3), so one operation of 1000.
            assert await spend(budgets, "carol", 1000, 3) == 1
            assert await spend(budgets, "dave", 1000, 3) == 1
        assert budgets.state == "local: broker unavailable"
        assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
        assert "each instance holds its share" in caplog.records[0].message


async def test_a_broker_that_hangs_is_waited_on_for_the_timeout_at_most(
    shared: Budgets, redis_server: RedisServer, clock: Clock
) -> None:
    assert await spend(shared, "erin", 10, 1) == 1
    # Paused past the one wait (and the UNPAUSE below waits for it too).
    redis_server.command("CLIENT", "PAUSE", str(int(4 * CHARGE_WITHIN * 1000)), "ALL")
    try:
        started = asyncio.get_running_loop().time()
        assert await spend(shared, "erin", 10, 20) == 20
        elapsed = asyncio.get_running_loop().time() - started
        # One wait of the charge's timeout, then the breaker: the rest are not waited on (four
        # waits or more would fail this, whatever the machine's load).
        assert CHARGE_WITHIN <= elapsed < 4 * CHARGE_WITHIN, elapsed
        assert shared.state == "local: broker unavailable"
    finally:
        redis_server.command("CLIENT", "UNPAUSE")
    clock.now += 60  # past the breaker's wait (a second): one request tries the broker again
    assert await spend(shared, "erin", 10, 1) == 1
    assert shared.state == "shared"


def charges_sent(redis_server: RedisServer) -> int:
    """The budget scripts the broker has run (`EVALSHA`)."""
    info: Any = redis_server.command("INFO", "commandstats")
    return int(info.get("cmdstat_evalsha", {}).get("calls", 0))


def answer(refused: Throttled) -> tuple[Any, ...]:
    """What a refusal answers: its error, `extensions.cost` and `Retry-After`."""
    return refused.error.formatted, refused.extensions, refused.retry_after


async def test_a_caller_the_broker_refused_is_refused_here_until_its_budget_could_pay(
    redis_server: RedisServer, clock: Clock
) -> None:
    """A refusal changes nothing in the broker: while what it said at this budget's last charge
    here, refilled since, cannot pay, the instance refuses without a round trip (which was most
    of a refusal's CPU), in the broker's words; then the broker decides again."""
    budgets = Budgets(policy(instances=3), clock=clock)
    async with budgets.sharing(redis_server.redis_url, charge_within=1.0):
        assert await spend(budgets, "grace", 1000, 3) == 3  # the fleet's 3000
        with pytest.raises(Throttled) as by_broker:
            await budgets.admit(customer("grace"), OperationType.QUERY, 1000)
        sent = charges_sent(redis_server)
        for _ in range(3):
            with pytest.raises(Throttled) as here:
                await budgets.admit(customer("grace"), OperationType.QUERY, 1000)
            assert answer(here.value) == answer(by_broker.value)
        assert charges_sent(redis_server) == sent
        assert by_broker.value.retry_after == 4  # 1000 at 300 a second, rounded up
        assert await spend(budgets, "heidi", 1000, 1) == 1  # another caller's, in the broker
        assert charges_sent(redis_server) == sent + 1

        clock.now += 4  # as far as this instance knows, the budget could pay: the broker says
        assert await spend(budgets, "grace", 1000, 1) == 0  # not yet, on its own clock
        assert charges_sent(redis_server) == sent + 2


async def test_without_a_broker_each_instance_holds_its_share() -> None:
    budgets = Budgets(policy(instances=3))
    assert budgets.state == "local"
    assert await spend(budgets, "frank", 500, 10) == 2  # 1000 of burst: two of 500


def test_a_burst_below_the_costliest_operation_is_refused() -> None:
    with pytest.raises(ValidationError, match="LOC_BUDGET_CUSTOMER_"):
        Settings(budget_customer_burst=500)
    with pytest.raises(ValidationError, match="LOC_BUDGET_OVERRIDES big"):
        Settings(budget_overrides="big=10/20")
    with pytest.raises(ValidationError, match="is not client=rate/burst"):
        Settings(budget_overrides="big=10")
    assert Settings(budget_overrides="big=10/20000").budget_overrides == {"big": (10, 20000)}
