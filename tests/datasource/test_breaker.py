"""The circuit breaker: it opens on attempts without an answer, refuses calls at once while open,
and a probe closes it as soon as DynamoDB answers again."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import gc
import time
import weakref
from collections.abc import AsyncIterator, Callable

import pytest

from datasource import DynamoConfig, PaymentStore, deadline
from datasource.breaker import OPEN_MESSAGE, CircuitBreaker
from datasource.client import open_client
from datasource.store import open_store
from domain.errors import StorageUnavailable
from domain.payment import PaymentRef
from harness.proxy import Proxy, proxy_to
from tests.backends import CURSOR_SECRET
from tests.datasource.sent_requests import sends_counted

REF = PaymentRef("alice", "loan-1", "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_in_a_row_open_it_and_an_answer_resets_the_count() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=3, clock=clock)
    breaker.failure("refused")
    breaker.failure("refused")
    breaker.success()
    breaker.failure("refused")
    breaker.failure("refused")
    assert breaker.state == "closed"
    breaker.failure("refused")
    assert (breaker.state, breaker.opens) == ("open", 1)
    clock.now += 2.5
    assert breaker.seconds_open == 2.5
    breaker.success()
    clock.now += 10
    assert (breaker.state, breaker.opens, breaker.seconds_open) == ("closed", 1, 2.5)


async def until(condition: Callable[[], bool], what: str, *, within: float = 5.0) -> None:
    """Until `condition()` holds (the probe runs on its own in the loop); fails after `within`
    seconds, a bound for a loaded machine, not a measurement."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.02)


@dataclasses.dataclass
class Guarded:
    store: PaymentStore
    breaker: CircuitBreaker
    proxy: Proxy
    clock: Clock  # the breaker's: how long it stays open is the test's to say


@pytest.fixture
async def guarded(moto_config: DynamoConfig) -> AsyncIterator[Guarded]:
    """A store whose client reaches moto through a proxy, with a quick breaker."""
    assert moto_config.endpoint_url is not None
    async with proxy_to(moto_config.endpoint_url) as proxy:
        config = dataclasses.replace(
            moto_config,
            endpoint_url=proxy.url,
            max_attempts=3,
            connect_timeout=0.5,
            read_timeout=2.0,
        )
        clock = Clock()
        breaker = CircuitBreaker(failures=3, probe_interval=0.05, clock=clock)
        async with open_client(config) as client:
            store = PaymentStore(
                client, table_name=config.table_name, cursor_secret=CURSOR_SECRET, breaker=breaker
            )
            try:
                yield Guarded(store, breaker, proxy, clock)
            finally:
                await breaker.close()


async def test_cut_connections_open_it_and_it_refuses_at_once_until_dynamodb_answers(
    guarded: Guarded,
) -> None:
    store, breaker, proxy = guarded.store, guarded.breaker, guarded.proxy
    assert await store.get(REF) is None
    proxy.mode = "reset"

    with pytest.raises(StorageUnavailable):
        await store.get(REF)  # three attempts, each cut: the breaker opens

    assert breaker.state == "open"
    connections = proxy.connections
    with sends_counted(store) as sent, pytest.raises(StorageUnavailable, match=OPEN_MESSAGE):
        await store.get(REF)
    assert sent == []  # refused before anything went out
    # Meanwhile the probe keeps trying (and failing): two tries, and it is still open.
    await until(lambda: proxy.connections >= connections + 2, "the probe tried twice")
    assert breaker.state == "open"
    guarded.clock.now += 42.0

    proxy.mode = "forward"
    await until(lambda: breaker.state == "closed", "the probe closed the breaker")
    assert await store.get(REF) is None
    assert (breaker.opens, breaker.seconds_open) == (1, 42.0)


async def test_a_dynamodb_that_never_answers_opens_it_as_budgets_run_out(
    guarded: Guarded,
) -> None:
    store, breaker, proxy = guarded.store, guarded.breaker, guarded.proxy
    assert await store.get(REF) is None
    proxy.mode = "hang"

    for _ in range(3):  # the breaker's `failures`: one slow call alone does not open it
        assert breaker.state == "closed"
        started = time.perf_counter()
        with deadline.storage_budget(0.5), pytest.raises(StorageUnavailable, match="time budget"):
            await store.get(REF)
        # Ended by its budget (the message), not before it; the read timeout is 2 s.
        assert time.perf_counter() - started >= 0.5
    assert breaker.state == "open"
    with sends_counted(store) as sent, pytest.raises(StorageUnavailable, match=OPEN_MESSAGE):
        await store.get(REF)
    assert sent == []  # refused before anything went out

    proxy.mode = "forward"
    await until(lambda: breaker.state == "closed", "the probe closed the breaker")
    assert await store.get(REF) is None


async def test_calls_held_by_a_rate_limiter_past_their_budget_do_not_open_it(
    moto_config: DynamoConfig,
) -> None:
    """botocore's adaptive rate limiter holds an attempt in `before-send` until its token bucket
    lets it go; a budget that runs out there says nothing of whether DynamoDB answers."""
    config = dataclasses.replace(moto_config, retry_mode="adaptive")
    breaker = CircuitBreaker(failures=1)
    release = asyncio.Event()

    async def held(**_: object) -> None:
        await release.wait()

    async with open_client(config) as client:
        # Before the breaker's own hook, as the limiter's (registered with the client) is.
        client.meta.events.register("before-send", held)
        store = PaymentStore(
            client, table_name=config.table_name, cursor_secret=CURSOR_SECRET, breaker=breaker
        )
        for _ in range(2):
            with (
                deadline.storage_budget(0.1),
                pytest.raises(StorageUnavailable, match="time budget"),
            ):
                await store.get(REF)
        assert breaker.state == "closed"
        release.set()
        assert await store.get(REF) is None
        await breaker.close()


async def test_a_store_without_a_breaker_is_not_guarded(moto_store: PaymentStore) -> None:
    assert moto_store.breaker is None
    assert await moto_store.get(REF) is None


async def test_what_a_call_scheduled_does_not_keep_the_store_alive(
    moto_config: DynamoConfig,
) -> None:
    """A callback scheduled during a call (the HTTP pool's timers are) holds a copy of the
    call's context; once the store is closed, that copy must not keep its breaker, and through
    the breaker's probe the store and its client, alive."""
    left_over: list[contextvars.Context] = []

    async def served_once() -> tuple[weakref.ref[object], weakref.ref[object]]:
        async with open_store(moto_config, cursor_secret=CURSOR_SECRET) as store:
            store.client.meta.events.register(
                "before-send.dynamodb",
                lambda **_: left_over.append(contextvars.copy_context()),
                unique_id="tests-left-over-context",
            )
            assert await store.get(REF) is None
            assert store.breaker is not None
            return weakref.ref(store), weakref.ref(store.breaker)

    store, breaker = await asyncio.create_task(served_once())
    gc.collect()

    assert left_over, "no call was made"
    assert (store(), breaker()) == (None, None)
