"""Payment events as items, and the page of a payment's history.

An event (`USER#<user_id>` / `HISTORY#LOAN#<loan_id>#PAYMENT#<payment_id>#V#<version>`) records
one write of a payment: the statuses before and after, when, why, who (`loc_actor_kind`,
`loc_actor_id`, the request and its trace), and the payment as the write left it less what the
event holds alike (`event_item`; `event_from_item` puts it back). It is put in the write's own
transaction on the condition that it is new (`event_put`): never overwritten. Its only index keys
are GSI4's, the events feed; no payment access pattern sees it. `history_query` pages a payment's
events, oldest first.

Every attribute, and what an event costs: docs/data-model.md#the-item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datasource.cursors import ListScope
from datasource.items import Item, from_item, to_item
from datasource.pages import PageOf, PageQuery
from datasource.table import GSI4PK, GSI4SK, PK, SK
from datasource.tracing import current_traceparent
from domain import keys
from domain.audit import ActorKind
from domain.enums import PaymentStatus
from domain.errors import PaymentsError
from domain.history import PaymentEvent
from domain.payment import Payment, PaymentRef
from domain.validation import format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb.type_defs import (
        AttributeValueTypeDef,
        TransactWriteItemTypeDef,
    )

__all__ = [
    "HistoryPage",
    "event_from_item",
    "event_item",
    "event_key_of",
    "event_put",
    "history_query",
    "history_taken",
]

HistoryPage = PageOf[PaymentEvent]

# A payment's attributes that its event holds too (by the event's name), left out of the payment
# the event carries when equal, and put back when it is read.
_HELD_BY_THE_EVENT = {
    "loc_user_id": "loc_user_id",
    "loc_loan_id": "loc_loan_id",
    "loc_payment_id": "loc_payment_id",
    "loc_version": "loc_version",
    "loc_update_reason": "loc_update_reason",
    "loc_last_updated": "loc_event_date",
}

_OPTIONAL_TEXT = {
    "loc_from_status": "from_status",
    "loc_return_code": "return_code",
    "loc_confirmation_id": "confirmation_id",
    "loc_request_id": "request_id",
    "loc_trace_parent": "trace_parent",
}


def event_key(event: PaymentEvent) -> Item:
    return event_key_of(event.ref, event.version)


def event_key_of(ref: PaymentRef, version: int) -> Item:
    return {
        PK: {"S": keys.user_partition(ref.user_id)},
        SK: {"S": keys.history_sort_key(ref.loan_id, ref.payment_id, version)},
    }


def feed_position(event: PaymentEvent) -> str:
    """The event's GSI4 sort key: its place in the events feed."""
    return keys.feed_sort_key(
        format_timestamp(event.at),
        event.loan_id,
        event.payment_id,
        event.version,
        user_id=event.user_id,
    )


def event_item(event: PaymentEvent, feed: keys.FeedLayout = keys.SEED_FEED) -> Item:
    """The event's item; its feed partition is its payment's shard in the feed's layout at its
    position."""
    position = feed_position(event)
    item: Item = {
        **event_key(event),
        GSI4PK: {"S": feed.partition(event.payment_id, position)},
        GSI4SK: {"S": position},
        "loc_user_id": {"S": event.user_id},
        "loc_loan_id": {"S": event.loan_id},
        "loc_payment_id": {"S": event.payment_id},
        "loc_version": {"N": str(event.version)},
        "loc_to_status": {"S": event.to_status.value},
        "loc_event_date": {"S": format_timestamp(event.at)},
        "loc_update_reason": {"S": event.reason},
        "loc_actor_kind": {"S": event.actor_kind.name},
        "loc_actor_id": {"S": event.actor_id},
    }
    optional = {
        "loc_from_status": None if event.from_status is None else event.from_status.value,
        "loc_return_code": event.return_code,
        "loc_confirmation_id": event.confirmation_id,
        "loc_request_id": event.request_id,
        # A new event takes the trace of the request writing it (what is current here).
        "loc_trace_parent": event.trace_parent or current_traceparent(),
    }
    item.update({name: {"S": value} for name, value in optional.items() if value is not None})
    if event.payment is not None:
        item["loc_payment"] = {"M": _payment_held(event.payment, item)}
    return item


def _payment_held(payment: Payment, event: Item) -> Item:
    """The payment's `loc_*` attributes but those the event holds with the same value (its
    ids, version, time and reason are the write's): half the size, which keeps a move's event
    under 1 KB, one write unit, where the whole payment would pass it."""
    stored = to_item(payment)
    return {
        name: value
        for name, value in stored.items()
        if name.startswith("loc_")
        and not (name in _HELD_BY_THE_EVENT and _same(name, value, event))
    }


def _same(name: str, value: AttributeValueTypeDef, event: Item) -> bool:
    return event.get(_HELD_BY_THE_EVENT[name]) == value


def event_from_item(item: Item, *, with_payment: bool = False) -> PaymentEvent:
    """The event an item holds; `with_payment`: with the payment as its write left it (None for
    an event stored before events carried it)."""
    optional = {field: item[name]["S"] for name, field in _OPTIONAL_TEXT.items() if name in item}
    from_status = optional.get("from_status")
    return PaymentEvent(
        user_id=item["loc_user_id"]["S"],
        loan_id=item["loc_loan_id"]["S"],
        payment_id=item["loc_payment_id"]["S"],
        version=int(item["loc_version"]["N"]),
        from_status=None if from_status is None else PaymentStatus(from_status),
        to_status=PaymentStatus(item["loc_to_status"]["S"]),
        at=parse_timestamp("loc_event_date", item["loc_event_date"]["S"]),
        reason=item["loc_update_reason"]["S"],
        actor_kind=ActorKind[item["loc_actor_kind"]["S"]],
        actor_id=item["loc_actor_id"]["S"],
        request_id=optional.get("request_id"),
        return_code=optional.get("return_code"),
        confirmation_id=optional.get("confirmation_id"),
        trace_parent=optional.get("trace_parent"),
        payment=_snapshot(item) if with_payment else None,
    )


def _snapshot(item: Item) -> Payment | None:
    stored = item.get("loc_payment")
    if stored is None:
        return None
    held: Item = dict(stored["M"])
    for name, source in _HELD_BY_THE_EVENT.items():
        if name not in held:
            held[name] = item[source]
    return from_item(held)


def event_put(
    table_name: str, event: PaymentEvent, feed: keys.FeedLayout = keys.SEED_FEED
) -> TransactWriteItemTypeDef:
    """The transaction's write of `event`: a new item, never one over an event already stored."""
    return {
        "Put": {
            "TableName": table_name,
            "Item": event_item(event, feed),
            "ConditionExpression": f"attribute_not_exists({PK})",
        }
    }


def history_taken(event: PaymentEvent) -> PaymentsError:
    """The payment's history holds this version already, though the payment's own condition
    held: never by our writes (a bug, or a hand-written item), so an internal error."""
    return PaymentsError(
        f"the history of payment {event.payment_id} already holds version {event.version}"
    )


def history_query(ref: PaymentRef, *, consistent: bool = False) -> PageQuery:
    """A payment's events, oldest first; its cursors are bound to the payment. `consistent`:
    a strongly consistent read, which sees every event stored before it began."""
    return PageQuery(
        scope=ListScope(None, ref.user_id, ref.loan_id, payment_id=ref.payment_id),
        partition_attribute=PK,
        partition=keys.user_partition(ref.user_id),
        sort_attribute=SK,
        sort_prefix=keys.history_prefix(ref.loan_id, ref.payment_id),
        newest_first=False,
        consistent=consistent,
    )
