"""The table as DynamoDB holds it, read with a plain boto3 client past the service (strongly
consistent): a payment's item, a user's partition, a payment's event items. For the races in one
process (tests/api/test_concurrent_transitions.py) and across two (test_two_instances.py); and an
idempotency record put back as an earlier version of the service stored it, for the idempotency
tests."""

from __future__ import annotations

import hashlib
from typing import Any

import boto3

from datasource import DynamoConfig


def raw_client(config: DynamoConfig) -> Any:
    """A plain boto3 client on the test's table: what DynamoDB holds, bypassing the service."""
    return boto3.client(
        "dynamodb",
        region_name=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id=config.aws_access_key_id,
        aws_secret_access_key=config.aws_secret_access_key,
    )


def raw_item(config: DynamoConfig, payment: dict[str, Any]) -> dict[str, Any]:
    """The payment's item exactly as DynamoDB holds it (a strongly consistent GetItem)."""
    key = {
        "PK": {"S": f"USER#{payment['userId']}"},
        "SK": {"S": f"LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}"},
    }
    item: dict[str, Any] = raw_client(config).get_item(
        TableName=config.table_name, Key=key, ConsistentRead=True
    )["Item"]
    return item


def partition(config: DynamoConfig, user: str, prefix: str = "") -> list[dict[str, Any]]:
    """The user's items whose sort key starts with `prefix`, in key order (strongly consistent;
    these tests store far less than a page)."""
    values = {":pk": {"S": f"USER#{user}"}}
    condition = "PK = :pk"
    if prefix:  # DynamoDB refuses an empty key value, even as a prefix
        values[":prefix"] = {"S": prefix}
        condition += " AND begins_with(SK, :prefix)"
    response = raw_client(config).query(
        TableName=config.table_name,
        KeyConditionExpression=condition,
        ExpressionAttributeValues=values,
        ConsistentRead=True,
    )
    assert "LastEvaluatedKey" not in response
    items: list[dict[str, Any]] = response["Items"]
    return items


def event_items(config: DynamoConfig, payment: dict[str, Any]) -> list[dict[str, Any]]:
    """The payment's event items, oldest first, as DynamoDB holds them."""
    prefix = f"HISTORY#LOAN#{payment['loanId']}#PAYMENT#{payment['paymentId']}#V#"
    return partition(config, payment["userId"], prefix)


def versions(events: list[dict[str, Any]]) -> list[int]:
    return [int(event["loc_version"]["N"]) for event in events]


def as_written_before_scoping(config: DynamoConfig, user: str, key: str) -> None:
    """Store the key's one record as the service wrote it before keys were scoped by the caller's
    kind (issue 55): the same attributes, under `USER#<user>` / `IDEMPOTENCY#<sha256 of the key>`
    (`git show 9eb4afb:datasource/idempotency.py`)."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    [record] = [
        item for item in partition(config, user, "IDEMPOTENCY#") if item["SK"]["S"].endswith(digest)
    ]
    client = raw_client(config)
    client.delete_item(TableName=config.table_name, Key={"PK": record["PK"], "SK": record["SK"]})
    client.put_item(
        TableName=config.table_name, Item={**record, "SK": {"S": f"IDEMPOTENCY#{digest}"}}
    )
