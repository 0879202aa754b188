"""Lookups coalesced across requests: the lookups made in one turn of the event loop share one
call, and each caller still gets its own keys, its own deadline, its own count and share of the
units, and the breaker hears of each caller's budget running out."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from datasource import CallCount, DynamoConfig, PaymentStore, count_calls, deadline
from datasource.breaker import OPEN_MESSAGE, CircuitBreaker
from datasource.client import open_client
from domain.errors import StorageUnavailable
from domain.payment import Payment, PaymentRef
from harness.proxy import proxy_to
from tests.backends import CURSOR_SECRET
from tests.datasource.sent_requests import sends_counted
from tests.datasource.stored_items import put_all
from tests.payment_samples import ref_of, sample_payment


def coalescing(store: PaymentStore) -> PaymentStore:
    """A store on the same table and client that coalesces its lookups, as the service's does."""
    return PaymentStore(
        store.client, table_name=store.table_name, cursor_secret=CURSOR_SECRET, coalesce=True
    )


def record_calls(store: PaymentStore, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """(API, its parameters) of every GetItem and BatchGetItem the store's client sends."""
    sent: list[tuple[str, Any]] = []
    for method in ("get_item", "batch_get_item"):
        real = getattr(store.client, method)

        async def recording(*, _real: Any = real, _name: str = method, **parameters: Any) -> Any:
            sent.append((_name, parameters))
            return await _real(**parameters)

        monkeypatch.setattr(store.client, method, recording)
    return sent


async def looked_up(
    store: PaymentStore, refs: Sequence[PaymentRef], *, consistent: bool = False
) -> tuple[list[Payment | None], CallCount]:
    """One request's lookup, counted in its own context (as each request is)."""
    with count_calls() as count:
        found = await store.batch_get(refs, consistent=consistent)
    return found, count


async def test_lookups_made_at_once_share_one_call_and_each_gets_its_own(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment(user_id=f"user-{n}") for n in range(8)]
    await put_all(store, payments)
    missing = sample_payment(user_id="user-9")
    asked: list[list[Payment]] = [[p] for p in payments[:5]]
    asked += [[payments[5], payments[0]], [payments[6], missing], [payments[7]] * 2]
    shared = coalescing(store)
    sent = record_calls(store, monkeypatch)

    answers = await asyncio.gather(
        *(looked_up(shared, [ref_of(p) for p in refs]) for refs in asked)
    )

    for refs, (found, _) in zip(asked, answers, strict=True):
        assert found == [None if p is missing else p for p in refs]
    [(api, parameters)] = sent
    assert api == "batch_get_item"
    request = parameters["RequestItems"][store.table_name]
    assert len(request["Keys"]) == 9  # the distinct keys: 8 stored, 1 missing
    assert request["ConsistentRead"] is False
    for _, count in answers:
        assert (count.requests, count.operations) == (1, {"BatchGetItem": 1})
        assert count.outcomes == {("BatchGetItem", "ok"): 1}

    # The shares add up to the call's units: those of the same keys read by one request.
    _, alone = await looked_up(store, [ref_of(p) for p in [*payments, missing]])
    assert alone.units.read > 0
    assert sum(count.units.read for _, count in answers) == pytest.approx(alone.units.read)
    assert sum(count.units_by_index[store.table_name].read for _, count in answers) == (
        pytest.approx(alone.units_by_index[store.table_name].read)
    )
    # A caller's share is in proportion to its keys: two keys, twice one key's share.
    assert answers[5][1].units.read == pytest.approx(2 * answers[0][1].units.read)


async def test_a_lookup_alone_is_its_own_get_item_with_its_own_units(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payment = sample_payment()
    await put_all(store, [payment])
    sent = record_calls(store, monkeypatch)

    found, count = await looked_up(coalescing(store), [ref_of(payment)])
    _, direct = await looked_up(store, [ref_of(payment)])

    assert found == [payment]
    assert [api for api, _ in sent] == ["get_item", "get_item"]
    assert count.operations == {"GetItem": 1}
    assert count.units == direct.units
    assert count.units_by_index == direct.units_by_index


async def test_strong_and_eventual_lookups_never_share_a_call(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment() for _ in range(4)]
    await put_all(store, payments)
    shared = coalescing(store)
    sent = record_calls(store, monkeypatch)

    answers = await asyncio.gather(
        *(looked_up(shared, [ref_of(p)], consistent=n % 2 == 1) for n, p in enumerate(payments))
    )

    assert [found for found, _ in answers] == [[p] for p in payments]
    reads = sorted(
        (parameters["RequestItems"][store.table_name]["ConsistentRead"], api)
        for api, parameters in sent
    )
    assert reads == [(False, "batch_get_item"), (True, "batch_get_item")]


async def test_a_failed_call_fails_each_of_its_callers(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment() for _ in range(3)]
    await put_all(store, payments)
    shared = coalescing(store)

    async def refused(**_: Any) -> Any:
        raise StorageUnavailable("DynamoDB said no")

    monkeypatch.setattr(store.client, "batch_get_item", refused)
    answers = await asyncio.gather(
        *(shared.batch_get([ref_of(p)]) for p in payments), return_exceptions=True
    )
    assert [str(answer) for answer in answers] == ["DynamoDB said no"] * 3


class Held:
    """A BatchGetItem that waits until released, and says whether it was cancelled."""

    def __init__(self, store: PaymentStore) -> None:
        self._real = store.client.batch_get_item
        self.release = asyncio.Event()
        self.sent = asyncio.Event()
        self.calls = 0
        self.cancelled = False
        self.was_cancelled = asyncio.Event()

    async def __call__(self, **parameters: Any) -> Any:
        self.calls += 1
        self.sent.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            self.was_cancelled.set()
            raise
        return await self._real(**parameters)


async def test_each_caller_waits_within_its_own_budget(
    moto_store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    hurried, patient = sample_payment(), sample_payment()
    await put_all(moto_store, [hurried, patient])
    shared = coalescing(moto_store)
    held = Held(moto_store)
    monkeypatch.setattr(moto_store.client, "batch_get_item", held)

    async def within(seconds: float, payment: Payment) -> tuple[list[Payment | None], float]:
        started = time.perf_counter()
        with deadline.storage_budget(seconds):
            found = await shared.batch_get([ref_of(payment)])
        return found, time.perf_counter() - started

    late = asyncio.create_task(within(10.0, patient))
    started = time.perf_counter()
    with pytest.raises(StorageUnavailable, match="time budget"):
        await within(0.2, hurried)
    # Not before its budget ran out; and it did not wait for the shared call, which is still
    # held (no upper bound in seconds: on a loaded machine the loop itself can be late).
    assert time.perf_counter() - started >= 0.2
    assert held.calls == 1 and not held.release.is_set()
    assert not late.done() and not held.cancelled  # the other caller still waits for it

    held.release.set()
    found, _ = await late
    assert found == [patient]
    assert held.calls == 1


async def test_a_call_nobody_waits_for_any_more_is_cancelled(
    moto_store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment() for _ in range(2)]
    shared = coalescing(moto_store)
    held = Held(moto_store)
    monkeypatch.setattr(moto_store.client, "batch_get_item", held)

    callers = [asyncio.create_task(shared.batch_get([ref_of(p)])) for p in payments]
    await held.sent.wait()
    callers[0].cancel()
    await asyncio.gather(callers[0], return_exceptions=True)
    # The first caller is gone; give the loop a few turns to cancel the call if it would.
    for _ in range(10):
        await asyncio.sleep(0)
    assert not held.cancelled  # one caller still waits
    callers[1].cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    async with asyncio.timeout(5):
        await held.was_cancelled.wait()


@pytest.fixture
async def hanging(moto_config: DynamoConfig) -> AsyncIterator[tuple[PaymentStore, Any]]:
    """A coalescing store behind a proxy that can hang, with a breaker that opens after 3."""
    assert moto_config.endpoint_url is not None
    async with proxy_to(moto_config.endpoint_url) as proxy:
        config = dataclasses.replace(moto_config, endpoint_url=proxy.url, read_timeout=5.0)
        breaker = CircuitBreaker(failures=3, probe_interval=0.05)
        async with open_client(config) as client:
            store = PaymentStore(
                client,
                table_name=config.table_name,
                cursor_secret=CURSOR_SECRET,
                breaker=breaker,
                coalesce=True,
            )
            try:
                yield store, proxy
            finally:
                await breaker.close()


async def test_each_caller_whose_budget_ran_out_unanswered_is_a_failure_for_the_breaker(
    hanging: tuple[PaymentStore, Any],
) -> None:
    store, proxy = hanging
    payments = [sample_payment() for _ in range(3)]
    assert await store.batch_get([ref_of(payments[0])]) == [None]
    proxy.mode = "hang"

    async def within_budget(payment: Payment) -> list[Payment | None]:
        with deadline.storage_budget(0.3):
            return await store.batch_get([ref_of(payment)])

    # Three requests, one shared call that gets no answer: three budgets ran out, as three
    # calls of their own would have, and the breaker (3 failures) opens.
    answers = await asyncio.gather(*map(within_budget, payments), return_exceptions=True)
    assert all(isinstance(answer, StorageUnavailable) for answer in answers), answers
    assert store.breaker is not None and store.breaker.state == "open"
    with sends_counted(store) as sent, pytest.raises(StorageUnavailable, match=OPEN_MESSAGE):
        await store.batch_get([ref_of(payments[0])])
    assert sent == []  # refused at once: before anything went out
