"""Idempotency records: written in the same transaction as the write they name, read back when
a request with the same key comes again.

A record (`USER#<user_id>` / `IDEMPOTENCY#<caller's kind>#<sha256 of the key>`, no index keys,
24 h of TTL) is put on the condition that no live record holds the key. When one does, the same
request is answered with the payment as it is now and nothing is written; another request is
`IdempotencyMismatch`. `put_new_with_key` writes a creation with its record, trying a cancelled
transaction (a conflict, a throttle) again within the operation's budget; a move's record rides in
its own transaction (`datasource.writes`), and `replayed_move` answers a resend of a move already
made. A live record of the earlier, user-scoped form answers as the new one would
(`user_scoped_answer`), only to the kind of caller that wrote it.

The record's attributes, and the earlier form until it can go: docs/data-model.md#the-item.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

from datasource.batch import Backoff, batch_get_items
from datasource.deadline import storage_call
from datasource.history import event_key_of, event_put, history_taken
from datasource.items import Item, from_item, primary_key
from datasource.table import PK, SK, TTL_ATTRIBUTE
from datasource.transactions import (
    CONDITION_FAILED_REASON,
    cancellation_reasons,
    wait_to_retry,
    worth_retrying,
)
from domain import keys
from domain.audit import ActorKind
from domain.errors import Conflict, IdempotencyMismatch, NotFound, StorageUnavailable
from domain.history import PaymentEvent
from domain.idempotency import CallerKind, IdempotencyClaim, WriteOutcome
from domain.payment import Payment, PaymentRef
from domain.validation import format_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef

__all__ = [
    "check_same_request",
    "put_new_with_key",
    "record_put",
    "replayed_move",
    "user_scoped_answer",
]


def record_key(claim: IdempotencyClaim) -> Item:
    return {
        PK: {"S": keys.user_partition(claim.user_id)},
        SK: {"S": keys.idempotency_sort_key(claim.caller, claim.key)},
    }


def user_scoped_record_key(claim: IdempotencyClaim) -> Item:
    """The key's record as it was written before keys were scoped by the caller's kind."""
    return {
        PK: {"S": keys.user_partition(claim.user_id)},
        SK: {"S": keys.user_scoped_idempotency_sort_key(claim.key)},
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
    feed: keys.FeedLayout = keys.SEED_FEED,
) -> WriteOutcome:
    payment = from_item(payment_item)
    earlier = await user_scoped_answer(
        client, table_name=table_name, claim=claim, now=payment.created_at, backoff=backoff
    )
    if earlier is not None:
        return WriteOutcome(earlier, replayed=True)
    transaction: list[TransactWriteItemTypeDef] = [
        {
            "Put": {
                "TableName": table_name,
                "Item": payment_item,
                "ConditionExpression": f"attribute_not_exists({PK})",
            }
        },
        record_put(table_name, claim, payment),
        event_put(table_name, event, feed),
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
    does. One consistent read of the record (in either form) and the payment together."""
    items = await batch_get_items(
        client,
        table_name=table_name,
        keys=[record_key(claim), user_scoped_record_key(claim), primary_key(ref)],
        backoff=backoff,
    )
    by_sort_key = {item[SK]["S"]: item for item in items}
    record = by_sort_key.get(keys.idempotency_sort_key(claim.caller, claim.key))
    if record is None or not _live(record, now):
        earlier = by_sort_key.get(keys.user_scoped_idempotency_sort_key(claim.key))
        if earlier is None or not _live(earlier, now):
            return None
        return await _answer_of_user_scoped(client, table_name, claim, earlier, backoff)
    check_same_request(claim, record)
    payment = by_sort_key.get(keys.payment_sort_key(ref.loan_id, ref.payment_id))
    if payment is None:
        raise NotFound("the payment this idempotency key moved is gone")
    return from_item(payment)


async def user_scoped_answer(
    client: DynamoDBClient,
    *,
    table_name: str,
    claim: IdempotencyClaim,
    now: datetime,
    backoff: Backoff,
) -> Payment | None:
    """What a live record of the claim's key written before keys were scoped by the caller's
    kind answers this caller: the payment it names as it is now (the same request), or
    IdempotencyMismatch (another); None if there is none that this kind of caller wrote."""
    async with storage_call():
        response = await client.get_item(
            TableName=table_name, Key=user_scoped_record_key(claim), ConsistentRead=True
        )
    record = response.get("Item")
    if record is None or not _live(record, now):
        return None
    return await _answer_of_user_scoped(client, table_name, claim, record, backoff)


async def _answer_of_user_scoped(
    client: DynamoDBClient,
    table_name: str,
    claim: IdempotencyClaim,
    record: Item,
    backoff: Backoff,
) -> Payment | None:
    # The record does not say who wrote it; the event of the write it names does (one read of
    # the event and the payment together).
    ref = PaymentRef(claim.user_id, record["loc_loan_id"]["S"], record["loc_payment_id"]["S"])
    event_key = event_key_of(ref, int(record["loc_version"]["N"]))
    items = await batch_get_items(
        client, table_name=table_name, keys=[event_key, primary_key(ref)], backoff=backoff
    )
    by_sort_key = {item[SK]["S"]: item for item in items}
    event = by_sort_key.get(event_key[SK]["S"])
    if event is not None:
        writer = CallerKind.of(ActorKind[event["loc_actor_kind"]["S"]])
        if writer is not claim.caller:
            return None
    check_same_request(claim, record)
    payment = by_sort_key.get(keys.payment_sort_key(ref.loan_id, ref.payment_id))
    if payment is None:
        raise NotFound("the payment this idempotency key wrote is gone")
    return from_item(payment)


def _live(record: Item, now: datetime) -> bool:
    """Not yet past its time, even if DynamoDB's TTL sweep has not deleted it."""
    return int(record[TTL_ATTRIBUTE]["N"]) >= int(_epoch(now))


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
