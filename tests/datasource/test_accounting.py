"""Request accounting (SPEC §8): every DynamoDB API call made inside `count_calls` is counted."""

import asyncio

from datasource import PaymentStore, count_calls
from domain.payment import LoanRef
from tests.payment_samples import ref_of, sample_payment, stored_new


async def test_each_call_is_counted_by_operation(store: PaymentStore) -> None:
    payment = sample_payment()
    with count_calls() as count:
        await stored_new(store, payment)
        await store.get(ref_of(payment))
        await store.get(ref_of(payment))
        await store.loan_payments(LoanRef("alice", "loan-1"), status=None, first=5, after=None)
    assert count.requests == 4
    assert count.operations == {"TransactWriteItems": 1, "GetItem": 2, "Query": 1}


async def test_calls_outside_a_count_are_not_counted(store: PaymentStore) -> None:
    with count_calls() as count:
        pass
    await store.get(ref_of(sample_payment()))
    assert count.requests == 0


async def test_tasks_started_inside_count_toward_it(store: PaymentStore) -> None:
    refs = [ref_of(sample_payment()) for _ in range(3)]
    with count_calls() as count:
        await asyncio.gather(*(store.get(ref) for ref in refs))
    assert count.operations == {"GetItem": 3}


async def test_concurrent_counts_stay_apart(store: PaymentStore) -> None:
    async def counted(calls: int) -> int:
        with count_calls() as count:
            for _ in range(calls):
                await store.get(ref_of(sample_payment()))
                await asyncio.sleep(0)
        return count.requests

    assert list(await asyncio.gather(counted(1), counted(3))) == [1, 3]


async def test_stores_sharing_a_client_count_each_call_once(store: PaymentStore) -> None:
    twin = PaymentStore(store.client, table_name=store.table_name, cursor_secret=b"other")
    with count_calls() as count:
        await twin.get(ref_of(sample_payment()))
    assert count.requests == 1
