"""A payment's history: one immutable event per write, stored with the write itself.

An event says what one write did: the version it produced, the status it moved from (none for the
creation) and to, when, why, the return code and confirmation id when this write set them, who
wrote (the actor's kind and id) and in which request. `event_of` is the only maker of an event,
from the payment before and after the write, so an event always agrees with the payment it
describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from domain.audit import Actor, ActorKind
from domain.enums import PaymentStatus
from domain.payment import Payment, PaymentRef

__all__ = ["PaymentEvent", "event_of"]


@dataclass(frozen=True, slots=True)
class PaymentEvent:
    user_id: str
    loan_id: str
    payment_id: str
    version: int
    from_status: PaymentStatus | None
    to_status: PaymentStatus
    at: datetime
    reason: str
    actor_kind: ActorKind
    actor_id: str
    request_id: str | None = None
    return_code: str | None = None
    confirmation_id: str | None = None
    # The W3C `traceparent` of the request that wrote it, as stored (None until it is stored, and
    # for writes that were not traced): what a live update's trace links back to.
    trace_parent: str | None = None
    # The payment as this write left it, when known: the write's own, or read with the event from
    # the events feed (what a webhook carries). Not part of what the event is.
    payment: Payment | None = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> PaymentRef:
        return PaymentRef(self.user_id, self.loan_id, self.payment_id)


def event_of(before: Payment | None, after: Payment, actor: Actor) -> PaymentEvent:
    """The event of the write that turned `before` (None: nothing, a creation) into `after`."""
    return PaymentEvent(
        user_id=after.user_id,
        loan_id=after.loan_id,
        payment_id=after.payment_id,
        version=after.version,
        from_status=None if before is None else before.status,
        to_status=after.status,
        at=after.updated_at,
        reason=after.update_reason,
        actor_kind=actor.kind,
        actor_id=actor.id,
        request_id=actor.request_id,
        return_code=_set_by_write(before, after, "return_code"),
        confirmation_id=_set_by_write(before, after, "confirmation_id"),
        payment=after,
    )


def _set_by_write(before: Payment | None, after: Payment, name: str) -> str | None:
    # A value the payment already carried is not news; a value this write gave it is.
    value: str | None = getattr(after, name)
    return None if before is not None and getattr(before, name) == value else value
