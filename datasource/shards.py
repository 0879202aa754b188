"""Moving payments between GSI2 layouts (`loc-payments reshard`): the two DynamoDB calls.

A reshard reads each partition of the old layouts on GSI2 (every status), and rewrites the
`GSI2PK` of each payment found there that belongs elsewhere in the layout written now. The
rewrite is conditional on the partition it was found in: a payment that the service moved
meanwhile (every write puts a payment in its partition of the layout written now) is left as
it is. Nothing else of the payment changes: not its version, not its history (the write moves
an index entry; it is not a change of the payment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from datasource.deadline import storage_call
from datasource.errors import error_code
from datasource.items import Item
from datasource.table import GSI2, GSI2PK, PK, SK

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import QueryInputTypeDef

__all__ = ["PartitionPage", "Placed", "move_to_partition", "partition_page"]


@dataclass(frozen=True, slots=True)
class Placed:
    """A payment as GSI2 lists it: its key, its id and the partition it is in."""

    key: Item
    payment_id: str
    partition: str


@dataclass(frozen=True, slots=True)
class PartitionPage:
    payments: list[Placed]
    # Where the next page starts; None when the partition has been read to its end.
    next_key: Item | None


async def partition_page(
    client: DynamoDBClient,
    *,
    table_name: str,
    partition: str,
    start_key: Item | None,
    limit: int,
) -> PartitionPage:
    """Up to `limit` payments of one GSI2 partition, any status, after `start_key`."""
    parameters: QueryInputTypeDef = {
        "TableName": table_name,
        "IndexName": GSI2,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": GSI2PK, "#id": "loc_payment_id"},
        "ExpressionAttributeValues": {":pk": {"S": partition}},
        # The key, the id (the shard's input) and where it is: all a move needs.
        "ProjectionExpression": f"{PK}, {SK}, #pk, #id",
        "Limit": limit,
    }
    if start_key is not None:
        parameters["ExclusiveStartKey"] = start_key
    async with storage_call():
        response = await client.query(**parameters)
    payments = [
        Placed(
            key={PK: item[PK], SK: item[SK]},
            payment_id=item["loc_payment_id"]["S"],
            partition=item[GSI2PK]["S"],
        )
        for item in response.get("Items", [])
    ]
    return PartitionPage(payments, response.get("LastEvaluatedKey"))


async def move_to_partition(
    client: DynamoDBClient, *, table_name: str, payment: Placed, partition: str
) -> bool:
    """Rewrite the payment's GSI2PK to `partition` if it is still where it was listed; False if
    it is not (the service moved it, or it is gone)."""
    async with storage_call():
        try:
            await client.update_item(
                TableName=table_name,
                Key=payment.key,
                UpdateExpression="SET #pk = :to",
                ConditionExpression="#pk = :from",
                ExpressionAttributeNames={"#pk": GSI2PK},
                ExpressionAttributeValues={
                    ":to": {"S": partition},
                    ":from": {"S": payment.partition},
                },
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
    return True
