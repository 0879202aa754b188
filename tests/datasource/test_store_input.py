"""Bad input to every entry point: a domain error before anything is sent, nothing written.

Nothing reaches DynamoDB here, so one backend (moto) is enough.
"""

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from datasource import PaymentStore, count_calls
from domain.enums import PaymentStatus
from domain.errors import InvalidCursor, InvalidInput
from domain.payment import Application, PaymentRef
from domain.transitions import RULES, apply_transition
from tests.datasource.stored_items import all_items
from tests.payment_samples import LATER, ref_of, request_for, sample_payment

GOOD = sample_payment()
PID = GOOD.payment_id
Call = Callable[[PaymentStore], Awaitable[Any]]


def _create(**changes: Any) -> Call:
    return lambda store: store.create(dataclasses.replace(GOOD, **changes))


def _loan(**arguments: Any) -> Call:
    defaults: dict[str, Any] = {
        "user_id": "alice",
        "loan_id": "loan-1",
        "status": None,
        "first": 10,
        "after": None,
    }
    return lambda store: store.loan_payments(**(defaults | arguments))


def _by_status(**arguments: Any) -> Call:
    defaults: dict[str, Any] = {"status": PaymentStatus.PENDING, "first": 10, "after": None}
    return lambda store: store.payments_by_status(**(defaults | arguments))


def _transition(**changes: Any) -> Call:
    skip = next(rule for rule in RULES if rule.target is PaymentStatus.SKIPPED)
    updated = apply_transition(GOOD, request_for(skip), max_attempts=3, now=LATER)
    return lambda store: store.transition(GOOD, dataclasses.replace(updated, **changes))


BAD_CALLS: dict[str, tuple[str, Call]] = {
    "create: user id with #": ("userId", _create(user_id="al#ice")),
    "create: empty loan id": ("loanId", _create(loan_id="")),
    "create: payment id not a uuid": ("paymentId", _create(payment_id="p-1")),
    "create: zero amount": ("amountCents", _create(amount_cents=0)),
    "create: amount above Int": ("amountCents", _create(amount_cents=2**31)),
    "create: empty reason": ("reason", _create(update_reason="")),
    "create: long last four": ("accountLastFour", _create(account_last_four="123456789")),
    "create: status not an enum": ("status", _create(status="PENDING!")),
    "create: negative attempts": ("attempts", _create(attempts=-1)),
    "create: bad confirmation id": ("confirmationId", _create(confirmation_id="c\n1")),
    "create: bad return code": ("returnCode", _create(return_code="X")),
    "create: bad application": (
        "applications[0].amountCents",
        _create(applications=(Application(PID, "inst-1", 0, LATER),)),
    ),
    "get: control character": ("userId", lambda s: s.get(PaymentRef("a\x00", "loan-1", PID))),
    "get: payment id": ("paymentId", lambda s: s.get(PaymentRef("alice", "loan-1", "x"))),
    "batch_get: one bad ref": (
        "loanId",
        lambda s: s.batch_get([ref_of(GOOD), PaymentRef("alice", "l#1", PID)]),
    ),
    "loan_payments: empty user": ("userId", _loan(user_id="")),
    "loan_payments: loan with #": ("loanId", _loan(loan_id="loan#1")),
    "loan_payments: first 0": ("first", _loan(first=0)),
    "loan_payments: first 101": ("first", _loan(first=101)),
    "loan_payments: first True": ("first", _loan(first=True)),
    "loan_payments: unknown status": ("status", _loan(status="LOST")),
    "loan_payments: junk cursor": ("after", _loan(after="junk")),
    "payments_by_status: unknown status": ("status", _by_status(status="pending")),
    "payments_by_status: negative first": ("first", _by_status(first=-1)),
    "payments_by_status: junk cursor": ("after", _by_status(after="")),
    "payment_by_confirmation: user": (
        "userId",
        lambda s: s.payment_by_confirmation(user_id="a" * 129, confirmation_id="c1"),
    ),
    "payment_by_confirmation: confirmation": (
        "confirmationId",
        lambda s: s.payment_by_confirmation(user_id="alice", confirmation_id=" "),
    ),
    "transition: empty reason": ("reason", _transition(update_reason="")),
    "transition: bad confirmation id": ("confirmationId", _transition(confirmation_id="a#b")),
}


@pytest.mark.parametrize("case", BAD_CALLS)
async def test_bad_input_is_refused_before_anything_is_sent(
    moto_store: PaymentStore, case: str
) -> None:
    field, call = BAD_CALLS[case]
    with count_calls() as count, pytest.raises(InvalidInput) as refused:
        await call(moto_store)
    assert refused.value.field == field
    assert count.requests == 0
    assert await all_items(moto_store) == []


async def test_a_junk_cursor_is_an_invalid_cursor(moto_store: PaymentStore) -> None:
    with pytest.raises(InvalidCursor):
        await _loan(after="not-a-cursor")(moto_store)


async def test_a_transition_must_keep_the_payment_and_step_the_version(
    store: PaymentStore,
) -> None:
    current = await store.create(GOOD)
    for wrong in ({"payment_id": sample_payment().payment_id}, {"version": GOOD.version + 2}):
        with count_calls() as count, pytest.raises(ValueError):
            await _transition(**wrong)(store)
        assert count.requests == 0
    assert await store.get(ref_of(GOOD)) == current
