"""The Payment entity, its applications, and the making of a new payment."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from uuid_utils.compat import uuid7

from domain import validation
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus

__all__ = ["MAX_APPLICATIONS", "Application", "LoanRef", "Payment", "PaymentRef", "new_payment"]

# The most installments one payment is applied to (a year of monthly installments): a bound on
# what a payment's `applications` answers, which its query cost counts.
MAX_APPLICATIONS = 12


@dataclass(frozen=True, slots=True)
class Application:
    """Money of one completed payment applied to one installment."""

    payment_id: str
    installment_id: str
    amount_cents: int
    payment_date: datetime


@dataclass(frozen=True, slots=True)
class Payment:
    user_id: str
    loan_id: str
    payment_id: str
    amount_cents: int
    status: PaymentStatus
    method: PaymentMethod
    process: PaymentProcess
    attempts: int
    update_reason: str
    created_at: datetime
    updated_at: datetime
    # Rises by one on every write; conditional writes check it, so a lost race is detected
    # even when the status did not change (RETRY -> RETRY).
    version: int = 1
    confirmation_id: str | None = None
    account_last_four: str | None = None
    intended_installment_id: str | None = None
    applications: tuple[Application, ...] = ()
    return_code: str | None = None
    # When the payment first went to the payments service, and when it completed: the ACH
    # re-presentment and late-return windows run from these.
    first_presented_at: datetime | None = None
    completed_at: datetime | None = None
    # The first version whose write stored an event: 1 for a payment made since payment history
    # exists, None for one written before (its history starts at its first move since, if any).
    history_from: int | None = None

    # A payment's own ids were checked when it was made (`new_payment`) or come from the table.
    @property
    def ref(self) -> PaymentRef:
        return PaymentRef(self.user_id, self.loan_id, self.payment_id)

    @property
    def loan(self) -> LoanRef:
        return LoanRef(self.user_id, self.loan_id)


@dataclass(frozen=True, slots=True)
class PaymentRef:
    """What names one payment: the table's primary key, in domain terms.

    Made from outside input by `checked` only (or by a payment, from its own ids): the store and
    the loaders take a PaymentRef as valid and check nothing again.
    """

    user_id: str
    loan_id: str
    payment_id: str

    @classmethod
    def checked(cls, user_id: str, loan_id: str, payment_id: str) -> PaymentRef:
        return cls(
            validation.identifier("userId", user_id),
            validation.identifier("loanId", loan_id),
            validation.payment_id("paymentId", payment_id),
        )


@dataclass(frozen=True, slots=True)
class LoanRef:
    """A loan of a user; the table holds no loan item, only the loan's payments.

    Made like a PaymentRef: by `checked`, or by a payment.
    """

    user_id: str
    loan_id: str

    @classmethod
    def checked(cls, user_id: str, loan_id: str) -> LoanRef:
        return cls(
            validation.identifier("userId", user_id), validation.identifier("loanId", loan_id)
        )


def new_payment(
    *,
    user_id: str,
    loan_id: str,
    amount_cents: int,
    method: PaymentMethod,
    process: PaymentProcess,
    reason: str,
    now: datetime,
    account_last_four: str | None = None,
    intended_installment_id: str | None = None,
) -> Payment:
    """A PENDING payment with a fresh version-7 UUID, so ids sort by creation time; every value
    is checked here, the one place a new payment is made, and nowhere after."""
    return Payment(
        user_id=validation.identifier("userId", user_id),
        loan_id=validation.identifier("loanId", loan_id),
        payment_id=str(uuid7()),
        amount_cents=validation.amount_cents("amountCents", amount_cents),
        status=PaymentStatus.PENDING,
        method=validation.member("method", PaymentMethod, method),
        process=validation.member("process", PaymentProcess, process),
        attempts=0,
        update_reason=validation.reason("reason", reason),
        created_at=now,
        updated_at=now,
        history_from=1,
        account_last_four=(
            None
            if account_last_four is None
            else validation.account_last_four("accountLastFour", account_last_four)
        ),
        intended_installment_id=(
            None
            if intended_installment_id is None
            else validation.identifier("intendedInstallmentId", intended_installment_id)
        ),
    )
