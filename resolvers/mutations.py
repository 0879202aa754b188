"""What each mutation does: check the caller and the input, then write through the workflow.

Every write goes through `resolvers.workflow`: the domain's rule, the conditional write, the
audit event. What is left here is the request's part: who may, and what the rest of the response
must see.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.errors import NotFound
from domain.idempotency import CallerKind, WriteOutcome, claim_for, move_claim
from domain.payment import Payment, PaymentRef, new_payment
from domain.transitions import ApplicationRequest, TransitionRequest
from resolvers import workflow
from resolvers.context import Context
from resolvers.errors import Forbidden

__all__ = ["create_payment", "transition_payment"]

DEFAULT_CREATE_REASON = "payment created"


async def create_payment(
    context: Context,
    *,
    user_id: str | None,
    loan_id: str,
    amount_cents: int,
    method: PaymentMethod,
    process: PaymentProcess,
    account_last_four: str | None,
    intended_installment_id: str | None,
    reason: str | None,
    idempotency_key: str | None = None,
) -> WriteOutcome:
    caller = context.caller()
    payment = new_payment(
        user_id=context.owner(user_id),
        loan_id=loan_id,
        amount_cents=amount_cents,
        method=method,
        process=process,
        reason=DEFAULT_CREATE_REASON if reason is None else reason,
        now=context.clock(),
        account_last_four=account_last_four,
        intended_installment_id=intended_installment_id,
    )
    claim = None
    if idempotency_key is not None:
        # Among the keys of the caller's kind: a customer cannot claim the service's (issue 55).
        kind = CallerKind.of(context.actor().kind)
        claim = claim_for(idempotency_key, payment, caller=kind)
    if not caller.sees(payment.user_id):
        raise NotFound("loan not found")
    if process is not PaymentProcess.MANUAL and not caller.is_service:
        raise Forbidden("only services create AUTO and RETRY payments")
    created = await workflow.create_payment(
        context.store, payment, actor=context.actor(), idempotency=claim
    )
    if not created.replayed:
        context.writes.append((None, created.payment.status))
    _remember_write(context, created.payment)
    return created


async def transition_payment(
    context: Context,
    *,
    user_id: str,
    loan_id: str,
    payment_id: str,
    target: PaymentStatus,
    reason: str,
    confirmation_id: str | None = None,
    applications: Sequence[ApplicationRequest] | None = None,
    return_code: str | None = None,
    idempotency_key: str | None = None,
    expected_version: int | None = None,
) -> WriteOutcome:
    context.service()
    # Bad input is refused before anything is read; past here every value is checked.
    ref = PaymentRef.checked(user_id, loan_id, payment_id)
    request = TransitionRequest.checked(
        target,
        reason,
        confirmation_id=confirmation_id,
        applications=applications,
        return_code=return_code,
        expected_version=expected_version,
    )
    claim = None
    if idempotency_key is not None:
        kind = CallerKind.of(context.actor().kind)
        claim = move_claim(idempotency_key, ref, request, caller=kind, now=context.clock())
    # The read that decides the write, and every read after it in this response, sees the
    # table as it is now (the write's condition would refuse a stale one anyway).
    context.loaders.read_strongly()
    current = await context.loaders.payment(ref)
    if current is None:
        raise NotFound()
    moved = await workflow.move_payment(
        context.store,
        current,
        request,
        actor=context.actor(),
        clock=context.clock,
        max_attempts=context.max_attempts,
        idempotency=claim,
    )
    if not moved.replayed:
        context.writes.append((current.status, moved.payment.status))
    _remember_write(context, moved.payment)
    return moved


def _remember_write(context: Context, payment: Payment) -> None:
    # The rest of this response must show the payment as written, and no list read earlier.
    context.loaders.remember([payment])
    context.loaders.forget_lists()
    context.loaders.read_strongly()
