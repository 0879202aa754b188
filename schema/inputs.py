"""Mutation inputs. Every transition names the payment and says why."""

from __future__ import annotations

import strawberry

from domain.transitions import ApplicationRequest
from schema.enums import PaymentMethod, PaymentProcess


@strawberry.input
class CreatePaymentInput:
    loan_id: strawberry.ID
    amount_cents: int
    method: PaymentMethod
    user_id: strawberry.ID | None = strawberry.field(
        default=None, description="The payment's owner; a customer may omit it, a service must not."
    )
    process: PaymentProcess = PaymentProcess.MANUAL
    account_last_four: str | None = None
    intended_installment_id: strawberry.ID | None = None
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


@strawberry.input
class ApplicationInput:
    installment_id: strawberry.ID
    amount_cents: int

    def to_request(self) -> ApplicationRequest:
        return ApplicationRequest(self.installment_id, self.amount_cents)


@strawberry.input(description="Names one payment and says why it moves.")
class TransitionInput:
    user_id: strawberry.ID
    loan_id: strawberry.ID
    payment_id: strawberry.ID
    reason: str
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


@strawberry.input
class SubmitPaymentInput(TransitionInput):
    confirmation_id: str


@strawberry.input
class CompletePaymentInput(TransitionInput):
    confirmation_id: str | None = strawberry.field(
        default=None, description="Required for a PINless payment (its presentment)."
    )
    applications: list[ApplicationInput] | None = strawberry.field(
        default=None,
        description="Installments the payment pays; without them, all to the intended one.",
    )


@strawberry.input
class SchedulePaymentRetryInput(TransitionInput):
    return_code: str | None = strawberry.field(
        default=None, description="The ACH return code (R01); required for ACH payments."
    )


@strawberry.input
class FailPaymentInput(TransitionInput):
    pass


@strawberry.input
class ReturnPaymentInput(TransitionInput):
    return_code: str


@strawberry.input
class ChargeBackPaymentInput(TransitionInput):
    pass


@strawberry.input
class SkipPaymentInput(TransitionInput):
    pass
