"""The one table's definition: its key attributes, the four GSIs, billing, TTL, its stream.

The embedded DynamoDB, the tests and the CloudFormation template (`cloudformation_template`,
printed by `loc-payments template` into `infra/table.template.json`) all build the table from
``table_definition`` and ``time_to_live``; nothing else spells out an index or a key attribute's
name. `domain.keys` builds the values those attributes hold.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from datasource.errors import error_code

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import (
        CreateTableInputTypeDef,
        GlobalSecondaryIndexTypeDef,
        StreamSpecificationTypeDef,
        UpdateTimeToLiveInputTypeDef,
    )

__all__ = [
    "FEED_ATTRIBUTES",
    "GSI1",
    "GSI1PK",
    "GSI1SK",
    "GSI2",
    "GSI2PK",
    "GSI2SK",
    "GSI3",
    "GSI3PK",
    "GSI3SK",
    "GSI4",
    "GSI4PK",
    "GSI4SK",
    "PK",
    "SK",
    "TTL_ATTRIBUTE",
    "cloudformation_template",
    "create_table_if_missing",
    "page_key_attributes",
    "table_definition",
    "time_to_live",
]

GSI1 = "GSI1"
GSI2 = "GSI2"
GSI3 = "GSI3"
# The events feed: payment events only (a sparse index), every user's, oldest first.
GSI4 = "GSI4"

# The key attributes: the table's partition and sort key, then each index's.
PK = "PK"
SK = "SK"
GSI1PK = "GSI1PK"
GSI1SK = "GSI1SK"
GSI2PK = "GSI2PK"
GSI2SK = "GSI2SK"
GSI3PK = "GSI3PK"
GSI3SK = "GSI3SK"
GSI4PK = "GSI4PK"
GSI4SK = "GSI4SK"

# Epoch seconds after which DynamoDB deletes an item: idempotency records carry it, payments never.
TTL_ATTRIBUTE = "loc_expires_at"

# The table's stream, which `datasource.streams` reads for live updates: each write's new item.
STREAM_SPECIFICATION: StreamSpecificationTypeDef = {
    "StreamEnabled": True,
    "StreamViewType": "NEW_IMAGE",
}

# (partition key, sort key) of the table (None) and of each index.
_INDEX_KEYS: dict[str | None, tuple[str, str]] = {
    None: (PK, SK),
    GSI1: (GSI1PK, GSI1SK),
    GSI2: (GSI2PK, GSI2SK),
    GSI3: (GSI3PK, GSI3SK),
    GSI4: (GSI4PK, GSI4SK),
}


# What the events feed (GSI4) carries of an event item: all of it but the payment it holds
# (`loc_payment`, about half the item), which a webhook's delivery reads from the table. An event
# written with its payment passes 1 KB; its copy on GSI4 does not, and costs half the units.
FEED_ATTRIBUTES = [
    "loc_user_id",
    "loc_loan_id",
    "loc_payment_id",
    "loc_version",
    "loc_from_status",
    "loc_to_status",
    "loc_event_date",
    "loc_update_reason",
    "loc_return_code",
    "loc_confirmation_id",
    "loc_actor_kind",
    "loc_actor_id",
    "loc_request_id",
    "loc_trace_parent",
]


def _index(name: str) -> GlobalSecondaryIndexTypeDef:
    partition, sort = _INDEX_KEYS[name]
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": partition, "KeyType": "HASH"},
            {"AttributeName": sort, "KeyType": "RANGE"},
        ],
        # Every payment pattern returns whole payments, so GSI1-3 carry every attribute.
        "Projection": (
            {"ProjectionType": "INCLUDE", "NonKeyAttributes": FEED_ATTRIBUTES}
            if name == GSI4
            else {"ProjectionType": "ALL"}
        ),
    }


def table_definition(table_name: str) -> CreateTableInputTypeDef:
    """CreateTable arguments: PK/SK, GSI1-3 with ALL projection and GSI4 with the feed's,
    on-demand billing, a stream of new images."""
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": name, "AttributeType": "S"}
            for attributes in _INDEX_KEYS.values()
            for name in attributes
        ],
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [_index(GSI1), _index(GSI2), _index(GSI3), _index(GSI4)],
        "StreamSpecification": {**STREAM_SPECIFICATION},
    }


def time_to_live(table_name: str) -> UpdateTimeToLiveInputTypeDef:
    """UpdateTimeToLive arguments (TTL is not part of CreateTable)."""
    return {
        "TableName": table_name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    }


def cloudformation_template(table_names: Mapping[str, str]) -> dict[str, Any]:
    """A CloudFormation template of the table, for the environments in `table_names`.

    The keys, indexes, billing, stream and TTL are those of `table_definition` and `time_to_live`;
    AWS adds what only a real table has: point-in-time recovery, deletion protection, KMS
    encryption, and a Retain policy, so that neither a stack deletion nor a replacement drops the
    payments.
    """
    # CreateTable's arguments and the resource's properties share their names and shapes, but
    # for the stream: the resource has one when it names a view type (no `StreamEnabled`).
    create_arguments: dict[str, Any] = {
        name: value for name, value in table_definition("").items() if name != "TableName"
    }
    create_arguments["StreamSpecification"] = {
        "StreamViewType": STREAM_SPECIFICATION["StreamViewType"]
    }
    properties: dict[str, Any] = {
        "TableName": {
            "Fn::If": [
                "NameGiven",
                {"Ref": "TableName"},
                {"Fn::FindInMap": ["Environments", {"Ref": "Environment"}, "TableName"]},
            ]
        },
        **create_arguments,
        "TimeToLiveSpecification": time_to_live("")["TimeToLiveSpecification"],
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "DeletionProtectionEnabled": True,
        "SSESpecification": {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": {
                "Fn::If": ["KmsKeyGiven", {"Ref": "KmsKeyId"}, {"Ref": "AWS::NoValue"}]
            },
        },
        "Tags": [
            {"Key": "service", "Value": "loc-payments"},
            {"Key": "environment", "Value": {"Ref": "Environment"}},
        ],
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": (
            "The loc-payments table. Generated by `loc-payments template` from "
            "datasource/table.py; do not edit by hand."
        ),
        "Parameters": {
            "Environment": {
                "Type": "String",
                "AllowedValues": list(table_names),
                "Description": "LOC_ENV of the service that uses the table; picks its name",
            },
            "TableName": {
                "Type": "String",
                "Default": "",
                "Description": "A table name other than the environment's (LOC_TABLE_NAME)",
            },
            "KmsKeyId": {
                "Type": "String",
                "Default": "",
                "Description": "A customer-managed KMS key; empty: the AWS-managed aws/dynamodb",
            },
        },
        "Mappings": {
            "Environments": {env: {"TableName": name} for env, name in table_names.items()}
        },
        "Conditions": {
            "NameGiven": {"Fn::Not": [{"Fn::Equals": [{"Ref": "TableName"}, ""]}]},
            "KmsKeyGiven": {"Fn::Not": [{"Fn::Equals": [{"Ref": "KmsKeyId"}, ""]}]},
        },
        "Resources": {
            "PaymentsTable": {
                "Type": "AWS::DynamoDB::Table",
                "DeletionPolicy": "Retain",
                "UpdateReplacePolicy": "Retain",
                "Properties": properties,
            }
        },
        "Outputs": {
            "TableName": {"Value": {"Ref": "PaymentsTable"}},
            "TableArn": {"Value": {"Fn::GetAtt": ["PaymentsTable", "Arn"]}},
        },
    }


async def create_table_if_missing(
    client: DynamoDBClient, table_name: str, *, stream: bool = True
) -> bool:
    """Create the table unless it exists, wait until it is active and turn on its TTL; True when
    it was made. A table made before the stream existed gets its stream turned on, and one made
    before the events feed its GSI4 (events stored before then are not in the feed).

    `stream=False` (live updates off: tests on moto, whose stream copies would slow every
    transaction) makes a table without one, and leaves an existing table as it is.
    """
    try:
        described = await client.describe_table(TableName=table_name)
    except client.exceptions.ResourceNotFoundException:
        pass
    else:
        streaming = described["Table"].get("StreamSpecification", {}).get("StreamEnabled", False)
        if stream and not streaming:
            await _enable_stream(client, table_name)
        indexes = {
            index["IndexName"] for index in described["Table"].get("GlobalSecondaryIndexes", [])
        }
        if GSI4 not in indexes:
            await _add_index(client, table_name, GSI4)
        return False
    definition = table_definition(table_name)
    if not stream:
        del definition["StreamSpecification"]
    # Another process may create it between our two calls; that is as good.
    with contextlib.suppress(client.exceptions.ResourceInUseException):
        await client.create_table(**definition)
    await _wait_until_active(client, table_name)
    await client.update_time_to_live(**time_to_live(table_name))
    return True


async def _enable_stream(client: DynamoDBClient, table_name: str) -> None:
    try:
        await client.update_table(TableName=table_name, StreamSpecification=STREAM_SPECIFICATION)
    except client.exceptions.ClientError as error:
        # Another process may have turned it on first: DynamoDB then refuses ours as invalid.
        if error_code(error) != "ValidationException":
            raise
        described = await client.describe_table(TableName=table_name)
        if not described["Table"].get("StreamSpecification", {}).get("StreamEnabled", False):
            raise
    await _wait_until_active(client, table_name)


async def _add_index(client: DynamoDBClient, table_name: str, name: str) -> None:
    partition, sort = _INDEX_KEYS[name]
    with contextlib.suppress(client.exceptions.ResourceInUseException):
        await client.update_table(
            TableName=table_name,
            AttributeDefinitions=[
                {"AttributeName": attribute, "AttributeType": "S"}
                for attribute in (partition, sort)
            ],
            GlobalSecondaryIndexUpdates=[{"Create": _index(name)}],
        )
    # Another process may be adding it too: either way, wait until it serves.
    for _ in range(600):
        described = await client.describe_table(TableName=table_name)
        statuses = {
            index["IndexName"]: index.get("IndexStatus", "ACTIVE")
            for index in described["Table"].get("GlobalSecondaryIndexes", [])
        }
        if statuses.get(name) == "ACTIVE":
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"index {name} of {table_name} did not become active")


async def _wait_until_active(client: DynamoDBClient, table_name: str) -> None:
    waiter = client.get_waiter("table_exists")
    await waiter.wait(
        TableName=table_name,
        # The stub says whole seconds; botocore sleeps whatever it is given, and a new table on
        # DynamoDB Local is active within a fraction of one.
        WaiterConfig={"Delay": 0.2, "MaxAttempts": 150},  # type: ignore[typeddict-item]
    )


def page_key_attributes(index: str | None) -> tuple[str, ...]:
    """The attributes of a LastEvaluatedKey on `index` (None: the table), in a fixed order.

    A GSI's position also needs the table key: many items can share one GSI key.
    """
    attributes = _INDEX_KEYS[index]
    return attributes if index is None else (*attributes, PK, SK)
