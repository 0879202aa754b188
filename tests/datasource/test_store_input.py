"""Bad input the store judges (page sizes, cursors): a domain error before anything is sent.

Nothing reaches DynamoDB here, so one backend (moto) is enough.
"""

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from datasource import PaymentStore, count_calls
from domain.enums import PaymentStatus
from domain.errors import InvalidCursor, InvalidInput
from domain.payment import LoanRef
from domain.transitions import RULES, apply_transition
from tests.datasource.stored_items import all_items
from tests.payment_samples import (
    LATER,
    ref_of,
    request_for,
    sample_payment,
    stored_move,
    stored_new,
)

GOOD = sample_payment()
PID = GOOD.payment_id
Call = Callable[[PaymentStore], Awaitable[Any]]


def _loan(**arguments: Any) -> Call:
    defaults: dict[str, Any] = {"status": None, "first": 10, "after": None}
    return lambda store: store.loan_payments(LoanRef("alice", "loan-1"), **(defaults | arguments))


def _by_status(**arguments: Any) -> Call:
    defaults: dict[str, Any] = {"status": PaymentStatus.PENDING, "first": 10, "after": None}
    return lambda store: store.payments_by_status(**(defaults | arguments))


def _transition(**changes: Any) -> Call:
    skip = next(rule for rule in RULES if rule.target is PaymentStatus.SKIPPED)
    updated = apply_transition(GOOD, request_for(skip), max_attempts=3, now=LATER)
    return lambda store: stored_move(store, GOOD, dataclasses.replace(updated, **changes))


# Ids, amounts and requests are checked where they enter (`PaymentRef.checked`, `new_payment`,
# `TransitionRequest.checked`: tests/domain); what the store itself checks is the page it is asked
# for, whose size and cursor only it can judge.
BAD_CALLS: dict[str, tuple[str, Call]] = {
    "loan_payments: first 0": ("first", _loan(first=0)),
    "loan_payments: first 101": ("first", _loan(first=101)),
    "loan_payments: first True": ("first", _loan(first=True)),
    "loan_payments: junk cursor": ("after", _loan(after="junk")),
    "payments_by_status: negative first": ("first", _by_status(first=-1)),
    "payments_by_status: junk cursor": ("after", _by_status(after="")),
    "loan_payments: last 0": ("last", _loan(first=None, last=0)),
    "loan_payments: last 101": ("last", _loan(first=None, last=101)),
    "loan_payments: junk before": ("before", _loan(first=None, before="junk")),
    "loan_payments: first and last": ("last", _loan(first=5, last=5)),
    "loan_payments: after and before": ("before", _loan(first=None, after="a", before="b")),
    "loan_payments: first and before": ("before", _loan(first=5, before="b")),
    "loan_payments: last and after": ("after", _loan(first=None, last=5, after="a")),
    "payments_by_status: junk before": ("before", _by_status(first=None, before="x#y")),
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
    current = await stored_new(store, GOOD)
    for wrong in ({"payment_id": sample_payment().payment_id}, {"version": GOOD.version + 2}):
        with count_calls() as count, pytest.raises(ValueError):
            await _transition(**wrong)(store)
        assert count.requests == 0
    assert await store.get(ref_of(GOOD)) == current
