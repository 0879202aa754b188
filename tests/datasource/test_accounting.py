"""Request accounting (SPEC §8, §11): every DynamoDB API call made inside `count_calls` is
counted, with the capacity DynamoDB says it consumed."""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from datasource import CallCount, PaymentStore, count_calls
from datasource.accounting import Units, ask_for_capacity
from datasource.items import primary_key
from domain.enums import PaymentStatus
from domain.errors import Conflict
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


@pytest.mark.ddblocal
async def test_each_data_call_reports_its_capacity_per_table_and_index(
    ddblocal_store: PaymentStore,
) -> None:
    store, table = ddblocal_store, ddblocal_store.table_name
    payment = sample_payment()
    with count_calls() as writing:
        await stored_new(store, payment)
    with count_calls() as reading:
        await store.get(ref_of(payment))
        await store.payments_by_status(status=PaymentStatus.PENDING, first=5, after=None)

    # The payment (on the table, GSI1 and GSI2) and its event (on the table and the feed's GSI4)
    # in one transaction: DynamoDB Local charges a transactional write two units per item and
    # index it touches (each item under 1 KB, the event with the payment it carries).
    assert writing.units == Units(read=0.0, write=10.0)
    assert writing.units_by_api == {"TransactWriteItems": Units(write=10.0)}
    assert writing.units_by_index == {
        table: Units(write=4.0),
        f"{table}/GSI1": Units(write=2.0),
        f"{table}/GSI2": Units(write=2.0),
        f"{table}/GSI4": Units(write=2.0),
    }
    assert reading.units.write == 0.0
    assert set(reading.units_by_api) == {"GetItem", "Query"}
    assert all(units.read > 0 for units in reading.units_by_api.values())
    # The list reads GSI2 alone; the lookup, the table.
    assert set(reading.units_by_index) == {table, f"{table}/GSI2"}
    assert reading.units.read == sum(units.read for units in reading.units_by_index.values())


@pytest.mark.ddblocal
async def test_a_refused_write_counts_as_a_call_with_no_units(
    ddblocal_store: PaymentStore,
) -> None:
    payment = await stored_new(ddblocal_store, sample_payment())
    with count_calls() as count, pytest.raises(Conflict):
        await stored_new(ddblocal_store, payment)
    # DynamoDB's cancellation answer carries no ConsumedCapacity.
    assert ("TransactWriteItems", "TransactionCanceledException") in count.outcomes
    assert count.units == Units()


@pytest.mark.ddblocal
async def test_a_caller_that_asks_for_no_capacity_is_obeyed(
    ddblocal_store: PaymentStore,
) -> None:
    key = primary_key(ref_of(sample_payment()))
    client, table = ddblocal_store.client, ddblocal_store.table_name
    asked = await client.get_item(TableName=table, Key=key)
    refused = await client.get_item(TableName=table, Key=key, ReturnConsumedCapacity="NONE")
    assert asked["ConsumedCapacity"]["Table"]["CapacityUnits"] > 0  # INDEXES: per table
    assert "ConsumedCapacity" not in refused


async def test_the_control_plane_is_not_asked_for_capacity(store: PaymentStore) -> None:
    # DescribeTable refuses `ReturnConsumedCapacity`: readiness would fail if it were sent.
    with count_calls() as count:
        await store.ping()
    assert count.operations == {"DescribeTable": 1}
    assert count.outcomes == {("DescribeTable", "ok"): 1}
    assert count.units == Units()
    params: dict[str, Any] = {"TableName": store.table_name}
    ask_for_capacity(params, model=SimpleNamespace(name="DescribeTable"))
    assert params == {"TableName": store.table_name}


def test_capacity_alone_is_what_the_operation_is() -> None:
    count = CallCount()
    count.consumed(
        "Query", {"TableName": "t", "CapacityUnits": 0.5, "Table": {"CapacityUnits": 0.5}}
    )
    count.consumed("UpdateItem", {"TableName": "t", "CapacityUnits": 1})
    assert count.units == Units(read=0.5, write=1.0)
    assert count.units_by_index == {"t": Units(read=0.5, write=1.0)}


def test_read_and_write_units_when_given_and_the_rest_of_the_total() -> None:
    count = CallCount()
    # A transaction's list, one entry per table; in one, only the reads are given.
    count.consumed(
        "TransactWriteItems",
        [
            {"TableName": "a", "CapacityUnits": 6, "ReadCapacityUnits": 2, "WriteCapacityUnits": 4},
            {"TableName": "b", "CapacityUnits": 5.5, "ReadCapacityUnits": 0.5},
        ],
    )
    count.consumed(
        "TransactGetItems", [{"TableName": "a", "CapacityUnits": 2, "WriteCapacityUnits": 0}]
    )
    assert count.units == Units(read=4.5, write=9.0)
    assert count.units_by_api == {
        "TransactWriteItems": Units(read=2.5, write=9.0),
        "TransactGetItems": Units(read=2.0),
    }


def test_every_index_is_detailed_and_an_idle_one_left_out() -> None:
    count = CallCount()
    count.consumed(
        "PutItem",
        {
            "TableName": "t",
            "CapacityUnits": 3.0,
            "Table": {"CapacityUnits": 1.0},
            "GlobalSecondaryIndexes": {"GSI1": {"CapacityUnits": 2.0}},
            "LocalSecondaryIndexes": {"LSI1": {"CapacityUnits": 0.0}},
        },
    )
    count.consumed(
        "Query",
        {
            "TableName": "t",
            "CapacityUnits": 0.5,
            "Table": {"CapacityUnits": 0.0},
            "LocalSecondaryIndexes": {"GSI2": {"CapacityUnits": 0.5}},  # as moto reports a GSI
        },
    )
    assert count.units_by_index == {
        "t": Units(write=1.0),
        "t/GSI1": Units(write=2.0),
        "t/GSI2": Units(read=0.5),
    }


async def test_the_items_each_read_went_through_are_counted(store: PaymentStore) -> None:
    payments = [sample_payment(), sample_payment()]
    for payment in payments:
        await stored_new(store, payment)
    loan = LoanRef(payments[0].user_id, payments[0].loan_id)
    with count_calls() as listing:
        await store.loan_payments(loan, status=None, first=1, after=None)
    with count_calls() as looking_up:
        await store.get(ref_of(payments[0]))
        await store.get(ref_of(sample_payment()))  # none: nothing read
        await store.batch_get([ref_of(payment) for payment in payments])
    with count_calls() as writing:
        await stored_new(store, sample_payment())
    # A page of one reads one item more, to know whether the list goes on.
    assert listing.items_read == 2
    assert looking_up.items_read == 1 + 0 + 2
    assert writing.items_read == 0
