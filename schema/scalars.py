"""`DateTime`: RFC 3339 in UTC with a `Z` suffix, the same text the table stores."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.types.scalar import ScalarDefinition

from domain import validation

__all__ = ["DATETIME"]


def _parse(value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError("DateTime must be an RFC 3339 string")
    return validation.parse_timestamp("DateTime", value)


DATETIME: ScalarDefinition = strawberry.scalar(
    name="DateTime",
    description=(
        "An instant in RFC 3339, in UTC with millisecond precision and a Z suffix, e.g. "
        "2026-01-05T14:00:00.123Z. As input, any RFC 3339 instant in UTC that ends in Z."
    ),
    specified_by_url="https://datatracker.ietf.org/doc/html/rfc3339",
    serialize=validation.format_timestamp,
    parse_value=_parse,
)
