"""Demonstration payments for a first local start, so GraphiQL has something to show.

Two customers with a loan each; each loan has one payment in every status its method can reach,
so all eight statuses between them. Some have confirmation ids and applications; one ACH payment was
returned and waits to be presented again; one payment of each method was presented as often as
allowed and then failed. Written through the one workflow of every write (`resolvers.workflow`),
like any other payment, and every confirmation id is a payment's own, as a user's must be.
Their writes are stored in each payment's history as always, but not audit-logged one by one:
the start logs one line saying what it wrote (`summary`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from datasource import PaymentStore
from domain.audit import Actor, ActorKind, unlogged
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from domain.idempotency import CallerKind, claim_for, move_claim
from domain.payment import Payment, new_payment
from domain.transitions import ApplicationRequest, TransitionRequest
from resolvers import workflow

__all__ = ["seed_demo_payments"]

S = PaymentStatus
ACH = PaymentMethod.ACH
PINLESS = PaymentMethod.PINLESS
# Who the audit trail names for the demonstration payments.
DEMO = Actor(ActorKind.JOB, "loc-payments-demo-data")
# Its idempotency keys are among the service's, as every job's are.
SCOPE = CallerKind.of(DEMO.kind)
demo_log = logging.getLogger("loc_payments.demo")


def _move(
    target: PaymentStatus,
    *,
    confirmation_id: str | None = None,
    applications: list[ApplicationRequest] | None = None,
    return_code: str | None = None,
) -> TransitionRequest:
    return TransitionRequest.checked(
        target,
        f"demonstration: {target.value.lower()}",
        confirmation_id=confirmation_id,
        applications=applications,
        return_code=return_code,
    )


_SPLIT = [ApplicationRequest("inst-2-1", 5_000), ApplicationRequest("inst-2-2", 3_000)]

_Plan = list[tuple[str, str, PaymentMethod, int, list[TransitionRequest]]]


def _plan(max_attempts: int) -> _Plan:
    """(user, loan, method, cents, moves from PENDING) of each payment, in the order written."""
    # Every presentment returned for insufficient funds (R01), until none is left.
    ach_exhausted = [
        move
        for attempt in range(1, max_attempts + 1)
        for move in (
            _move(S.ACHSENT, confirmation_id=f"ach-1005-{attempt}"),
            _move(S.RETRY, return_code="R01"),
        )
    ]
    # Declined at every presentment.
    pinless_exhausted = [_move(S.RETRY) for _ in range(max_attempts)]
    return [
        ("user-1", "loan-1", ACH, 15_000, []),
        ("user-1", "loan-1", ACH, 15_000, [_move(S.ACHSENT, confirmation_id="ach-1001")]),
        (
            "user-1",
            "loan-1",
            ACH,
            15_000,
            [_move(S.ACHSENT, confirmation_id="ach-1002"), _move(S.COMPLETED)],
        ),
        (
            "user-1",
            "loan-1",
            ACH,
            15_000,
            [_move(S.ACHSENT, confirmation_id="ach-1003"), _move(S.RETRY, return_code="R01")],
        ),
        (
            "user-1",
            "loan-1",
            ACH,
            15_000,
            [_move(S.ACHSENT, confirmation_id="ach-1004"), _move(S.RETURNED, return_code="R02")],
        ),
        ("user-1", "loan-1", ACH, 15_000, [_move(S.SKIPPED)]),
        ("user-1", "loan-1", ACH, 15_000, [*ach_exhausted, _move(S.FAILED)]),
        ("user-2", "loan-2", PINLESS, 8_000, []),
        (
            "user-2",
            "loan-2",
            PINLESS,
            8_000,
            [
                _move(S.COMPLETED, confirmation_id="card-2001", applications=_SPLIT),
                _move(S.CHARGED_BACK),
            ],
        ),
        ("user-2", "loan-2", PINLESS, 8_000, [_move(S.COMPLETED, confirmation_id="card-2002")]),
        ("user-2", "loan-2", PINLESS, 8_000, [_move(S.RETRY)]),
        ("user-2", "loan-2", PINLESS, 8_000, [_move(S.SKIPPED)]),
        ("user-2", "loan-2", PINLESS, 8_000, [*pinless_exhausted, _move(S.FAILED)]),
    ]


async def seed_demo_payments(
    store: PaymentStore, *, clock: Callable[[], datetime], max_attempts: int
) -> list[Payment]:
    """Every write under an idempotency key of its own: seeding again writes nothing new.

    Logs one line, `summary(...)`, in place of an audit line per write."""
    with unlogged():
        seeded = await _seed(store, clock=clock, max_attempts=max_attempts)
    demo_log.info("%s", summary(seeded))
    return seeded


def summary(payments: Sequence[Payment]) -> str:
    """`demonstration data: 13 payments of user-1 (loan-1) and user-2 (loan-2) in all 8
    statuses; each payment's history holds its writes`."""
    loans = sorted({(payment.user_id, payment.loan_id) for payment in payments})
    owners = " and ".join(f"{user} ({loan})" for user, loan in loans)
    statuses = {payment.status for payment in payments}
    reached = (
        f"all {len(statuses)} statuses"
        if statuses == set(PaymentStatus)
        else f"{len(statuses)} statuses"
    )
    return (
        f"demonstration data: {len(payments)} payments of {owners} in {reached}; "
        "each payment's history holds its writes"
    )


async def _seed(
    store: PaymentStore, *, clock: Callable[[], datetime], max_attempts: int
) -> list[Payment]:
    seeded = []
    for number, (user, loan, method, cents, moves) in enumerate(_plan(max_attempts), start=1):
        payment = new_payment(
            user_id=user,
            loan_id=loan,
            amount_cents=cents,
            method=method,
            process=PaymentProcess.AUTO if number % 2 else PaymentProcess.MANUAL,
            reason="demonstration data",
            now=clock(),
            account_last_four="4242",
            intended_installment_id=f"inst-{loan.removeprefix('loan-')}-{number}",
        )
        key = f"demo-payment-{number}"
        created = await workflow.create_payment(
            store, payment, actor=DEMO, idempotency=claim_for(key, payment, caller=SCOPE)
        )
        payment = created.payment
        for index, request in enumerate(moves, start=1):
            claim = move_claim(
                f"{key}-move-{index}", payment.ref, request, caller=SCOPE, now=clock()
            )
            moved = await workflow.move_payment(
                store,
                payment,
                request,
                actor=DEMO,
                clock=clock,
                max_attempts=max_attempts,
                idempotency=claim,
            )
            payment = moved.payment
        seeded.append(payment)
    return seeded
