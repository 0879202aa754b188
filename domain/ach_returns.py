"""NACHA's rules for ACH returns and re-presentments, with the clock passed in.

    return code       R and two digits, stored as loc_return_code
    retryable codes   R01 (insufficient funds), R09 (uncollected funds): only these lead to RETRY;
                      every other code leads to RETURNED
    re-presentment    at most twice (three presentments in all: the attempts maximum), and only
                      within 180 days of the first presentment; these limits bound the next
                      presentment (RETRY -> ACHSENT), never the return itself (ACHSENT -> RETRY),
                      so a payment past them waits in RETRY and leaves for FAILED
    late return       COMPLETED -> RETURNED within 60 days of completion for the unauthorized
                      codes (R05, R07, R10, R11, R29, R51), within 2 banking days otherwise

Banking days are weekdays that are not Federal Reserve holidays (the FED calendar of the
`holidays` package); a window ends at the end of its last day, in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache

import holidays

from domain.enums import PaymentMethod, PaymentStatus
from domain.payment import Payment

__all__ = [
    "RetryEligibility",
    "add_banking_days",
    "late_return_refusal",
    "representment_refusal",
    "retry_eligibility",
    "retry_refusal",
]

RETRYABLE_CODES = frozenset({"R01", "R09"})
UNAUTHORIZED_CODES = frozenset({"R05", "R07", "R10", "R11", "R29", "R51"})
REPRESENTMENT_WINDOW = timedelta(days=180)
UNAUTHORIZED_RETURN_WINDOW = timedelta(days=60)
LATE_RETURN_BANKING_DAYS = 2


@cache
def _fed_holidays(year: int) -> holidays.HolidayBase:
    return holidays.financial_holidays("FED", years=year)


def is_banking_day(day: date) -> bool:
    return day.weekday() < 5 and day not in _fed_holidays(day.year)


def add_banking_days(day: date, count: int) -> date:
    while count:
        day += timedelta(days=1)
        if is_banking_day(day):
            count -= 1
    return day


def _end_of(day: date) -> datetime:
    return datetime.combine(day, time.max, tzinfo=UTC)


def representment_deadline(payment: Payment) -> datetime | None:
    """The last instant an ACH payment may be presented again; None before any presentment."""
    if payment.method is not PaymentMethod.ACH or payment.first_presented_at is None:
        return None
    return payment.first_presented_at + REPRESENTMENT_WINDOW


def late_return_deadline(completed_at: datetime, return_code: str | None) -> datetime:
    """When a COMPLETED ACH payment stops accepting a return with this code.

    Without a code, the latest deadline any code could have.
    """
    if return_code is None or return_code in UNAUTHORIZED_CODES:
        return completed_at + UNAUTHORIZED_RETURN_WINDOW
    last_day = add_banking_days(completed_at.astimezone(UTC).date(), LATE_RETURN_BANKING_DAYS)
    return _end_of(last_day)


def representment_refusal(payment: Payment, *, max_attempts: int, now: datetime) -> str | None:
    """Why this payment cannot be presented again now, or None when it can."""
    if payment.attempts >= max_attempts:
        return f"all {max_attempts} presentments are used"
    deadline = representment_deadline(payment)
    if deadline is not None and now > deadline:
        return f"the 180-day re-presentment window closed at {deadline.isoformat()}"
    return None


def retry_refusal(return_code: str | None) -> str | None:
    """Why an ACH return cannot become a RETRY (so it must be RETURNED), or None.

    Only the code decides: a payment whose presentments are spent, or whose window has closed,
    still waits in RETRY, from where it can no longer be presented and leaves for FAILED. RETURNED
    stays the mark of a return that is not retried at all.
    """
    if return_code is not None and return_code not in RETRYABLE_CODES:
        return f"{return_code} is not a retryable return (only R01 and R09 are); return the payment"
    return None


def late_return_refusal(payment: Payment, return_code: str | None, *, now: datetime) -> str | None:
    if payment.completed_at is None:
        return None
    deadline = late_return_deadline(payment.completed_at, return_code)
    if now <= deadline:
        return None
    window = (
        "60 days" if return_code is None or return_code in UNAUTHORIZED_CODES else "2 banking days"
    )
    return f"a late return is accepted within {window} of completion, until {deadline.isoformat()}"


@dataclass(frozen=True, slots=True)
class RetryEligibility:
    eligible: bool
    attempts_remaining: int
    deadline: datetime | None
    reason: str | None


def retry_eligibility(payment: Payment, *, max_attempts: int, now: datetime) -> RetryEligibility:
    """May this payment be presented again now, how many more times, and until when."""
    remaining = max(0, max_attempts - payment.attempts)
    deadline = representment_deadline(payment)
    if payment.status is not PaymentStatus.RETRY:
        reason: str | None = (
            f"only a payment in RETRY is presented again; this one is {payment.status.value}"
        )
    else:
        reason = representment_refusal(payment, max_attempts=max_attempts, now=now)
    return RetryEligibility(reason is None, remaining, deadline, reason)
