"""Idempotency keys for every mutation, with the semantics Stripe documents for its own.

A key is scoped to the user and names one request that wrote: the same key with the same request
answers what the first one wrote (the payment it created, or the payment it moved, as it is now)
and writes nothing; with a different request it is refused (`IdempotencyMismatch`) and nothing is
written. A key is remembered at least 24 hours. Only a request that wrote leaves a record: a
refused request is decided afresh when it is sent again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain import validation
from domain.payment import Payment, PaymentRef

if TYPE_CHECKING:
    from domain.transitions import TransitionRequest

RETENTION = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    user_id: str
    key: str
    # A digest of everything the caller asked for, to tell a retry from a different request.
    fingerprint: str
    expires_at: datetime


def claim_for(key: str, payment: Payment) -> IdempotencyClaim:
    """The claim a new payment makes on its key; the payment's id and times are not the request."""
    request = {
        "userId": payment.user_id,
        "loanId": payment.loan_id,
        "amountCents": payment.amount_cents,
        "method": payment.method.value,
        "process": payment.process.value,
        "accountLastFour": payment.account_last_four,
        "intendedInstallmentId": payment.intended_installment_id,
        "reason": payment.update_reason,
    }
    return _claim(key, payment.user_id, request, now=payment.created_at)


def move_claim(
    key: str, ref: PaymentRef, request: TransitionRequest, *, now: datetime
) -> IdempotencyClaim:
    """The claim a move makes on its key: the payment it names and everything it asks for.

    The target status is part of it, so one key cannot be a submit and then a completion."""
    applications = None
    if request.applications is not None:
        applications = [[a.installment_id, a.amount_cents] for a in request.applications]
    asked = {
        "move": request.target.value,
        "userId": ref.user_id,
        "loanId": ref.loan_id,
        "paymentId": ref.payment_id,
        "reason": request.reason,
        "confirmationId": request.confirmation_id,
        "applications": applications,
        "returnCode": request.return_code,
        "expectedVersion": request.expected_version,
    }
    return _claim(key, ref.user_id, asked, now=now)


def _claim(key: str, user_id: str, request: dict[str, Any], *, now: datetime) -> IdempotencyClaim:
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    return IdempotencyClaim(
        user_id=user_id,
        key=validation.idempotency_key("idempotencyKey", key),
        fingerprint=digest,
        expires_at=now + RETENTION,
    )


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What a write answers: the payment as stored, and whether an earlier request with the same
    idempotency key had written it (`replayed`: nothing was written now)."""

    payment: Payment
    replayed: bool = False
