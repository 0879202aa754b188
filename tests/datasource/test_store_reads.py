"""Point reads: by key, by confirmation id (the sparse GSI3), and creation."""

import uuid

import pytest

from datasource import PaymentStore
from datasource.history import event_item
from datasource.items import to_item
from domain.enums import PaymentStatus
from domain.errors import Conflict, StorageUnavailable
from domain.history import event_of
from tests.backends import CURSOR_SECRET
from tests.datasource.stored_items import all_items, raw_item
from tests.payment_samples import TEST_ACTOR, full_payment, ref_of, sample_payment, stored_new


async def test_a_created_payment_is_stored_and_read_back(store: PaymentStore) -> None:
    payment = full_payment()
    assert await stored_new(store, payment) == payment
    assert await raw_item(store, payment) == to_item(payment)
    assert await store.get(ref_of(payment)) == payment


async def test_create_returns_the_payment_as_stored(store: PaymentStore) -> None:
    # Timestamps are stored to the millisecond; what create returns must equal a later read.
    payment = sample_payment()
    precise = payment.created_at.replace(microsecond=123456)
    created = await stored_new(store, sample_payment(created_at=precise, updated_at=precise))
    assert created.created_at.microsecond == 123000
    assert await store.get(ref_of(created)) == created


async def test_creating_an_existing_payment_is_a_conflict(store: PaymentStore) -> None:
    payment = await stored_new(store, sample_payment(status=PaymentStatus.ACHSENT))
    again = sample_payment(payment_id=payment.payment_id, amount_cents=1)
    with pytest.raises(Conflict) as conflict:
        await stored_new(store, again)
    assert conflict.value.found is PaymentStatus.ACHSENT
    # Nothing of the refused creation was written: neither the payment nor its event.
    stored = sorted(await all_items(store), key=lambda item: item["SK"]["S"])
    assert stored == [event_item(event_of(None, payment, TEST_ACTOR)), to_item(payment)]


async def test_a_missing_payment_reads_as_none(store: PaymentStore) -> None:
    payment = await stored_new(store, sample_payment())
    assert await store.get(ref_of(sample_payment())) is None
    # The same payment id under another user or loan is another payment.
    other_user = sample_payment(payment_id=payment.payment_id, user_id="bob")
    assert await store.get(ref_of(other_user)) is None
    other_loan = sample_payment(payment_id=payment.payment_id, loan_id="loan-2")
    assert await store.get(ref_of(other_loan)) is None


async def test_a_payment_is_found_by_its_confirmation_id(store: PaymentStore) -> None:
    confirmed = await stored_new(store, sample_payment(confirmation_id="conf-1"))
    await stored_new(store, sample_payment(confirmation_id="conf-2"))
    found = await store.payment_by_confirmation(user_id="alice", confirmation_id="conf-1")
    assert found == confirmed


async def test_confirmation_lookups_are_per_user_and_sparse(store: PaymentStore) -> None:
    await stored_new(store, sample_payment(user_id="bob", confirmation_id="conf-1"))
    unconfirmed = await stored_new(store, sample_payment())
    assert await store.payment_by_confirmation(user_id="alice", confirmation_id="conf-1") is None
    raw = await raw_item(store, unconfirmed)
    assert raw is not None
    assert "GSI3PK" not in raw
    assert "GSI3SK" not in raw
    # Only confirmed payments are in GSI3 at all.
    response = await store.client.scan(TableName=store.table_name, IndexName="GSI3")
    assert [item["loc_user_id"]["S"] for item in response["Items"]] == ["bob"]


async def test_ping_answers_when_the_table_does(store: PaymentStore) -> None:
    await store.ping()  # the table answers: no StorageUnavailable

    missing = PaymentStore(
        store.client, table_name=f"missing-{uuid.uuid4().hex}", cursor_secret=CURSOR_SECRET
    )
    with pytest.raises(StorageUnavailable, match="the payments table does not exist"):
        await missing.ping()
