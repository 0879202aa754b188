"""The root mutation: creation and the seven transitions, each answering a `PaymentResult`;
then the webhook endpoints' mutations."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import cast

import strawberry

from domain.errors import PaymentsError
from domain.idempotency import WriteOutcome
from resolvers import mutations
from resolvers.context import Context
from schema import inputs
from schema.descriptions import SERVICES_ONLY, MutationInput
from schema.enums import PaymentStatus
from schema.types import PaymentType
from schema.user_errors import PaymentPayload, PaymentResult, user_error
from schema.webhooks import WebhookMutations

__all__ = ["Mutation"]

Info = strawberry.Info[Context, None]


async def _result(info: Info, work: Awaitable[WriteOutcome]) -> PaymentResult:
    try:
        outcome = await work
    except PaymentsError as error:
        result = user_error(error)  # an unexpected one is raised again: counted in errors[]
        info.context.user_errors.append(error.code)
        return result
    return PaymentPayload(payment=cast(PaymentType, outcome.payment), replayed=outcome.replayed)


def _move(
    info: Info,
    named: inputs.TransitionInput,
    target: PaymentStatus,
    *,
    confirmation_id: str | None = None,
    applications: list[inputs.ApplicationInput] | None = None,
    return_code: str | None = None,
) -> Awaitable[WriteOutcome]:
    return mutations.transition_payment(
        info.context,
        user_id=named.user_id,
        loan_id=named.loan_id,
        payment_id=named.payment_id,
        target=target,
        reason=named.reason,
        confirmation_id=confirmation_id,
        applications=(
            None if applications is None else [item.to_request() for item in applications]
        ),
        return_code=return_code,
        idempotency_key=named.idempotency_key,
        expected_version=named.expected_version,
    )


@strawberry.type
class PaymentMutations:
    @strawberry.mutation(
        description=(
            "A new PENDING payment. Customers create MANUAL payments on their own loans; "
            "services any payment, for any user."
        )
    )
    async def create_payment(
        self, info: Info, input: MutationInput[inputs.CreatePaymentInput]
    ) -> PaymentResult:
        return await _result(
            info,
            mutations.create_payment(
                info.context,
                user_id=input.user_id,
                loan_id=input.loan_id,
                amount_cents=input.amount_cents,
                method=input.method,
                process=input.process,
                account_last_four=input.account_last_four,
                intended_installment_id=input.intended_installment_id,
                reason=input.reason,
                idempotency_key=input.idempotency_key,
            ),
        )

    @strawberry.mutation(
        description=f"Presented to the payments service: -> ACHSENT. {SERVICES_ONLY}"
    )
    async def submit_payment(
        self, info: Info, input: MutationInput[inputs.SubmitPaymentInput]
    ) -> PaymentResult:
        return await _result(
            info, _move(info, input, PaymentStatus.ACHSENT, confirmation_id=input.confirmation_id)
        )

    @strawberry.mutation(
        description=f"Settled and applied to installments: -> COMPLETED. {SERVICES_ONLY}"
    )
    async def complete_payment(
        self, info: Info, input: MutationInput[inputs.CompletePaymentInput]
    ) -> PaymentResult:
        return await _result(
            info,
            _move(
                info,
                input,
                PaymentStatus.COMPLETED,
                confirmation_id=input.confirmation_id,
                applications=input.applications,
            ),
        )

    @strawberry.mutation(
        description=f"Returned or declined, to be tried again: -> RETRY. {SERVICES_ONLY}"
    )
    async def schedule_payment_retry(
        self, info: Info, input: MutationInput[inputs.SchedulePaymentRetryInput]
    ) -> PaymentResult:
        return await _result(
            info, _move(info, input, PaymentStatus.RETRY, return_code=input.return_code)
        )

    @strawberry.mutation(description=f"Given up on: -> FAILED. {SERVICES_ONLY}")
    async def fail_payment(
        self, info: Info, input: MutationInput[inputs.FailPaymentInput]
    ) -> PaymentResult:
        return await _result(info, _move(info, input, PaymentStatus.FAILED))

    @strawberry.mutation(
        description=f"An ACH return, on time or late: -> RETURNED. {SERVICES_ONLY}"
    )
    async def return_payment(
        self, info: Info, input: MutationInput[inputs.ReturnPaymentInput]
    ) -> PaymentResult:
        return await _result(
            info, _move(info, input, PaymentStatus.RETURNED, return_code=input.return_code)
        )

    @strawberry.mutation(description=f"A card chargeback: -> CHARGED_BACK. {SERVICES_ONLY}")
    async def charge_back_payment(
        self, info: Info, input: MutationInput[inputs.ChargeBackPaymentInput]
    ) -> PaymentResult:
        return await _result(info, _move(info, input, PaymentStatus.CHARGED_BACK))

    @strawberry.mutation(description=f"Not needed any more: -> SKIPPED. {SERVICES_ONLY}")
    async def skip_payment(
        self, info: Info, input: MutationInput[inputs.SkipPaymentInput]
    ) -> PaymentResult:
        return await _result(info, _move(info, input, PaymentStatus.SKIPPED))


@strawberry.type(
    description=(
        "What changes a payment or a webhook endpoint. Each answers a result union: what it "
        "wrote, or a `UserError` that says why nothing was written."
    )
)
class Mutation(WebhookMutations, PaymentMutations):
    """The payments' mutations, then the webhook endpoints' (SPEC §18)."""
