"""The one workflow of every payment write: the API's mutations, the collection job and the
demonstration data all write through these two functions.

A write is: the domain's rule (`new_payment` made the payment; `apply_transition` moves it), its
event (`event_of`), the store's conditional write of both in one transaction, and the audit log
line. A new side effect of a write is added here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from datasource import PaymentStore
from domain.audit import Actor, audit_write
from domain.history import event_of
from domain.idempotency import IdempotencyClaim
from domain.payment import Payment
from domain.transitions import TransitionRequest, apply_transition


@dataclass(frozen=True, slots=True)
class Created:
    """The payment as stored, and whether this call wrote it (False: an idempotent replay)."""

    payment: Payment
    written: bool


async def create_payment(
    store: PaymentStore,
    payment: Payment,
    *,
    actor: Actor,
    idempotency: IdempotencyClaim | None = None,
) -> Created:
    """Store a new payment (from `new_payment`); with a claim, a replay answers the first one."""
    stored = await store.create(
        payment, event=event_of(None, payment, actor), idempotency=idempotency
    )
    written = stored.payment_id == payment.payment_id
    if written:
        audit_write(None, stored, actor)
    return Created(stored, written)


async def move_payment(
    store: PaymentStore,
    current: Payment,
    request: TransitionRequest,
    *,
    actor: Actor,
    clock: Callable[[], datetime],
    max_attempts: int,
) -> Payment:
    """Move `current` as `request` asks, if the transition table allows it and nobody changed
    the payment since `current` was read; the payment as stored after the move."""
    updated = apply_transition(current, request, max_attempts=max_attempts, now=clock())
    saved = await store.transition(current, updated, event=event_of(current, updated, actor))
    audit_write(current, saved, actor)
    return saved
