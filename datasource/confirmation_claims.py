"""Claims of confirmation ids: a confirmation id names one payment of a user.

    PK = USER#<user_id>, SK = CONFIRMATION#<confirmation_id>
    loc_user_id, loc_loan_id, loc_payment_id   the payment that holds the id
    loc_confirmation_id                        the id itself
    loc_created_date                           when the payment first took it (RFC 3339)

No GSI attributes, and a sort key that no payment prefix matches: no access pattern sees a claim.
A claim is written in the same transaction as the move that takes the id, on the condition that
it is new or already this payment's; so of two payments racing for one id exactly one wins, and a
payment presented again with its own id keeps it. A claim is never released: an id that named a
payment once does not name another later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datasource.items import Item
from datasource.table import PK, SK
from domain import keys
from domain.errors import InvalidInput
from domain.payment import Payment
from domain.validation import format_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import UpdateTypeDef

__all__ = ["claim_key", "claim_update", "taken"]


def claim_key(user_id: str, confirmation_id: str) -> Item:
    return {
        PK: {"S": keys.user_partition(user_id)},
        SK: {"S": keys.confirmation_sort_key(confirmation_id)},
    }


def claim_update(table_name: str, payment: Payment, *, confirmation_id: str) -> UpdateTypeDef:
    """The transaction's write that claims `confirmation_id` for `payment`, or fails its check."""
    return {
        "TableName": table_name,
        "Key": claim_key(payment.user_id, confirmation_id),
        "UpdateExpression": (
            "SET loc_user_id = :user, loc_loan_id = :loan, loc_payment_id = :payment, "
            "loc_confirmation_id = :confirmation, "
            "loc_created_date = if_not_exists(loc_created_date, :now)"
        ),
        "ConditionExpression": f"attribute_not_exists({PK}) OR loc_payment_id = :payment",
        "ExpressionAttributeValues": {
            ":user": {"S": payment.user_id},
            ":loan": {"S": payment.loan_id},
            ":payment": {"S": payment.payment_id},
            ":confirmation": {"S": confirmation_id},
            ":now": {"S": format_timestamp(payment.updated_at)},
        },
    }


def taken() -> InvalidInput:
    return InvalidInput("confirmationId", "already names another payment of this user")
