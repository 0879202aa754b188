"""The two conditional writes: putting a new payment, and moving a payment to a new status.

Each is one ``TransactWriteItems`` with the write's event (`datasource.history`): the payment and
its history are stored together or not at all. Both read the outcome of a failed condition from
the cancellation itself (``ReturnValuesOnConditionCheckFailure=ALL_OLD`` on the payment's write),
so a refused write costs no second read. A move that takes a confirmation id also claims it, in
the same transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datasource import confirmation_claims
from datasource.batch import Backoff
from datasource.history import event_put, history_taken
from datasource.idempotency import check_same_request, user_scoped_answer
from datasource.idempotency import record_put as idempotency_record_put
from datasource.items import (
    Item,
    applications_value,
    confirmation_keys,
    from_item,
    history_start,
    milestones,
    primary_key,
    status_keys,
    status_partition_key,
    to_item,
)
from datasource.table import PK
from datasource.transactions import CONDITION_FAILED_REASON, CancellationReason, run_transaction
from domain import validation
from domain.enums import PaymentStatus
from domain.errors import Conflict, NotFound
from domain.history import PaymentEvent
from domain.idempotency import IdempotencyClaim, WriteOutcome
from domain.keys import SEED_FEED, SEED_LAYOUT, FeedLayout, StatusLayout
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import TransactWriteItemTypeDef, UpdateTypeDef

__all__ = ["put_new", "update_status"]


async def put_new(
    client: DynamoDBClient,
    *,
    table_name: str,
    payment: Payment,
    event: PaymentEvent,
    backoff: Backoff,
    layout: StatusLayout = SEED_LAYOUT,
    feed: FeedLayout = SEED_FEED,
) -> WriteOutcome:
    """Store `payment` and its creation's event unless an item with its key exists; Conflict
    (status found) if one does."""
    item = to_item(payment, layout)
    put: TransactWriteItemTypeDef = {
        "Put": {
            "TableName": table_name,
            "Item": item,
            "ConditionExpression": f"attribute_not_exists({PK})",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    reasons = await run_transaction(
        client, [put, event_put(table_name, event, feed)], backoff=backoff
    )
    if reasons is not None:
        if _failed(reasons[0]):
            raise Conflict(_found_status(reasons[0]), "a payment with this id exists already")
        raise history_taken(event)
    return WriteOutcome(from_item(item))


async def update_status(
    client: DynamoDBClient,
    *,
    table_name: str,
    current: Payment,
    updated: Payment,
    event: PaymentEvent,
    backoff: Backoff,
    layout: StatusLayout = SEED_LAYOUT,
    feed: FeedLayout = SEED_FEED,
    idempotency: IdempotencyClaim | None = None,
) -> WriteOutcome:
    """Write `updated` (from `apply_transition`) and its event, guarded by `current`'s status
    and version; NotFound if the item is gone, Conflict(found status) if it moved on.

    A move that presents the payment with a confirmation id, or gives it a new one, also claims
    the id (`confirmation_claims`) in the same transaction: InvalidInput on `confirmationId` if
    another payment of the user holds it, and nothing is written. A move under an idempotency key
    writes its record in the same transaction too; if the key's record was written by this same
    move before, nothing is written and the answer is the payment as it is now, replayed (a record
    written before keys were scoped by the caller's kind is read first: `datasource.idempotency`).
    """
    _check_same_payment(current, updated)
    if idempotency is not None:
        earlier = await user_scoped_answer(
            client,
            table_name=table_name,
            claim=idempotency,
            now=updated.updated_at,
            backoff=backoff,
        )
        if earlier is not None:
            return WriteOutcome(earlier, replayed=True)
    transaction: list[TransactWriteItemTypeDef] = [
        {"Update": _move_update(table_name, current, updated, layout)},
        event_put(table_name, event, feed),
    ]
    if idempotency is not None:
        transaction.append(idempotency_record_put(table_name, idempotency, updated))
    if _claims_confirmation(current, updated):
        assert updated.confirmation_id is not None
        claim = confirmation_claims.claim_update(
            table_name, updated, confirmation_id=updated.confirmation_id
        )
        transaction.append({"Update": claim})
    reasons = await run_transaction(client, transaction, backoff=backoff)
    if reasons is None:
        return WriteOutcome(from_item(to_item(updated)))
    move_reason, event_reason = reasons[:2]
    if idempotency is not None and _failed(reasons[2]):
        # The key was used before: by this very move (its answer lost), or by another request.
        record = reasons[2].get("Item")
        if record is None:
            # No ALL_OLD from this backend: the workflow reads the record of a refused move.
            raise Conflict(current.status, "the idempotency key is in use", payment=current)
        check_same_request(idempotency, record)
        if not _failed(move_reason):
            return WriteOutcome(current, replayed=True)
        found = move_reason.get("Item")
        if found is None:
            raise NotFound()
        return WriteOutcome(from_item(found), replayed=True)
    if _failed(move_reason):
        raise _refusal(move_reason)
    if _failed(event_reason):
        raise history_taken(event)
    raise confirmation_claims.taken()


def _failed(reason: CancellationReason) -> bool:
    return reason.get("Code") == CONDITION_FAILED_REASON


def _move_update(
    table_name: str, current: Payment, updated: Payment, layout: StatusLayout
) -> UpdateTypeDef:
    """The UpdateItem of a move: every attribute a move may change, if the item is unchanged.

    A refusal carries the stored item (`ALL_OLD`), which says why: gone, or moved on. GSI2's
    partition key is written too: a move puts the payment in its shard of the layout written
    now, so a reshard under way has one payment fewer to move.
    """
    set_values: Item = {
        "loc_status": {"S": updated.status.value},
        **status_keys(updated),
        **status_partition_key(updated, layout),
        "loc_payment_attempts": {"N": str(updated.attempts)},
        "loc_applications": applications_value(updated.applications),
        "loc_update_reason": {"S": updated.update_reason},
        "loc_last_updated": {"S": validation.format_timestamp(updated.updated_at)},
        "loc_version": {"N": str(updated.version)},
    }
    if updated.confirmation_id is not None:
        set_values["loc_confirmation_id"] = {"S": updated.confirmation_id}
        set_values.update(confirmation_keys(updated))
    if updated.return_code is not None:
        set_values["loc_return_code"] = {"S": updated.return_code}
    set_values.update(milestones(updated))
    set_values.update(history_start(updated))
    # Placeholders for every name too, so no attribute can ever collide with a reserved word.
    names = {f"#a{index}": name for index, name in enumerate(set_values)}
    values = {f":a{index}": value for index, value in enumerate(set_values.values())}
    assignments = ", ".join(f"#a{index} = :a{index}" for index in range(len(set_values)))
    return {
        "TableName": table_name,
        "Key": primary_key(current),
        "UpdateExpression": f"SET {assignments}",
        "ConditionExpression": "#status = :current_status AND #version = :current_version",
        "ExpressionAttributeNames": names | {"#status": "loc_status", "#version": "loc_version"},
        "ExpressionAttributeValues": values
        | {
            ":current_status": {"S": current.status.value},
            ":current_version": {"N": str(current.version)},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _claims_confirmation(current: Payment, updated: Payment) -> bool:
    """A presentment carrying a confirmation id, or a move that sets a new one, claims it."""
    if updated.confirmation_id is None:
        return False
    presented = updated.attempts > current.attempts
    return presented or updated.confirmation_id != current.confirmation_id


def _found_status(reason: CancellationReason) -> PaymentStatus | None:
    """The status of the payment a refused write found (its `ALL_OLD` item), None if absent."""
    old_item = reason.get("Item")
    return None if old_item is None else PaymentStatus(old_item["loc_status"]["S"])


def _refusal(reason: CancellationReason) -> NotFound | Conflict:
    """What a refused move answers: the payment is gone, or another writer moved it."""
    old_item = reason.get("Item")
    if old_item is None:
        return NotFound()
    found = from_item(old_item)
    return Conflict(found.status, payment=found)


def _check_same_payment(current: Payment, updated: Payment) -> None:
    same_key = (current.user_id, current.loan_id, current.payment_id) == (
        updated.user_id,
        updated.loan_id,
        updated.payment_id,
    )
    # Programming errors, not user input: a transition never renames a payment or skips a version.
    if not same_key:
        raise ValueError("a transition must keep the payment's user, loan and payment id")
    if updated.version != current.version + 1:
        raise ValueError("a transition must raise the version by exactly one")
