"""Creation under an idempotency key: the payment, its key record and the creation's event in
one transaction.

The record (``PK = USER#u``, ``SK = IDEMPOTENCY#<digest>``) carries no index keys, so no access
pattern ever sees it, and ``loc_expires_at`` (epoch seconds) is the table's TTL attribute. When
the record exists already the transaction is cancelled; the record then says which payment the
key made and for which request, so the answer is that payment or ``IdempotencyMismatch``.
Concurrent creations under one key can cancel each other (``TransactionConflict``); those are
tried again after a jittered wait, a bounded number of times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datasource.batch import Backoff
from datasource.deadline import pause, storage_call
from datasource.history import event_put, history_taken
from datasource.items import Item, from_item, primary_key
from datasource.table import PK, SK, TTL_ATTRIBUTE
from datasource.transactions import (
    CONDITION_FAILED_REASON,
    TRANSACTION_CONFLICT_REASON,
    cancellation_reasons,
)
from domain import keys
from domain.errors import Conflict, IdempotencyMismatch, NotFound, StorageUnavailable
from domain.history import PaymentEvent
from domain.idempotency import IdempotencyClaim
from domain.payment import Payment, PaymentRef
from domain.validation import format_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef


def record_key(claim: IdempotencyClaim) -> Item:
    return {
        PK: {"S": keys.user_partition(claim.user_id)},
        SK: {"S": keys.idempotency_sort_key(claim.key)},
    }


def record_item(claim: IdempotencyClaim, payment: Payment) -> Item:
    return {
        **record_key(claim),
        "loc_user_id": {"S": payment.user_id},
        "loc_loan_id": {"S": payment.loan_id},
        "loc_payment_id": {"S": payment.payment_id},
        "loc_request_fingerprint": {"S": claim.fingerprint},
        "loc_created_date": {"S": format_timestamp(payment.created_at)},
        TTL_ATTRIBUTE: {"N": str(int(claim.expires_at.timestamp()))},
    }


async def put_new_with_key(
    client: DynamoDBClient,
    *,
    table_name: str,
    payment_item: Item,
    event: PaymentEvent,
    claim: IdempotencyClaim,
    backoff: Backoff,
) -> Payment:
    payment = from_item(payment_item)
    # A record whose time is up counts as gone, even before DynamoDB's TTL sweep deletes it.
    now = str(int(payment.created_at.timestamp()))
    transaction: list[TransactWriteItemTypeDef] = [
        {
            "Put": {
                "TableName": table_name,
                "Item": payment_item,
                "ConditionExpression": f"attribute_not_exists({PK})",
            }
        },
        {
            "Put": {
                "TableName": table_name,
                "Item": record_item(claim, payment),
                "ConditionExpression": f"attribute_not_exists({PK}) OR #expires < :now",
                "ExpressionAttributeNames": {"#expires": TTL_ATTRIBUTE},
                "ExpressionAttributeValues": {":now": {"N": now}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        event_put(table_name, event),
    ]
    for attempt in range(backoff.retries + 1):
        reasons = await cancellation_reasons(client, transaction)
        if reasons is None:
            return payment
        payment_code, record_code, event_code = (reason.get("Code") for reason in reasons)
        if record_code == CONDITION_FAILED_REASON:
            record = reasons[1].get("Item") or await _read_record(client, table_name, claim)
            if record is not None:
                return await _replay(client, table_name, claim, record)
        elif payment_code == CONDITION_FAILED_REASON:
            raise Conflict(None, "a payment with this id exists already")
        elif event_code == CONDITION_FAILED_REASON:
            raise history_taken(event)
        elif TRANSACTION_CONFLICT_REASON not in (payment_code, record_code, event_code):
            raise StorageUnavailable()
        await pause(backoff.delay(attempt))
    raise StorageUnavailable("the idempotency key is busy with a concurrent request; retry")


async def _read_record(
    client: DynamoDBClient, table_name: str, claim: IdempotencyClaim
) -> Item | None:
    async with storage_call():
        response = await client.get_item(
            TableName=table_name, Key=record_key(claim), ConsistentRead=True
        )
    return response.get("Item")


async def _replay(
    client: DynamoDBClient, table_name: str, claim: IdempotencyClaim, record: Item
) -> Payment:
    if record["loc_request_fingerprint"]["S"] != claim.fingerprint:
        raise IdempotencyMismatch()
    ref = PaymentRef(claim.user_id, record["loc_loan_id"]["S"], record["loc_payment_id"]["S"])
    async with storage_call():
        response = await client.get_item(
            TableName=table_name, Key=primary_key(ref), ConsistentRead=True
        )
    if "Item" not in response:
        raise NotFound("the payment this idempotency key created is gone")
    return from_item(response["Item"])
