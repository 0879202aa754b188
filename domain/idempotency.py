"""Idempotency keys for every mutation, with the semantics Stripe documents for its own.

A key is scoped to the user and the kind of caller (a customer, or a service: the service's own
jobs count as one) and names one request that wrote: the same key with the same request answers
what the first one wrote (the payment it created, or the payment it moved, as it is now) and
writes nothing; with a different request it is refused (`IdempotencyMismatch`) and nothing is
written. A key is remembered at least 24 hours. Only a request that wrote leaves a record: a
refused request is decided afresh when it is sent again.

The kind, not the client id (which rotates), so that a customer cannot claim on their own account
a key the service will send, such as autopay's (issue 55), nor the service a customer's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from domain import validation
from domain.audit import ActorKind
from domain.payment import Payment, PaymentRef

if TYPE_CHECKING:
    from domain.transitions import TransitionRequest

__all__ = ["CallerKind", "IdempotencyClaim", "WriteOutcome", "claim_for", "move_claim"]

RETENTION = timedelta(hours=24)


class CallerKind(StrEnum):
    """Whose keys a key is among, besides the user's: the kinds of caller (SPEC §7)."""

    CUSTOMER = "CUSTOMER"
    SERVICE = "SERVICE"

    @classmethod
    def of(cls, actor: ActorKind) -> CallerKind:
        """The kind whose keys a writer sends: the service's jobs send the service's."""
        return cls.CUSTOMER if actor is ActorKind.CUSTOMER else cls.SERVICE


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    user_id: str
    caller: CallerKind
    key: str
    # A digest of everything the caller asked for, to tell a retry from a different request.
    fingerprint: str
    expires_at: datetime


def claim_for(key: str, payment: Payment, *, caller: CallerKind) -> IdempotencyClaim:
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
    return _claim(key, payment.user_id, caller, request, now=payment.created_at)


def move_claim(
    key: str, ref: PaymentRef, request: TransitionRequest, *, caller: CallerKind, now: datetime
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
    return _claim(key, ref.user_id, caller, asked, now=now)


def _claim(
    key: str, user_id: str, caller: CallerKind, request: dict[str, Any], *, now: datetime
) -> IdempotencyClaim:
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    return IdempotencyClaim(
        user_id=user_id,
        caller=caller,
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
