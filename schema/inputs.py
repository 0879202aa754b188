"""Mutation inputs. Every transition names the payment and says why."""

from __future__ import annotations

import strawberry

from domain.transitions import ApplicationRequest
from schema.descriptions import AMOUNT, CENTS, INSTALLMENT_ID, LOAN_ID, OWNER, PAYMENT_ID
from schema.enums import PaymentMethod, PaymentProcess

__all__ = [
    "ApplicationInput",
    "ChargeBackPaymentInput",
    "CompletePaymentInput",
    "CreatePaymentInput",
    "FailPaymentInput",
    "ReturnPaymentInput",
    "SchedulePaymentRetryInput",
    "SkipPaymentInput",
    "SubmitPaymentInput",
    "TransitionInput",
]


@strawberry.input(
    description=(
        "A new payment, PENDING until presented. A customer creates MANUAL payments on its own "
        "loans; a service creates any, for any user."
    )
)
class CreatePaymentInput:
    loan_id: strawberry.ID = strawberry.field(description=LOAN_ID)
    amount_cents: int = strawberry.field(description=AMOUNT)
    method: PaymentMethod = strawberry.field(
        description="How the money moves: ACH or PINless debit card."
    )
    user_id: strawberry.ID | None = strawberry.field(default=None, description=OWNER)
    process: PaymentProcess = strawberry.field(
        default=PaymentProcess.MANUAL,
        description="What started it: MANUAL for a customer; AUTO and RETRY are for services.",
    )
    account_last_four: str | None = strawberry.field(
        default=None,
        description=(
            "The last four digits of the paying account or card: exactly four digits, never "
            "more of the number."
        ),
    )
    intended_installment_id: strawberry.ID | None = strawberry.field(
        default=None,
        description=(
            "The installment it is meant for: completed without `applications`, it pays this one."
        ),
    )
    reason: str | None = strawberry.field(
        default=None, description='Stored as the update reason; "payment created" when omitted.'
    )
    idempotency_key: str | None = strawberry.field(
        default=None,
        description=(
            "At most 255 characters, scoped to the user, remembered 24 hours: a retry with the "
            "same key and input returns the same payment; a different input is refused."
        ),
    )


@strawberry.input(description="A part of the payment's amount, for one installment.")
class ApplicationInput:
    installment_id: strawberry.ID = strawberry.field(description=INSTALLMENT_ID)
    amount_cents: int = strawberry.field(
        description=(
            f"The part applied to the installment, {CENTS}; the parts add up to the payment's "
            "amount exactly."
        )
    )

    def to_request(self) -> ApplicationRequest:
        return ApplicationRequest(self.installment_id, self.amount_cents)


@strawberry.input(description="Names one payment and says why it moves.")
class TransitionInput:
    user_id: strawberry.ID = strawberry.field(
        description="The user whose payment it is (moves are made by services, which name it)."
    )
    loan_id: strawberry.ID = strawberry.field(description=LOAN_ID)
    payment_id: strawberry.ID = strawberry.field(description=PAYMENT_ID)
    reason: str = strawberry.field(
        description=(
            "Why the move is made, stored as the payment's `updateReason` and in its history."
        )
    )
    idempotency_key: str | None = strawberry.field(
        default=None,
        description=(
            "At most 255 characters, scoped to the user, remembered 24 hours: the same move sent "
            "again with the same key writes nothing and answers the payment as it is now "
            "(`replayed: true`); the key with another input is refused (IDEMPOTENCY_MISMATCH)."
        ),
    )
    expected_version: int | None = strawberry.field(
        default=None,
        description=(
            "The payment's version the caller last saw; if it has changed since, nothing is "
            "written and the answer is CONFLICT with the payment as it is now."
        ),
    )


@strawberry.input(
    description="`submitPayment`'s: the payment, why, and the id its presentment was given."
)
class SubmitPaymentInput(TransitionInput):
    confirmation_id: str = strawberry.field(
        description=(
            "The payments service's id for this presentment; if another payment of the user "
            "holds it, the answer is INVALID_INPUT."
        )
    )


@strawberry.input(
    description=(
        "`completePayment`'s: the payment, why, (PINless) its presentment's id, and how its "
        "amount is applied."
    )
)
class CompletePaymentInput(TransitionInput):
    confirmation_id: str | None = strawberry.field(
        default=None, description="Required for a PINless payment (its presentment)."
    )
    applications: list[ApplicationInput] | None = strawberry.field(
        default=None,
        description=(
            "Installments the payment pays, at most 12; without them, all to the intended one."
        ),
    )


@strawberry.input(
    description=(
        "`schedulePaymentRetry`'s: the payment, why (PINless: the decline), and (ACH) the "
        "return code."
    )
)
class SchedulePaymentRetryInput(TransitionInput):
    return_code: str | None = strawberry.field(
        default=None, description="The ACH return code (R01); required for ACH payments."
    )


@strawberry.input(description="`failPayment`'s: the payment, and why it is given up on.")
class FailPaymentInput(TransitionInput):
    pass


@strawberry.input(description="`returnPayment`'s: the payment, why, and the bank's return code.")
class ReturnPaymentInput(TransitionInput):
    return_code: str = strawberry.field(
        description=(
            "The ACH return code the bank gave: R and two digits (R02 account closed, R10 "
            "unauthorized, …)."
        )
    )


@strawberry.input(description="`chargeBackPayment`'s: the payment, and why (the dispute).")
class ChargeBackPaymentInput(TransitionInput):
    pass


@strawberry.input(description="`skipPayment`'s: the payment, and why it is not needed.")
class SkipPaymentInput(TransitionInput):
    pass
