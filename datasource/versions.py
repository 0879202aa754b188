"""The versions stored of a user's payments (or a loan's), read strongly: where a live
subscription starts (`resolvers.live`), so that an event at or below them, stored before it was
accepted, is never sent.

One Query per MB of the partition's payments, projecting only the payment id and version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datasource.deadline import storage_call
from datasource.items import Item
from datasource.table import PK, SK
from domain import keys

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import QueryInputTypeDef

__all__ = ["stored_versions"]

PAYMENT_ID = "loc_payment_id"
VERSION = "loc_version"


async def stored_versions(
    client: DynamoDBClient, *, table_name: str, user_id: str, loan_id: str | None
) -> dict[str, int]:
    """Payment id -> version of every payment of the user (of the loan, when given)."""
    prefix = keys.user_payments_prefix() if loan_id is None else keys.loan_payments_prefix(loan_id)
    parameters: QueryInputTypeDef = {
        "TableName": table_name,
        "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :prefix AND :end",
        "ProjectionExpression": "#id, #version",
        "ExpressionAttributeNames": {"#pk": PK, "#sk": SK, "#id": PAYMENT_ID, "#version": VERSION},
        "ExpressionAttributeValues": {
            ":pk": {"S": keys.user_partition(user_id)},
            ":prefix": {"S": prefix},
            ":end": {"S": keys.prefix_end(prefix)},
        },
        "ConsistentRead": True,
    }
    versions: dict[str, int] = {}
    start_key: Item | None = None
    while True:
        if start_key is not None:
            parameters["ExclusiveStartKey"] = start_key
        async with storage_call():
            response = await client.query(**parameters)
        for item in response.get("Items", []):
            versions[item[PAYMENT_ID]["S"]] = int(item[VERSION]["N"])
        start_key = response.get("LastEvaluatedKey")
        if start_key is None:
            return versions
