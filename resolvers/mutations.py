"""What each mutation does: check the caller, apply the domain's rules, write conditionally.

Every transition goes through the one engine: `domain.transitions.apply_transition` computes the
new payment, `PaymentStore.transition` writes it only if nobody changed the payment meanwhile.
"""

from __future__ import annotations

from domain.audit import audit_write
from domain.enums import PaymentMethod, PaymentProcess
from domain.errors import NotFound
from domain.idempotency import claim_for
from domain.payment import Payment, PaymentRef, new_payment
from domain.transitions import TransitionRequest, apply_transition, check_request
from resolvers.callers import Caller, Forbidden
from resolvers.context import Context

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
) -> Payment:
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
    claim = None if idempotency_key is None else claim_for(idempotency_key, payment)
    if not caller.sees(payment.user_id):
        raise NotFound("loan not found")
    if process is not PaymentProcess.MANUAL and not caller.is_service:
        raise Forbidden("only services create AUTO and RETRY payments")
    created = await context.store.create(payment, idempotency=claim)
    if created.payment_id == payment.payment_id:  # not the replay of an idempotency key
        _record_write(context, caller, None, created)
    _remember_write(context, created)
    return created


async def transition_payment(
    context: Context,
    *,
    user_id: str,
    loan_id: str,
    payment_id: str,
    request: TransitionRequest,
) -> Payment:
    caller = context.service()
    ref = PaymentRef.checked(user_id, loan_id, payment_id)
    check_request(request)  # bad input is refused before anything is read
    current = await context.loaders.payments.load(ref)
    if current is None:
        raise NotFound()
    updated = apply_transition(
        current, request, max_attempts=context.max_attempts, now=context.clock()
    )
    saved = await context.store.transition(current, updated)
    _record_write(context, caller, current, saved)
    _remember_write(context, saved)
    return saved


def _record_write(context: Context, caller: Caller, before: Payment | None, after: Payment) -> None:
    audit_write(
        before,
        after,
        actor_id=caller.user_id,
        actor_kind=context.caller_kind,
        request_id=context.request_id,
    )
    context.writes.append((None if before is None else before.status, after.status))


def _remember_write(context: Context, payment: Payment) -> None:
    # The rest of this response must show the payment as written, and no list read earlier.
    context.loaders.remember([payment])
    context.loaders.forget_lists()
