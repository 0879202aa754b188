"""Idempotency keys for creation, with the semantics Stripe documents for its own.

A key is scoped to the user and names one request: the same key with the same request returns
the payment the first one created; with a different request it is refused
(`IdempotencyMismatch`) and nothing is written. A key is remembered at least 24 hours.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain import validation
from domain.payment import Payment

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
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    return IdempotencyClaim(
        user_id=payment.user_id,
        key=validation.idempotency_key("idempotencyKey", key),
        fingerprint=digest,
        expires_at=payment.created_at + RETENTION,
    )
