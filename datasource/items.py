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

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from datasource.errors import FieldNotRead
from datasource.table import GSI1PK, GSI1SK, GSI2PK, GSI2SK, GSI3PK, GSI3SK, PK, SK
from domain import keys
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.payment import Application, Payment, PaymentRef
from domain.validation import format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import AttributeValueTypeDef

__all__ = [
    "Item",
    "ProjectedPayment",
    "applications_value",
    "confirmation_keys",
    "from_item",
    "history_start",
    "milestones",
    "primary_key",
    "projected_attributes",
    "status_keys",
    "status_partition_key",
    "stored_attribute",
    "to_item",
]

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


@dataclass(frozen=True, slots=True)
class _Attribute:
    """Where a field of Payment is in the item, and how its value is read."""

    name: str
    convert: Callable[[Any], Any]  # from the attribute's value ({"S": ...}, {"N": ...})
    required: bool = True
    absent: Any = None  # the field's value when an optional attribute is absent


def _text(value: Any) -> str:
    text: str = value["S"]
    return text


def _int(value: Any) -> int:
    # Our numbers are whole cents and counters, written by `_number`; int() refuses the rest.
    return int(value["N"])


def _timestamp(name: str) -> Callable[[Any], datetime]:
    return lambda value: parse_timestamp(name, value["S"])


def _applications(value: Any) -> tuple[Application, ...]:
    return tuple(_application(entry["M"]) for entry in value["L"])


# Each field of Payment: its attribute, read when the field is first read (`StoredPayment`).
ATTRIBUTES: dict[str, _Attribute] = {
    "user_id": _Attribute("loc_user_id", _text),
    "loan_id": _Attribute("loc_loan_id", _text),
    "payment_id": _Attribute("loc_payment_id", _text),
    "amount_cents": _Attribute("loc_amount", _int),
    "status": _Attribute("loc_status", lambda value: _STATUSES[value["S"]]),
    "method": _Attribute("loc_payment_method", lambda value: _METHODS[value["S"]]),
    "process": _Attribute("loc_process", lambda value: _PROCESSES[value["S"]]),
    "attempts": _Attribute("loc_payment_attempts", _int),
    "update_reason": _Attribute("loc_update_reason", _text),
    "created_at": _Attribute("loc_created_date", _timestamp("loc_created_date")),
    "updated_at": _Attribute("loc_last_updated", _timestamp("loc_last_updated")),
    "version": _Attribute("loc_version", _int),
    "confirmation_id": _Attribute("loc_confirmation_id", _text, required=False),
    "account_last_four": _Attribute("loc_account_last_four", _text, required=False),
    "intended_installment_id": _Attribute("loc_intended_installment_id", _text, required=False),
    "applications": _Attribute("loc_applications", _applications, required=False, absent=()),
    "return_code": _Attribute("loc_return_code", _text, required=False),
    "first_presented_at": _Attribute(
        "loc_first_presented_date", _timestamp("loc_first_presented_date"), required=False
    ),
    "completed_at": _Attribute(
        "loc_completed_date", _timestamp("loc_completed_date"), required=False
    ),
    "history_from": _Attribute("loc_history_from", _int, required=False),
}
_FIELDS = tuple(field.name for field in dataclasses.fields(Payment))
assert set(ATTRIBUTES) == set(_FIELDS), "every field of Payment has its attribute"
_REQUIRED = frozenset(attribute.name for attribute in ATTRIBUTES.values() if attribute.required)
# What names a payment: read whatever a projection asks for (`projected_attributes`).
IDENTITY = frozenset({"user_id", "loan_id", "payment_id"})


class StoredPayment(Payment):
    """A payment as its item holds it, each field converted from the item when first read and
    kept: what a lookup reads whole, and a reader may answer few fields of.

    It is a `Payment` in full: every field reads as written. It equals the `Payment` of the
    same fields; `dataclasses.replace` of it (a write's next version) makes a plain `Payment`.
    """

    __slots__ = ("_item",)
    _item: Item

    def __new__(cls, *args: Any, **kwargs: Any) -> Payment:  # type: ignore[misc]
        # Called with fields (dataclasses.replace, copies): a plain Payment of them.
        return Payment(*args, **kwargs)

    @classmethod
    def of(cls, item: Item) -> StoredPayment:
        payment = object.__new__(cls)
        for unread in _MARK_UNREAD:
            unread(payment, _UNREAD)
        _SET_ITEM(payment, item)
        return payment

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payment):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    __hash__ = Payment.__hash__


class ProjectedPayment(Payment):
    """A payment read with a projection (a list's, `projected_attributes`): nothing converted
    when it is made; each field read is converted from its `item` then and kept in the
    payment's own slot, so a reader that answers fields from the item itself (the compiled
    plan's stored source, `schema.stored_payments`) converts none. A field left out of the
    projection raises `FieldNotRead`, never a made-up value."""

    __slots__ = ("_fields", "item")
    item: Item
    _fields: frozenset[str]

    def __new__(cls, *args: Any, **kwargs: Any) -> Payment:  # type: ignore[misc]
        return Payment(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Reached only for a name not found: a field whose slot is not set yet.
        attribute = ATTRIBUTES.get(name)
        if attribute is None:
            raise AttributeError(name)
        if name not in self._fields:
            raise FieldNotRead(f"Payment.{name} was not read: its list's projection left it out")
        found = self.item.get(attribute.name)
        value = attribute.absent if found is None else attribute.convert(found)
        _SET_FIELD[name](self, value)
        return value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payment):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    __hash__ = Payment.__hash__


def _lazy_field(name: str, attribute: _Attribute) -> property:
    slot_get = Payment.__dict__[name].__get__  # the field's slot keeps the converted value
    slot_set = Payment.__dict__[name].__set__
    attribute_name, convert, absent = attribute.name, attribute.convert, attribute.absent

    def read(self: StoredPayment) -> Any:
        value = slot_get(self, Payment)
        if value is _UNREAD:
            found = self._item.get(attribute_name)
            value = absent if found is None else convert(found)
            slot_set(self, value)
        return value

    return property(read, doc=f"Payment.{name}, converted from the item when first read")


# A field not converted yet holds this (an exception per first read would cost more than the
# conversion).
_UNREAD: Any = object()
_MARK_UNREAD = tuple(Payment.__dict__[name].__set__ for name in _FIELDS)
_SET_ITEM = StoredPayment.__dict__["_item"].__set__
for _name, _attribute in ATTRIBUTES.items():
    setattr(StoredPayment, _name, _lazy_field(_name, _attribute))


_SET_FIELD = {name: Payment.__dict__[name].__set__ for name in _FIELDS}
_SET_PROJECTED_ITEM = ProjectedPayment.__dict__["item"].__set__
_SET_PROJECTED_FIELDS = ProjectedPayment.__dict__["_fields"].__set__


def from_item(item: Item, fields: frozenset[str] | None = None) -> Payment:
    """The payment an item holds: whole, each field converted as it is first read
    (`StoredPayment`); or, with `fields`, an item read with `projected_attributes(fields)`,
    those fields and the payment's ids converted as they are first read (`ProjectedPayment`)."""
    if fields is not None:
        made: ProjectedPayment = object.__new__(ProjectedPayment)
        _SET_PROJECTED_ITEM(made, item)
        _SET_PROJECTED_FIELDS(made, _with_identity(fields))
        return made
    if not _REQUIRED.issubset(item):
        missing = sorted(_REQUIRED.difference(item))
        raise ValueError(f"not a stored payment: no {', '.join(missing)}")
    return StoredPayment.of(item)


@functools.lru_cache(maxsize=256)
def _with_identity(fields: frozenset[str]) -> frozenset[str]:
    return fields | IDENTITY


def projected_attributes(fields: frozenset[str]) -> tuple[str, ...]:
    """The attributes of an item that hold `fields` (and the payment's ids), in a stable order:
    a ProjectionExpression's names, with the keys the reader needs besides."""
    wanted = fields | IDENTITY
    return tuple(ATTRIBUTES[name].name for name in _FIELDS if name in wanted)


def stored_attribute(field: str) -> tuple[str, Callable[[Any], Any], Any]:
    """Where a field of Payment is in its item: the attribute, how the field's value is read
    from what the attribute stores, and the field's value when the item lacks it."""
    attribute = ATTRIBUTES[field]
    return attribute.name, attribute.convert, attribute.absent


def _application(value: Mapping[str, Any]) -> Application:
    return Application(
        payment_id=value["payment_id"]["S"],
        installment_id=value["installment_id"]["S"],
        amount_cents=int(value["amount"]["N"]),
        payment_date=parse_timestamp("payment_date", value["payment_date"]["S"]),
    )


def _number(value: int) -> AttributeValueTypeDef:
    return {"N": str(value)}
