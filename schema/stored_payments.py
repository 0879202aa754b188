"""The fields of Payment that a listed payment's item answers itself (`engine.stored`): a list
read with a projection hands the plan `ProjectedPayment`s, and a page whose selection these
fields (and `__typename`) make up is answered from the items, no field of any payment
converted and no resolver called. Each is a field of the domain's Payment served as it is
(its GraphQL name is the field's, in camel case), read by the conversion the payment itself
would use, so the item answers what the payment would; a timestamp is answered with its stored
text once checked (what `DateTime` prints of the instant it names), and `id` is made from the
item's three ids as the payment's resolver makes it."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from datasource import ProjectedPayment, stored_attribute
from domain.payment import PaymentRef
from domain.validation import timestamp_text
from engine import StoredField, StoredSource
from resolvers.node_ids import payment_node_id

__all__ = ["payment_sources"]

# The GraphQL fields of Payment that are the domain's fields as they are (`schema.types`).
_SERVED_AS_IS = (
    "payment_id",
    "user_id",
    "loan_id",
    "amount_cents",
    "status",
    "method",
    "process",
    "confirmation_id",
    "account_last_four",
    "intended_installment_id",
    "attempts",
    "applications",
    "update_reason",
    "return_code",
    "version",
    "created_at",
    "updated_at",
    "first_presented_at",
    "completed_at",
)
_TIMESTAMPS = frozenset({"created_at", "updated_at", "first_presented_at", "completed_at"})


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _field(name: str) -> StoredField:
    attribute, decode, absent = stored_attribute(name)
    if name in _TIMESTAMPS:
        return StoredField(attribute, _printed(attribute), absent, printed=True)
    return StoredField(attribute, decode, absent)


def _printed(attribute: str) -> Callable[[Any], str]:
    return lambda value: timestamp_text(attribute, value["S"])


def _node_id(item: Any) -> str:
    """`Payment.id` (`schema.types`): the node id of the payment's ref."""
    ids = (stored_attribute(name)[0] for name in ("user_id", "loan_id", "payment_id"))
    return payment_node_id(PaymentRef(*(item[attribute]["S"] for attribute in ids)))


def payment_sources() -> dict[str, StoredSource]:
    """The compiled plan's stored sources (`engine.compile_operation(sources=)`)."""
    fields = {_camel(name): _field(name) for name in _SERVED_AS_IS}
    fields["id"] = StoredField(None, _node_id)
    return {"Payment": StoredSource(ProjectedPayment, attrgetter("item"), fields)}
