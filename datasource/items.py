"""Payment <-> DynamoDB item, in the low-level attribute-value format, with SPEC §3's names.

Written by hand rather than through boto3's TypeSerializer: every attribute and its type is
visible here, numbers come back as ``int`` (never ``Decimal``), and nothing is inferred.

Beyond SPEC §3 the item carries ``loc_version`` (N, +1 per write; conditional writes check it),
``loc_return_code`` (S, the ACH return code, absent until one is recorded), and
``loc_first_presented_date`` / ``loc_completed_date`` (S, RFC 3339, absent until they happen),
from which the ACH return windows run, and ``loc_history_from`` (N, the first version whose write
stored an event in the payment's history: 1 for payments made since history exists, absent on
older ones until their next move).
Optional attributes are absent, never null: GSI3 is sparse because ``GSI3PK``/``GSI3SK`` only
exist once a confirmation id does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from datasource.table import GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK, PK, SK
from domain import keys
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import Application, Payment, PaymentRef
from domain.validation import format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import AttributeValueTypeDef

# A DynamoDB item or key: attribute name -> {"S": ...} / {"N": ...} / {"L": ...} / {"M": ...}.
# Quoted: the stub package is for the type checker only.
Item: TypeAlias = dict[str, "AttributeValueTypeDef"]


def primary_key(ref: PaymentRef | Payment) -> Item:
    return {
        PK: {"S": keys.user_partition(ref.user_id)},
        SK: {"S": keys.payment_sort_key(ref.loan_id, ref.payment_id)},
    }


def status_keys(payment: Payment) -> Item:
    """The GSI1/GSI2 sort keys, which a status change rewrites."""
    return {
        GSI1SK: {
            "S": keys.loan_status_sort_key(payment.loan_id, payment.status, payment.payment_id)
        },
        GSI2SK: {"S": keys.status_sort_key(payment.status, payment.payment_id)},
    }


def confirmation_keys(payment: Payment) -> Item:
    """The GSI3 keys, or nothing while the payment has no confirmation id (sparse index)."""
    if payment.confirmation_id is None:
        return {}
    return {
        GSI3PK: {"S": keys.user_partition(payment.user_id)},
        GSI3SK: {"S": keys.confirmation_sort_key(payment.confirmation_id)},
    }


def status_partition_key(payment: Payment, layout: keys.StatusLayout) -> Item:
    """GSI2's partition key: `PAYMENT`, or the payment's shard when GSI2 is sharded."""
    return {GSI2PK: {"S": layout.partition(payment.payment_id)}}


def to_item(payment: Payment, layout: keys.StatusLayout = keys.SEED_LAYOUT) -> Item:
    item: Item = {
        **primary_key(payment),
        GSI1PK: {"S": keys.user_partition(payment.user_id)},
        **status_partition_key(payment, layout),
        **status_keys(payment),
        **confirmation_keys(payment),
        "loc_user_id": {"S": payment.user_id},
        "loc_loan_id": {"S": payment.loan_id},
        "loc_payment_id": {"S": payment.payment_id},
        "loc_amount": _number(payment.amount_cents),
        "loc_status": {"S": payment.status.value},
        "loc_payment_method": {"S": payment.method.value},
        "loc_process": {"S": payment.process.value},
        "loc_payment_attempts": _number(payment.attempts),
        "loc_applications": applications_value(payment.applications),
        "loc_update_reason": {"S": payment.update_reason},
        "loc_created_date": {"S": format_timestamp(payment.created_at)},
        "loc_last_updated": {"S": format_timestamp(payment.updated_at)},
        "loc_version": _number(payment.version),
    }
    optional = {
        "loc_confirmation_id": payment.confirmation_id,
        "loc_account_last_four": payment.account_last_four,
        "loc_intended_installment_id": payment.intended_installment_id,
        "loc_return_code": payment.return_code,
    }
    item.update({name: {"S": value} for name, value in optional.items() if value is not None})
    item.update(milestones(payment))
    item.update(history_start(payment))
    return item


def history_start(payment: Payment) -> Item:
    """``loc_history_from``, once the payment's history has begun."""
    if payment.history_from is None:
        return {}
    return {"loc_history_from": _number(payment.history_from)}


def milestones(payment: Payment) -> Item:
    """The first presentment and completion times, once they happened."""
    moments = {
        "loc_first_presented_date": payment.first_presented_at,
        "loc_completed_date": payment.completed_at,
    }
    return {name: {"S": format_timestamp(moment)} for name, moment in moments.items() if moment}


def applications_value(applications: tuple[Application, ...]) -> AttributeValueTypeDef:
    return {
        "L": [
            {
                "M": {
                    "payment_id": {"S": application.payment_id},
                    "installment_id": {"S": application.installment_id},
                    "amount": _number(application.amount_cents),
                    "payment_date": {"S": format_timestamp(application.payment_date)},
                }
            }
            for application in applications
        ]
    }


# Enum members by stored value: a dict lookup, where calling the enum walks its machinery.
_STATUSES = {status.value: status for status in PaymentStatus}
_METHODS = {method.value: method for method in PaymentMethod}
_PROCESSES = {process.value: process for process in PaymentProcess}


def from_item(item: Item) -> Payment:
    """The payment an item holds, in one pass over its attributes (a list page maps a hundred)."""
    try:
        status = _STATUSES[item["loc_status"]["S"]]
        method = _METHODS[item["loc_payment_method"]["S"]]
        process = _PROCESSES[item["loc_process"]["S"]]
    except KeyError as missing:
        raise ValueError(f"not a stored payment: {missing}") from None
    get = item.get
    confirmation = get("loc_confirmation_id")
    last_four = get("loc_account_last_four")
    installment = get("loc_intended_installment_id")
    return_code = get("loc_return_code")
    first_presented = get("loc_first_presented_date")
    completed = get("loc_completed_date")
    history_from = get("loc_history_from")
    return Payment(
        user_id=item["loc_user_id"]["S"],
        loan_id=item["loc_loan_id"]["S"],
        payment_id=item["loc_payment_id"]["S"],
        # Our numbers are whole cents and counters, written by `_number`; int() refuses the rest.
        amount_cents=int(item["loc_amount"]["N"]),
        status=status,
        method=method,
        process=process,
        attempts=int(item["loc_payment_attempts"]["N"]),
        update_reason=item["loc_update_reason"]["S"],
        created_at=parse_timestamp("loc_created_date", item["loc_created_date"]["S"]),
        updated_at=parse_timestamp("loc_last_updated", item["loc_last_updated"]["S"]),
        version=int(item["loc_version"]["N"]),
        confirmation_id=None if confirmation is None else confirmation["S"],
        account_last_four=None if last_four is None else last_four["S"],
        intended_installment_id=None if installment is None else installment["S"],
        applications=tuple(
            _application(value["M"]) for value in item.get("loc_applications", {}).get("L", ())
        ),
        return_code=None if return_code is None else return_code["S"],
        first_presented_at=(
            None
            if first_presented is None
            else parse_timestamp("loc_first_presented_date", first_presented["S"])
        ),
        completed_at=(
            None if completed is None else parse_timestamp("loc_completed_date", completed["S"])
        ),
        history_from=None if history_from is None else int(history_from["N"]),
    )


def _application(value: Mapping[str, Any]) -> Application:
    return Application(
        payment_id=value["payment_id"]["S"],
        installment_id=value["installment_id"]["S"],
        amount_cents=int(value["amount"]["N"]),
        payment_date=parse_timestamp("payment_date", value["payment_date"]["S"]),
    )


def _number(value: int) -> AttributeValueTypeDef:
    return {"N": str(value)}
