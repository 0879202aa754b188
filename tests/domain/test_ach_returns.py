"""NACHA's return rules, with the clock moved across each window's edge."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from domain.ach_returns import add_banking_days, retry_eligibility
from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import InvalidTransition
from domain.payment import Payment
from domain.transitions import TransitionRequest, allowed_targets, apply_transition
from tests.payment_samples import payment_in

S = PaymentStatus
ACH = PaymentMethod.ACH
MAX = 3
# A Friday, noon UTC.
FRIDAY = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)


def move(
    payment: Payment,
    target: PaymentStatus,
    *,
    now: datetime,
    code: str | None = None,
    confirmation: str | None = None,
) -> Payment:
    request = TransitionRequest(
        target=target, reason="test", return_code=code, confirmation_id=confirmation
    )
    return apply_transition(payment, request, max_attempts=MAX, now=now)


@pytest.mark.parametrize("code", ["R01", "R09"])
def test_insufficient_and_uncollected_funds_may_be_retried(code: str) -> None:
    sent = payment_in(S.ACHSENT, ACH, first_presented_at=FRIDAY)
    assert move(sent, S.RETRY, now=FRIDAY, code=code).status is S.RETRY


@pytest.mark.parametrize("code", ["R02", "R03", "R10", "R29"])
def test_other_returns_cannot_be_retried_but_can_be_returned(code: str) -> None:
    sent = payment_in(S.ACHSENT, ACH, first_presented_at=FRIDAY)
    with pytest.raises(InvalidTransition, match="not a retryable return"):
        move(sent, S.RETRY, now=FRIDAY, code=code)
    assert move(sent, S.RETURNED, now=FRIDAY, code=code).return_code == code


@pytest.mark.parametrize(("days", "allowed"), [(179, True), (181, False)])
def test_representment_ends_180_days_after_the_first_presentment(days: int, allowed: bool) -> None:
    retry = payment_in(S.RETRY, ACH, first_presented_at=FRIDAY, return_code="R01")
    sent = payment_in(S.ACHSENT, ACH, first_presented_at=FRIDAY)
    now = FRIDAY + timedelta(days=days)

    if allowed:
        assert move(retry, S.ACHSENT, now=now, confirmation="c-2").attempts == 2
    else:
        with pytest.raises(InvalidTransition, match="180-day"):
            move(retry, S.ACHSENT, now=now, confirmation="c-2")
        assert move(retry, S.FAILED, now=now).status is S.FAILED
    # The window bounds the next presentment, never the return: an R01 always waits in RETRY.
    assert move(sent, S.RETRY, now=now, code="R01").status is S.RETRY
    assert S.RETRY in allowed_targets(sent, max_attempts=MAX, now=now)
    assert (S.ACHSENT in allowed_targets(retry, max_attempts=MAX, now=now)) is allowed


def test_a_return_after_the_last_presentment_waits_in_retry_and_can_only_fail() -> None:
    third = payment_in(S.ACHSENT, ACH, first_presented_at=FRIDAY, attempts=MAX)
    assert S.RETRY in allowed_targets(third, max_attempts=MAX, now=FRIDAY)

    retry = move(third, S.RETRY, now=FRIDAY, code="R01")

    assert (retry.status, retry.attempts) == (S.RETRY, MAX)
    assert allowed_targets(retry, max_attempts=MAX, now=FRIDAY) == [S.FAILED, S.SKIPPED]
    with pytest.raises(InvalidTransition, match="already presented 3 times"):
        move(retry, S.ACHSENT, now=FRIDAY, confirmation="c-4")
    eligibility = retry_eligibility(retry, max_attempts=MAX, now=FRIDAY)
    assert (eligibility.eligible, eligibility.attempts_remaining) == (False, 0)
    assert eligibility.reason == f"all {MAX} presentments are used"
    failed = move(retry, S.FAILED, now=FRIDAY)
    assert (failed.status, failed.attempts) == (S.FAILED, MAX)


def test_the_first_presentment_is_remembered_and_kept() -> None:
    pending = payment_in(S.PENDING, ACH)
    sent = move(pending, S.ACHSENT, now=FRIDAY, confirmation="c-1")
    retry = move(sent, S.RETRY, now=FRIDAY + timedelta(days=3), code="R01")
    again = move(retry, S.ACHSENT, now=FRIDAY + timedelta(days=6), confirmation="c-2")
    assert sent.first_presented_at == retry.first_presented_at == again.first_presented_at
    assert again.first_presented_at == FRIDAY


@pytest.mark.parametrize("code", ["R05", "R07", "R10", "R11", "R29", "R51"])
@pytest.mark.parametrize(("days", "allowed"), [(59, True), (61, False)])
def test_unauthorized_late_returns_have_60_days(code: str, days: int, allowed: bool) -> None:
    completed = payment_in(S.COMPLETED, ACH, completed_at=FRIDAY)
    now = FRIDAY + timedelta(days=days)
    if allowed:
        assert move(completed, S.RETURNED, now=now, code=code).status is S.RETURNED
    else:
        with pytest.raises(InvalidTransition, match="within 60 days"):
            move(completed, S.RETURNED, now=now, code=code)
    assert (S.RETURNED in allowed_targets(completed, max_attempts=MAX, now=now)) is allowed


@pytest.mark.parametrize(
    ("now", "allowed"),
    [
        (datetime(2026, 3, 9, 23, 0, tzinfo=UTC), True),  # Monday: one banking day
        (datetime(2026, 3, 10, 23, 59, tzinfo=UTC), True),  # Tuesday: the second
        (datetime(2026, 3, 11, 0, 1, tzinfo=UTC), False),  # Wednesday
    ],
)
def test_other_late_returns_have_two_banking_days_over_a_weekend(
    now: datetime, allowed: bool
) -> None:
    completed = payment_in(S.COMPLETED, ACH, completed_at=FRIDAY)
    if allowed:
        assert move(completed, S.RETURNED, now=now, code="R02").status is S.RETURNED
    else:
        with pytest.raises(InvalidTransition, match="2 banking days"):
            move(completed, S.RETURNED, now=now, code="R02")
        # An unauthorized return still has its 60 days.
        assert move(completed, S.RETURNED, now=now, code="R10").status is S.RETURNED


def test_banking_days_skip_weekends_and_federal_reserve_holidays() -> None:
    friday_before_labor_day = datetime(2026, 9, 4).date()
    assert add_banking_days(friday_before_labor_day, 1) == datetime(2026, 9, 8).date()
    assert add_banking_days(friday_before_labor_day, 2) == datetime(2026, 9, 9).date()


def test_retry_eligibility() -> None:
    retry = payment_in(S.RETRY, ACH, first_presented_at=FRIDAY, return_code="R01")

    now = retry_eligibility(retry, max_attempts=MAX, now=FRIDAY + timedelta(days=1))
    assert (now.eligible, now.attempts_remaining, now.reason) == (True, 2, None)
    assert now.deadline == FRIDAY + timedelta(days=180)

    late = retry_eligibility(retry, max_attempts=MAX, now=FRIDAY + timedelta(days=181))
    assert not late.eligible and late.reason and "180-day" in late.reason

    spent = dataclasses.replace(retry, attempts=MAX)
    used = retry_eligibility(spent, max_attempts=MAX, now=FRIDAY)
    assert (used.eligible, used.attempts_remaining) == (False, 0)

    pending = retry_eligibility(payment_in(S.PENDING, ACH), max_attempts=MAX, now=FRIDAY)
    assert (pending.eligible, pending.deadline) == (False, None)

    card = payment_in(S.RETRY, PaymentMethod.PINLESS)
    assert retry_eligibility(card, max_attempts=MAX, now=FRIDAY).deadline is None
