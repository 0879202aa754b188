"""Reading and seeding the table around the store, with the raw client, for assertions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from datasource import DynamoConfig, PaymentStore
from datasource.client import open_client
from datasource.confirmation_claims import claim_key
from datasource.items import Item, primary_key, to_item
from datasource.table import PK, SK
from domain import keys
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import WriteRequestTypeDef


async def raw_item(store: PaymentStore, payment: Payment) -> Item | None:
    response = await store.client.get_item(
        TableName=store.table_name, Key=primary_key(payment), ConsistentRead=True
    )
    item: Item | None = response.get("Item")
    return item


async def raw_event(store: PaymentStore, payment: Payment) -> Item | None:
    """The event of the write that gave `payment` its version, None if there is none."""
    response = await store.client.get_item(
        TableName=store.table_name,
        Key={
            PK: {"S": keys.user_partition(payment.user_id)},
            SK: {"S": keys.history_sort_key(payment.loan_id, payment.payment_id, payment.version)},
        },
        ConsistentRead=True,
    )
    item: Item | None = response.get("Item")
    return item


async def raw_claim(store: PaymentStore, user_id: str, confirmation_id: str | None) -> Item | None:
    """The claim of a confirmation id (None for no id, or an id nobody claimed)."""
    if confirmation_id is None:
        return None
    response = await store.client.get_item(
        TableName=store.table_name,
        Key=claim_key(user_id, confirmation_id),
        ConsistentRead=True,
    )
    item: Item | None = response.get("Item")
    return item


async def all_items(store: PaymentStore) -> list[Item]:
    response = await store.client.scan(TableName=store.table_name, ConsistentRead=True)
    items: list[Item] = response["Items"]
    return items


async def put_all(store: PaymentStore, payments: Sequence[Payment]) -> None:
    """Seed many payments fast: BatchWriteItem, 25 at a time."""
    await put_items(store, [to_item(payment, store.layout) for payment in payments])


async def put_items(store: PaymentStore, items: Sequence[Item]) -> None:
    """Seed items as given, 25 to a BatchWriteItem: plain puts, which a retry cannot refuse."""
    for start in range(0, len(items), 25):
        requests: list[WriteRequestTypeDef] = [
            {"PutRequest": {"Item": item}} for item in items[start : start + 25]
        ]
        response = await store.client.batch_write_item(RequestItems={store.table_name: requests})
        assert not response.get("UnprocessedItems")


async def put_all_raw(config: DynamoConfig, items: Sequence[Item]) -> None:
    """Seed items exactly as given (a payment as an older version of the service wrote it)."""
    async with open_client(config) as client:
        for item in items:
            await client.put_item(TableName=config.table_name, Item=item)
