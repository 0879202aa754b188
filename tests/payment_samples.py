"""Payments for tests, built directly in any status (the store writes what it is given)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from uuid_utils.compat import uuid7

from datasource import PaymentStore
from domain.audit import Actor, ActorKind
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.history import event_of
from domain.idempotency import IdempotencyClaim
from domain.payment import Application, Payment, PaymentRef
from domain.transitions import RULES, Requirement, Rule, TransitionRequest

# Millisecond precision: what the item stores, so a payment survives a round trip unchanged.
NOW = datetime(2026, 3, 2, 15, 30, 0, 123000, tzinfo=UTC)
LATER = datetime(2026, 3, 2, 16, 45, 10, 456000, tzinfo=UTC)


def sample_payment(
    *,
    user_id: str = "alice",
    loan_id: str = "loan-1",
    status: PaymentStatus = PaymentStatus.PENDING,
    method: PaymentMethod = PaymentMethod.ACH,
    **changes: Any,
) -> Payment:
    payment = Payment(
        user_id=user_id,
        loan_id=loan_id,
        payment_id=str(uuid7()),
        amount_cents=12_345,
        status=status,
        method=method,
        process=PaymentProcess.MANUAL,
        attempts=0,
        update_reason="customer asked",
        created_at=NOW,
        updated_at=NOW,
        account_last_four="6789",
        intended_installment_id="inst-1",
    )
    return dataclasses.replace(payment, **changes)


def full_payment(**changes: Any) -> Payment:
    """A payment with every optional attribute set."""
    payment = sample_payment(status=PaymentStatus.COMPLETED, attempts=1, version=3)
    application = Application(payment.payment_id, "inst-1", 12_000, LATER)
    return dataclasses.replace(
        payment,
        confirmation_id="conf-1",
        return_code="R01",
        applications=(application, Application(payment.payment_id, "inst-2", 345, LATER)),
        updated_at=LATER,
        **changes,
    )


def ref_of(payment: Payment) -> PaymentRef:
    return payment.ref


def request_for(rule: Rule, **changes: Any) -> TransitionRequest:
    """A request that satisfies everything `rule` requires, and nothing more."""
    request = TransitionRequest(
        target=rule.target,
        reason=f"moved to {rule.target.value}",
        confirmation_id="conf-new" if Requirement.CONFIRMATION_ID in rule.requires else None,
        # R01 is retryable, so it suits every move that takes a return code.
        return_code="R01" if Requirement.RETURN_CODE in rule.requires else None,
    )
    return dataclasses.replace(request, **changes)


def payment_in(status: PaymentStatus, method: PaymentMethod, **changes: Any) -> Payment:
    """A payment as it would be when it reached `status`: presented once (at NOW) unless
    PENDING, and completed at NOW if COMPLETED."""
    presented = status is not PaymentStatus.PENDING
    defaults: dict[str, Any] = {
        "attempts": 1 if presented else 0,
        "confirmation_id": "conf-old" if presented else None,
        "version": 2 if presented else 1,
        "first_presented_at": NOW if presented else None,
        "completed_at": NOW if status is PaymentStatus.COMPLETED else None,
    }
    return sample_payment(status=status, method=method, **(defaults | changes))


ALLOWED_MOVES = [(rule, method) for rule in RULES for method in sorted(rule.methods)]


# Who the store-level tests write as; the API's writes name their caller.
TEST_ACTOR = Actor(ActorKind.SERVICE, "store-tests", "test-request")


async def stored_new(
    store: PaymentStore, payment: Payment, *, idempotency: IdempotencyClaim | None = None
) -> Payment:
    """`store.create` with the creation's event, as the workflow writes it."""
    created = await store.create(
        payment, event=event_of(None, payment, TEST_ACTOR), idempotency=idempotency
    )
    return created.payment


async def stored_move(store: PaymentStore, current: Payment, updated: Payment) -> Payment:
    """`store.transition` with the move's event, as the workflow writes it."""
    moved = await store.transition(current, updated, event=event_of(current, updated, TEST_ACTOR))
    return moved.payment
