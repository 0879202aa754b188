"""The one table's definition: keys, the three GSIs, billing.

The embedded DynamoDB, the tests and any infrastructure template all build the table from
``table_definition``; nothing else spells out an index.
"""

from __future__ import annotations

import contextlib
from typing import Any

GSI1 = "GSI1"
GSI2 = "GSI2"
GSI3 = "GSI3"
# Epoch seconds after which DynamoDB deletes an item: idempotency records carry it, payments never.
TTL_ATTRIBUTE = "loc_expires_at"

_KEY_ATTRIBUTES = ("PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK")


def _index(name: str) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": f"{name}PK", "KeyType": "HASH"},
            {"AttributeName": f"{name}SK", "KeyType": "RANGE"},
        ],
        # Every pattern returns whole payments, so every index carries every attribute.
        "Projection": {"ProjectionType": "ALL"},
    }


def table_definition(table_name: str) -> dict[str, Any]:
    """CreateTable arguments: PK/SK, GSI1-3 with ALL projection, on-demand billing."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"} for name in _KEY_ATTRIBUTES
        ],
        "KeySchema": [
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [_index(GSI1), _index(GSI2), _index(GSI3)],
    }


def time_to_live(table_name: str) -> dict[str, Any]:
    """UpdateTimeToLive arguments (TTL is not part of CreateTable)."""
    return {
        "TableName": table_name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    }


async def create_table_if_missing(client: Any, table_name: str) -> bool:
    """Create the table unless it exists, wait until it is active and turn on its TTL; True when
    it was made."""
    try:
        await client.describe_table(TableName=table_name)
        return False
    except client.exceptions.ResourceNotFoundException:
        pass
    # Another process may create it between our two calls; that is as good.
    with contextlib.suppress(client.exceptions.ResourceInUseException):
        await client.create_table(**table_definition(table_name))
    waiter = client.get_waiter("table_exists")
    await waiter.wait(TableName=table_name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 150})
    await client.update_time_to_live(**time_to_live(table_name))
    return True


def page_key_attributes(index: str | None) -> tuple[str, ...]:
    """The attributes of a LastEvaluatedKey on `index` (None: the table), in a fixed order.

    A GSI's position also needs the table key: many items can share one GSI key.
    """
    if index is None:
        return ("PK", "SK")
    return (f"{index}PK", f"{index}SK", "PK", "SK")
