"""Idempotency records: written in the same transaction as the write they name, read back when
a request with the same key comes again.

    PK = USER#<user_id>, SK = IDEMPOTENCY#<sha256 of the key, hex>
    loc_user_id, loc_loan_id, loc_payment_id   the payment the request wrote
    loc_version                  N  the version that write produced (1: a creation)
    loc_request_fingerprint      S  a digest of the request (`domain.idempotency`)
    loc_created_date             S  when the write happened (RFC 3339)
    loc_expires_at               N  epoch seconds, the table's TTL attribute: 24 h later

The record carries no index keys, so no access pattern ever sees it. It is put on the condition
that no live record holds the key (none, or one whose time is up, even before DynamoDB's TTL sweep
deletes it); when one does the transaction is cancelled, and the record (`ALL_OLD`) says whether
the request is the same: then its answer is the payment as it is now, and nothing was written;
if not, `IdempotencyMismatch`.

Creation: concurrent creations under one key can cancel each other (``TransactionConflict``),
and a throttle cancels a transaction too (``ThrottlingError``); those are tried again after a
jittered wait, a bounded number of times, within the operation's budget
(`datasource.transactions`). Moves: `datasource.writes` adds the record to the move's
transaction; `replayed_move` reads a record for a move that was refused before any write was
tried (it had already happened).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

from datasource.batch import Backoff, batch_get_items
from datasource.deadline import storage_call
from datasource.history import event_put, history_taken
from datasource.items import Item, from_item, primary_key
from datasource.table import PK, SK, TTL_ATTRIBUTE
from datasource.transactions import (
    CONDITION_FAILED_REASON,
    cancellation_reasons,
    wait_to_retry,
    worth_retrying,
)
from domain import keys
from domain.errors import Conflict, IdempotencyMismatch, NotFound, StorageUnavailable
from domain.history import PaymentEvent
from domain.idempotency import IdempotencyClaim, WriteOutcome
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


def record_put(
    table_name: str, claim: IdempotencyClaim, written: Payment
) -> TransactWriteItemTypeDef:
    """The record's put in the transaction that writes `written` (the payment after the write)."""
    item: Item = {
        **record_key(claim),
        "loc_user_id": {"S": written.user_id},
        "loc_loan_id": {"S": written.loan_id},
        "loc_payment_id": {"S": written.payment_id},
        "loc_version": {"N": str(written.version)},
        "loc_request_fingerprint": {"S": claim.fingerprint},
        "loc_created_date": {"S": format_timestamp(written.updated_at)},
        TTL_ATTRIBUTE: {"N": str(int(claim.expires_at.timestamp()))},
    }
    return {
        "Put": {
            "TableName": table_name,
            "Item": item,
            "ConditionExpression": f"attribute_not_exists({PK}) OR #expires < :now",
            "ExpressionAttributeNames": {"#expires": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":now": {"N": _epoch(written.updated_at)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def check_same_request(claim: IdempotencyClaim, record: Item) -> None:
    """IdempotencyMismatch unless the live `record` holding the claim's key was written for the
    same request."""
    if record["loc_request_fingerprint"]["S"] != claim.fingerprint:
        raise IdempotencyMismatch()


async def put_new_with_key(
    client: DynamoDBClient,
    *,
    table_name: str,
    payment_item: Item,
    event: PaymentEvent,
    claim: IdempotencyClaim,
    backoff: Backoff,
) -> WriteOutcome:
    payment = from_item(payment_item)
    transaction: list[TransactWriteItemTypeDef] = [
        {
            "Put": {
                "TableName": table_name,
                "Item": payment_item,
                "ConditionExpression": f"attribute_not_exists({PK})",
            }
        },
        record_put(table_name, claim, payment),
        event_put(table_name, event),
    ]
    loop = asyncio.get_running_loop()
    for attempt in range(backoff.retries + 1):
        started = loop.time()
        reasons = await cancellation_reasons(client, transaction)
        if reasons is None:
            return WriteOutcome(payment)
        payment_code, record_code, event_code = (reason.get("Code") for reason in reasons)
        if record_code == CONDITION_FAILED_REASON:
            record = reasons[1].get("Item") or await _read_record(client, table_name, claim)
            if record is not None:
                check_same_request(claim, record)
                return WriteOutcome(await _created(client, table_name, claim, record), True)
        elif payment_code == CONDITION_FAILED_REASON:
            raise Conflict(None, "a payment with this id exists already")
        elif event_code == CONDITION_FAILED_REASON:
            raise history_taken(event)
        elif not worth_retrying((payment_code, record_code, event_code)):
            raise StorageUnavailable()
        await wait_to_retry(backoff, attempt, took=loop.time() - started)
    raise StorageUnavailable("the idempotency key is busy with concurrent requests; retry")


async def replayed_move(
    client: DynamoDBClient,
    *,
    table_name: str,
    claim: IdempotencyClaim,
    ref: PaymentRef,
    now: datetime,
    backoff: Backoff,
) -> Payment | None:
    """The payment as it is now if a live record says this very move was written under the
    claim's key; None if no live record holds the key; IdempotencyMismatch if another request's
    does. One consistent read of the record and the payment together."""
    items = await batch_get_items(
        client,
        table_name=table_name,
        keys=[record_key(claim), primary_key(ref)],
        backoff=backoff,
    )
    by_sort_key = {item[SK]["S"]: item for item in items}
    record = by_sort_key.get(keys.idempotency_sort_key(claim.key))
    if record is None or int(record[TTL_ATTRIBUTE]["N"]) < int(_epoch(now)):
        return None
    check_same_request(claim, record)
    payment = by_sort_key.get(keys.payment_sort_key(ref.loan_id, ref.payment_id))
    if payment is None:
        raise NotFound("the payment this idempotency key moved is gone")
    return from_item(payment)


def _epoch(moment: datetime) -> str:
    return str(int(moment.timestamp()))


async def _read_record(
    client: DynamoDBClient, table_name: str, claim: IdempotencyClaim
) -> Item | None:
    async with storage_call():
        response = await client.get_item(
            TableName=table_name, Key=record_key(claim), ConsistentRead=True
        )
    return response.get("Item")


async def _created(
    client: DynamoDBClient, table_name: str, claim: IdempotencyClaim, record: Item
) -> Payment:
    ref = PaymentRef(claim.user_id, record["loc_loan_id"]["S"], record["loc_payment_id"]["S"])
    async with storage_call():
        response = await client.get_item(
            TableName=table_name, Key=primary_key(ref), ConsistentRead=True
        )
    if "Item" not in response:
        raise NotFound("the payment this idempotency key created is gone")
    return from_item(response["Item"])
