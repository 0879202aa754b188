"""The two conditional writes: putting a new payment, and moving a payment to a new status.

Both read the outcome of a failed condition from the failure itself
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so a refused write costs no second read. A move
that takes a confirmation id is a transaction: the payment's update and the id's claim.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from datasource import confirmation_claims
from datasource.batch import Backoff
from datasource.deadline import storage_call
from datasource.errors import error_code
from datasource.items import (
    Item,
    applications_value,
    confirmation_keys,
    from_item,
    milestones,
    primary_key,
    status_keys,
    to_item,
)
from datasource.table import PK
from datasource.transactions import CONDITION_FAILED_REASON, run_transaction
from domain import validation
from domain.enums import PaymentStatus
from domain.errors import Conflict, NotFound
from domain.payment import Payment

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_dynamodb.type_defs import UpdateTypeDef

_CONDITION_FAILED = "ConditionalCheckFailedException"


async def put_new(client: DynamoDBClient, *, table_name: str, payment: Payment) -> Payment:
    """Store `payment` unless an item with its key exists; Conflict (status found) if one does."""
    item = to_item(payment)
    try:
        async with _conditional_write():
            await client.put_item(
                TableName=table_name,
                Item=item,
                ConditionExpression=f"attribute_not_exists({PK})",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
    except ConditionFailed as failure:
        raise Conflict(failure.found_status, "a payment with this id exists already") from None
    return from_item(item)


async def update_status(
    client: DynamoDBClient,
    *,
    table_name: str,
    current: Payment,
    updated: Payment,
    backoff: Backoff,
) -> Payment:
    """Write `updated` (from `apply_transition`) guarded by `current`'s status and version;
    NotFound if the item is gone, Conflict(found status) if it moved on.

    A move that presents the payment with a confirmation id, or gives it a new one, also claims
    the id (`confirmation_claims`) in the same transaction: InvalidInput on `confirmationId` if
    another payment of the user holds it, and nothing is written.
    """
    _check_same_payment(current, updated)
    move = _move_update(table_name, current, updated)
    if not _claims_confirmation(current, updated):
        try:
            async with _conditional_write():
                response = await client.update_item(**move, ReturnValues="ALL_NEW")
        except ConditionFailed as failure:
            raise failure.refusal() from None
        return from_item(response["Attributes"])
    assert updated.confirmation_id is not None
    claim = confirmation_claims.claim_update(
        table_name, updated, confirmation_id=updated.confirmation_id
    )
    reasons = await run_transaction(client, [{"Update": move}, {"Update": claim}], backoff=backoff)
    if reasons is not None:
        if reasons[0].get("Code") == CONDITION_FAILED_REASON:
            raise ConditionFailed(reasons[0].get("Item")).refusal()
        raise confirmation_claims.taken()
    return from_item(to_item(updated))


def _move_update(table_name: str, current: Payment, updated: Payment) -> UpdateTypeDef:
    """The UpdateItem of a move: every attribute a move may change, if the item is unchanged.

    A refusal carries the stored item (`ALL_OLD`), which says why: gone, or moved on.
    """
    set_values: Item = {
        "loc_status": {"S": updated.status.value},
        **status_keys(updated),
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


@asynccontextmanager
async def _conditional_write() -> AsyncIterator[None]:
    """One conditional write; its refusal raises ConditionFailed with the stored item (which the
    write asks for with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``)."""
    async with storage_call():
        try:
            yield
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            raise ConditionFailed(error.response.get("Item")) from None


class ConditionFailed(Exception):
    """A conditional write was refused; `found_status` is the stored item's, None if absent."""

    def __init__(self, old_item: Item | None) -> None:
        super().__init__("condition failed")
        self.found_status = (
            PaymentStatus(old_item["loc_status"]["S"]) if old_item is not None else None
        )

    def refusal(self) -> NotFound | Conflict:
        """What a refused move answers: the payment is gone, or another writer moved it."""
        if self.found_status is None:
            return NotFound()
        return Conflict(self.found_status)


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
