"""batch_get: chunks of 100, duplicates folded, misses as None, UnprocessedKeys retried; one
distinct key is one GetItem."""

import random
from typing import Any

import pytest

from datasource import PaymentStore, count_calls
from datasource.batch import Backoff
from domain.errors import StorageUnavailable
from domain.payment import Payment
from tests.datasource.stored_items import put_all
from tests.payment_samples import ref_of, sample_payment


async def test_250_keys_take_three_concurrent_requests_and_come_back_in_order(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment(user_id=f"user-{n % 7}") for n in range(250)]
    await put_all(store, payments)
    random.Random(7).shuffle(payments)
    real_batch_get = store.client.batch_get_item
    in_flight = [0]
    most_in_flight = [0]

    async def watched(**parameters: Any) -> Any:
        in_flight[0] += 1
        most_in_flight[0] = max(most_in_flight[0], in_flight[0])
        try:
            return await real_batch_get(**parameters)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(store.client, "batch_get_item", watched)
    with count_calls() as count:
        found = await store.batch_get([ref_of(payment) for payment in payments])
    assert found == payments
    assert count.operations == {"BatchGetItem": 3}
    assert most_in_flight == [3]


async def test_duplicates_and_misses(store: PaymentStore, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = [sample_payment() for _ in range(3)]
    await put_all(store, stored)
    missing = sample_payment()
    a, b, c = stored
    refs = [ref_of(p) for p in (b, missing, a, b, c, missing, b)]
    requested: list[int] = []
    real_batch_get = store.client.batch_get_item

    async def recording(**parameters: Any) -> Any:
        requested.append(len(parameters["RequestItems"][store.table_name]["Keys"]))
        return await real_batch_get(**parameters)

    monkeypatch.setattr(store.client, "batch_get_item", recording)
    found = await store.batch_get(refs)
    assert found == [b, None, a, b, c, None, b]
    assert requested == [4]  # DynamoDB refuses duplicate keys; each distinct key once


@pytest.mark.parametrize("consistent", [False, True])
async def test_one_distinct_key_is_one_get_item_at_the_asked_consistency(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch, consistent: bool
) -> None:
    payment = sample_payment()
    await put_all(store, [payment])
    asked: list[bool] = []
    real_get = store.client.get_item

    async def recording(**parameters: Any) -> Any:
        asked.append(parameters["ConsistentRead"])
        return await real_get(**parameters)

    monkeypatch.setattr(store.client, "get_item", recording)
    with count_calls() as count:
        found = await store.batch_get([ref_of(payment)] * 3, consistent=consistent)
        missing = await store.batch_get([ref_of(sample_payment())], consistent=consistent)
    assert found == [payment] * 3
    assert missing == [None]
    assert count.operations == {"GetItem": 2}
    assert asked == [consistent, consistent]


async def test_nothing_asked_nothing_sent(store: PaymentStore) -> None:
    with count_calls() as count:
        assert await store.batch_get([]) == []
    assert count.requests == 0


def _leave_unprocessed(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch, *, attempts: int, keep: int
) -> list[int]:
    """Make the next `attempts` BatchGetItem calls answer only `keep` keys; the rest unprocessed."""
    real_batch_get = store.client.batch_get_item
    sent: list[int] = []

    async def partly(**parameters: Any) -> Any:
        keys = parameters["RequestItems"][store.table_name]["Keys"]
        sent.append(len(keys))
        if len(sent) > attempts:
            return await real_batch_get(**parameters)
        answered = parameters["RequestItems"][store.table_name] | {"Keys": keys[:keep]}
        response = await real_batch_get(RequestItems={store.table_name: answered})
        response["UnprocessedKeys"] = {store.table_name: {"Keys": keys[keep:]}}
        return response

    monkeypatch.setattr(store.client, "batch_get_item", partly)
    return sent


async def test_unprocessed_keys_are_retried_until_all_are_read(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment() for _ in range(30)]
    await put_all(store, payments)
    sent = _leave_unprocessed(store, monkeypatch, attempts=2, keep=10)
    refs = [ref_of(payment) for payment in reversed(payments)] + [ref_of(payments[0])]
    with count_calls() as count:
        found = await store.batch_get(refs)
    assert found == [*reversed(payments), payments[0]]
    assert sent == [30, 20, 10]
    assert count.operations == {"BatchGetItem": 3}


async def test_keys_left_unprocessed_too_long_fail_the_whole_read(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments: list[Payment] = [sample_payment() for _ in range(5)]
    await put_all(store, payments)
    impatient = PaymentStore(
        store.client,
        table_name=store.table_name,
        cursor_secret=b"secret",
        backoff=Backoff(base=0.001, retries=3),
    )
    sent = _leave_unprocessed(store, monkeypatch, attempts=100, keep=1)
    with pytest.raises(StorageUnavailable):
        await impatient.batch_get([ref_of(payment) for payment in payments])
    assert sent == [5, 4, 3, 2]


async def test_a_failing_chunk_fails_the_whole_read(
    store: PaymentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    payments = [sample_payment() for _ in range(150)]
    await put_all(store, payments)
    impatient = PaymentStore(
        store.client,
        table_name=store.table_name,
        cursor_secret=b"secret",
        backoff=Backoff(base=0.001, retries=2),
    )
    _leave_unprocessed(store, monkeypatch, attempts=100, keep=10)
    with pytest.raises(StorageUnavailable):
        await impatient.batch_get([ref_of(payment) for payment in payments])


def test_backoff_is_full_jitter_and_capped() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    delays = [[backoff.delay(attempt) for _ in range(200)] for attempt in range(6)]
    for attempt, samples in enumerate(delays):
        ceiling = min(1.0, 0.1 * 2**attempt)
        assert all(0.0 <= delay <= ceiling for delay in samples)
        assert max(samples) > ceiling * 0.9  # the whole range is used, not a fixed step
