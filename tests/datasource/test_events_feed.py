"""The events feed's storage (GSI4): what it carries of an event, what a delivery reads back, an
empty range, and a table made before the feed getting its index."""

from __future__ import annotations

from datetime import timedelta

from datasource import PaymentStore
from datasource.events import feed_start, settled_before
from datasource.history import event_item
from datasource.table import FEED_ATTRIBUTES, GSI4, create_table_if_missing, table_definition
from domain.history import event_of
from tests.backends import Backend
from tests.payment_samples import TEST_ACTOR, full_payment, sample_payment, stored_new


def test_the_feed_carries_every_attribute_of_an_event_but_its_payment() -> None:
    item = event_item(event_of(None, full_payment(), TEST_ACTOR))
    keys = {"PK", "SK", "GSI4PK", "GSI4SK"}
    assert set(item) - keys - {"loc_payment"} <= set(FEED_ATTRIBUTES)
    assert "loc_payment" in item


async def test_a_delivery_reads_each_settled_event_with_the_payment_its_write_left(
    store: PaymentStore,
) -> None:
    payment = sample_payment()
    await stored_new(store, payment)
    later = payment.updated_at + timedelta(seconds=10)

    [(key, event)] = await store.feed_after(
        lower=feed_start(None), key=None, upper=settled_before(later, 5), limit=10
    )
    assert event.payment == payment
    assert key["GSI4PK"] == {"S": "EVENTS"}
    # Before it settles, nothing; and an empty range (lower above upper) is no error.
    early = settled_before(payment.updated_at, 5)
    assert await store.feed_after(lower=feed_start(None), key=None, upper=early, limit=10) == []
    assert await store.feed_after(lower=feed_start(later), key=None, upper=early, limit=10) == []
    assert (
        await store.feed_after(
            lower=feed_start(None), key=key, upper=settled_before(later, 5), limit=10
        )
        == []
    )


async def test_a_table_made_before_the_feed_gets_its_index_at_start(backend: Backend) -> None:
    name = f"test-before-feed-{backend.name}"
    old = table_definition(name)
    old["GlobalSecondaryIndexes"] = [
        index for index in old["GlobalSecondaryIndexes"] if index["IndexName"] != GSI4
    ]
    old["AttributeDefinitions"] = [
        a for a in old["AttributeDefinitions"] if not a["AttributeName"].startswith("GSI4")
    ]
    del old["StreamSpecification"]
    await backend.client.create_table(**old)
    try:
        assert await create_table_if_missing(backend.client, name, stream=False) is False
        described = await backend.client.describe_table(TableName=name)
        indexes = {
            index["IndexName"]: index["IndexStatus"]
            for index in described["Table"]["GlobalSecondaryIndexes"]
        }
        assert indexes.get(GSI4) == "ACTIVE"
    finally:
        await backend.client.delete_table(TableName=name)
