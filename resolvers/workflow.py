"""The one workflow of every payment write: the API's mutations, the collection job and the
demonstration data all write through these two functions.

A write is: the domain's rule (`new_payment` made the payment; `apply_transition` moves it), its
event (`event_of`), the store's conditional write of both in one transaction, and the audit log
line. A new side effect of a write is added here and
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from datasource import PaymentStore
from domain.audit import Actor, audit_write
from domain.errors import Conflict, InvalidInput, InvalidTransition
from domain.history import event_of
from domain.idempotency import IdempotencyClaim, WriteOutcome
from domain.payment import Payment
from domain.transitions import TransitionRequest, apply_transition

__all__ = ["create_payment", "move_payment"]


async def create_payment(
    store: PaymentStore,
    payment: Payment,
    *,
    actor: Actor,
    idempotency: IdempotencyClaim | None = None,
) -> WriteOutcome:
    """Store a new payment (from `new_payment`); with a claim, a replay answers the first one."""
    outcome = await store.create(
        payment, event=event_of(None, payment, actor), idempotency=idempotency
    )
    if not outcome.replayed:
        audit_write(None, outcome.payment, actor)
    return outcome


async def move_payment(
    store: PaymentStore,
    current: Payment,
    request: TransitionRequest,
    *,
    actor: Actor,
    clock: Callable[[], datetime],
    max_attempts: int,
    idempotency: IdempotencyClaim | None = None,
) -> WriteOutcome:
    """Move `current` as `request` asks, if the transition table allows it and nobody changed
    the payment since `current` was read; the payment as stored after the move.

    Under an idempotency key, the same move sent again after it was written (its answer lost)
    writes nothing and answers the payment as it is now, replayed: whether the transaction finds
    the key's record, or the move is refused first because it already happened (a presentment
    is no longer allowed from the status it left)."""
    now = clock()
    try:
        updated = apply_transition(current, request, max_attempts=max_attempts, now=now)
        outcome = await store.transition(
            current, updated, event=event_of(current, updated, actor), idempotency=idempotency
        )
    except (InvalidTransition, InvalidInput, Conflict):
        if idempotency is None:
            raise
        replayed = await store.replayed_move(idempotency, current.ref, now=now)
        if replayed is None:
            raise
        return WriteOutcome(replayed, replayed=True)
    if not outcome.replayed:
        audit_write(current, outcome.payment, actor)
    return outcome
