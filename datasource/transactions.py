"""TransactWriteItems, answered with why each of its writes was cancelled, or None if it went.

DynamoDB cancels a whole transaction when one of its conditions fails (`ConditionalCheckFailed`
in that write's reason, with the stored item when the write asked for `ALL_OLD`), when another
transaction holds one of its items (`TransactionConflict`), or when one of its items' table or
index is throttled (`ThrottlingError`, the other reasons "None"). The last two say nothing about
the items and wrote nothing, so the transaction is tried again after a jittered wait, a bounded
number of times, and only while the wait and another attempt fit in the operation's budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

from botocore.exceptions import ClientError

from datasource.batch import Backoff
from datasource.deadline import pause, storage_call
from datasource.errors import error_code
from datasource.items import Item
from datasource.retries import throttles_of
from domain.errors import StorageUnavailable

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef

__all__ = [
    "CONDITION_FAILED_REASON",
    "CancellationReason",
    "cancellation_reasons",
    "run_transaction",
    "wait_to_retry",
    "worth_retrying",
]

CONDITION_FAILED_REASON = "ConditionalCheckFailed"
NO_REASON = "None"
TRANSACTION_CONFLICT_REASON = "TransactionConflict"
THROTTLING_REASON = "ThrottlingError"
# Reasons that say nothing of the items: the same transaction may go through when sent again.
RETRIED_REASONS = frozenset({TRANSACTION_CONFLICT_REASON, THROTTLING_REASON})
_CANCELLED = "TransactionCanceledException"
_OPERATION = "TransactWriteItems"


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
            reasons = (reasons + padding)[: len(transaction)]
            if any(reason.get("Code") == THROTTLING_REASON for reason in reasons):
                throttles_of(client).add(_OPERATION)
            return reasons
    return None


def worth_retrying(codes: Iterable[str | None]) -> bool:
    """Whether a transaction cancelled for these reasons (no condition among them failed) may go
    through when sent again."""
    return not RETRIED_REASONS.isdisjoint(codes)


async def wait_to_retry(backoff: Backoff, attempt: int, *, took: float) -> None:
    """The wait before retry `attempt` (from 0) of a transaction whose last attempt took `took`
    seconds; StorageUnavailable, at once, when the wait and another such attempt do not fit in
    the operation's budget."""
    await pause(backoff.delay(attempt), then=took)


async def run_transaction(
    client: DynamoDBClient, transaction: list[TransactWriteItemTypeDef], *, backoff: Backoff
) -> list[CancellationReason] | None:
    """Like `cancellation_reasons`, with cancellations by a concurrent transaction retried; the
    reasons returned name a failed condition (StorageUnavailable for any other cause)."""
    loop = asyncio.get_running_loop()
    for attempt in range(backoff.retries + 1):
        started = loop.time()
        reasons = await cancellation_reasons(client, transaction)
        if reasons is None:
            return None
        codes = {reason.get("Code") for reason in reasons}
        if CONDITION_FAILED_REASON in codes:
            return reasons
        if not worth_retrying(codes):
            raise StorageUnavailable()
        await wait_to_retry(backoff, attempt, took=loop.time() - started)
    raise StorageUnavailable("the payment is busy with concurrent requests; retry")
