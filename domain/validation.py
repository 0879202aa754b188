"""Validation of every value a caller can hand the service.

Each check returns the clean value or raises ``InvalidInput`` naming the field, so that bad input
is refused before anything is read or written.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeVar

from domain.errors import InvalidInput

__all__ = [
    "Instant",
    "account_last_four",
    "amount_cents",
    "format_timestamp",
    "holds_card_number",
    "idempotency_key",
    "identifier",
    "member",
    "parse_timestamp",
    "payment_id",
    "reason",
    "return_code",
    "timestamp_text",
    "version",
]

E = TypeVar("E", bound=StrEnum)

MAX_ID_LENGTH = 128
MAX_REASON_LENGTH = 500
MAX_IDEMPOTENCY_KEY_LENGTH = 255
# GraphQL's Int is a signed 32-bit integer; amounts travel as Int, so this is their ceiling.
MAX_AMOUNT_CENTS = 2_147_483_647

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DIGITS = re.compile(r"[0-9]+")
_NOT_DIGITS = re.compile(r"[^0-9]+")
# The fewest digits of a card or account number the check looks for.
_CARD_DIGITS = 13
# Card numbers as printed: 4-4-4-4, 4-4-4-4-3 and 4-6-5, standing alone. A UUID never fits:
# every group of one is joined to its neighbours by a hyphen, which the boundaries refuse.
_GROUPED_DIGITS = re.compile(
    r"(?<![0-9A-Za-z-])"
    r"(?:[0-9]{4}[ -][0-9]{4}[ -][0-9]{4}[ -][0-9]{4}(?:[ -][0-9]{3})?"
    r"|[0-9]{4}[ -][0-9]{6}[ -][0-9]{5})"
    r"(?![0-9A-Za-z-])"
)
_LAST_FOUR = re.compile(r"[0-9]{4}")
_RETURN_CODE = re.compile(r"R[0-9]{2}")
# What str(uuid.UUID(...)) gives: the only spelling of a payment id the service accepts.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _text(field: str, value: str, *, max_length: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, "must be a string")
    if not value or not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > max_length:
        raise InvalidInput(field, f"must be at most {max_length} characters")
    if _CONTROL.search(value):
        raise InvalidInput(field, "must not contain control characters")
    if holds_card_number(value):
        # Never echo it: the service keeps no more of an account number than its last four.
        raise InvalidInput(field, "must not hold a card or account number")
    return value


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        digit = int(char) * (2 if position % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


def holds_card_number(value: str) -> bool:
    """13-19 digits that pass the Luhn check, in a row or grouped as cards are printed."""
    # Most ids hold too few digits to hold a number at all; that is settled in C.
    if len(value) < _CARD_DIGITS or len(_NOT_DIGITS.sub("", value)) < _CARD_DIGITS:
        return False
    candidates = _DIGITS.findall(value)
    candidates += [re.sub("[ -]", "", grouped) for grouped in _GROUPED_DIGITS.findall(value)]
    return any(_CARD_DIGITS <= len(run) <= 19 and _luhn_valid(run) for run in candidates)


def identifier(field: str, value: str) -> str:
    """An id that becomes part of a key: non-empty, bounded, no `#` (the key delimiter)."""
    _text(field, value, max_length=MAX_ID_LENGTH)
    if "#" in value:
        raise InvalidInput(field, "must not contain '#'")
    if value != value.strip():
        raise InvalidInput(field, "must not start or end with whitespace")
    return value


def payment_id(field: str, value: str) -> str:
    """Payment ids are UUIDs the service made; anything else cannot name a payment."""
    if isinstance(value, str) and _CANONICAL_UUID.fullmatch(value):
        # Every check of `identifier` holds for it: 36 characters of hex digits and hyphens,
        # none a control character, `#` or space, no digit run longer than 12, and its groups
        # joined by hyphens, which a grouped card number's boundaries refuse.
        return value
    identifier(field, value)
    try:
        uuid.UUID(value)
    except ValueError:
        raise InvalidInput(field, "must be a payment id (a UUID)") from None
    raise InvalidInput(field, "must be a UUID in its canonical lower-case form")


def member(field: str, enum: type[E], value: object) -> E:
    """A member of `enum` (the value itself, typed); its own members only, not their strings."""
    if not isinstance(value, enum):
        raise InvalidInput(field, f"must be one of {', '.join(member.value for member in enum)}")
    return value


def amount_cents(field: str, value: int) -> int:
    # bool is an int subclass in Python; True must not pass as one cent.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, "must be a whole number of cents")
    if not 1 <= value <= MAX_AMOUNT_CENTS:
        raise InvalidInput(field, f"must be between 1 and {MAX_AMOUNT_CENTS} cents")
    return value


def account_last_four(field: str, value: str) -> str:
    if not isinstance(value, str) or not _LAST_FOUR.fullmatch(value):
        # Never echo the value: it may be a full account number.
        raise InvalidInput(field, "must be exactly the last four digits of the account")
    return value


def reason(field: str, value: str) -> str:
    return _text(field, value, max_length=MAX_REASON_LENGTH)


def return_code(field: str, value: str) -> str:
    if not isinstance(value, str) or not _RETURN_CODE.fullmatch(value):
        raise InvalidInput(field, "must be an ACH return code: R and two digits (R01)")
    return value


def idempotency_key(field: str, value: str) -> str:
    return _text(field, value, max_length=MAX_IDEMPOTENCY_KEY_LENGTH)


def version(field: str, value: int) -> int:
    """A payment's version: its creation is 1, and every write adds one."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(field, "must be a payment version, 1 or more")
    return value


# The text `format_timestamp` writes; an instant read from it is written back as the same text.
_CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)


class Instant(datetime):
    """A UTC instant read from its canonical text, which it keeps, so that writing it out again
    (a stored payment served to a caller) needs no formatting. Arithmetic and `replace` give
    instants without the text, which are formatted as any datetime is."""

    __slots__ = ("text",)
    text: str


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z` suffix and millisecond precision, so strings sort by time."""
    if moment.__class__ is Instant:
        try:
            return moment.text
        except AttributeError:  # made by arithmetic or `replace`: no text of its own
            pass
    if moment.tzinfo is not UTC:
        if moment.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        moment = moment.astimezone(UTC)
    # isoformat is C, strftime a format string parsed on every call: a page formats hundreds.
    return moment.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def timestamp_text(field: str, value: str) -> str:
    """`format_timestamp(parse_timestamp(field, value))`, without keeping the instant: the
    canonical text itself once it names one (every stored timestamp), refused as `parse_timestamp`
    refuses it."""
    if value.__class__ is str and _CANONICAL.fullmatch(value):
        datetime.fromisoformat(value)  # a date that does not exist is refused, as by parsing
        return value
    return format_timestamp(parse_timestamp(field, value))


def parse_timestamp(field: str, value: str) -> datetime:
    """The instant `value` names; read from the canonical text (every stored timestamp), an
    `Instant` that keeps it."""
    if not isinstance(value, str) or not value.endswith("Z"):
        raise InvalidInput(field, "must be an RFC 3339 timestamp in UTC ending in Z")
    if _CANONICAL.fullmatch(value):
        instant = Instant.fromisoformat(value)
        instant.text = value
        return instant
    try:
        parsed = datetime.fromisoformat(value)  # Python 3.11 reads the Z as UTC
    except ValueError:
        raise InvalidInput(field, "must be an RFC 3339 timestamp in UTC ending in Z") from None
    return parsed if parsed.tzinfo is UTC else parsed.astimezone(UTC)
