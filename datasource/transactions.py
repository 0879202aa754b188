"""TransactWriteItems, answered with why each of its writes was cancelled, or None if it went.

DynamoDB cancels a whole transaction when one of its conditions fails (`ConditionalCheckFailed`
in that write's reason, with the stored item when the write asked for `ALL_OLD`), or when another
transaction holds one of its items (`TransactionConflict`). The latter says nothing about the
items, so it is tried again after a jittered wait, a bounded number of times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from botocore.exceptions import ClientError

from datasource.batch import Backoff
from datasource.deadline import pause, storage_call
from datasource.errors import error_code
from datasource.items import Item
from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef

CONDITION_FAILED_REASON = "ConditionalCheckFailed"
NO_REASON = "None"
TRANSACTION_CONFLICT_REASON = "TransactionConflict"
_CANCELLED = "TransactionCanceledException"


class CancellationReason(TypedDict, total=False):
    """Why one write of a cancelled transaction was cancelled, as botocore parses the error (the
    stub package types successful answers only)."""

    Code: str
    Message: str
    Item: Item


async def cancellation_reasons(
    client: DynamoDBClient, transaction: list[TransactWriteItemTypeDef]
) -> list[CancellationReason] | None:
    """None when the transaction went through; else why each of its writes was cancelled, one
    reason per write, in the transaction's order (code "None" for a write that was not the cause).
    """
    async with storage_call():
        try:
            await client.transact_write_items(TransactItems=transaction)
        except ClientError as error:
            if error_code(error) != _CANCELLED:
                raise
            reasons: list[CancellationReason] = list(error.response.get("CancellationReasons", []))
            # A list that stops short (some emulators) reads as "not the cause" for the rest.
            padding: list[CancellationReason] = [{"Code": NO_REASON}] * len(transaction)
            return (reasons + padding)[: len(transaction)]
    return None


async def run_transaction(
    client: DynamoDBClient, transaction: list[TransactWriteItemTypeDef], *, backoff: Backoff
) -> list[CancellationReason] | None:
    """Like `cancellation_reasons`, with cancellations by a concurrent transaction retried; the
    reasons returned name a failed condition (StorageUnavailable for any other cause)."""
    for attempt in range(backoff.retries + 1):
        reasons = await cancellation_reasons(client, transaction)
        if reasons is None:
            return None
        codes = {reason.get("Code") for reason in reasons}
        if CONDITION_FAILED_REASON in codes:
            return reasons
        if TRANSACTION_CONFLICT_REASON not in codes:
            raise StorageUnavailable()
        await pause(backoff.delay(attempt))
    raise StorageUnavailable("the payment is busy with a concurrent request; retry")
