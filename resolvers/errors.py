"""Refusals about the caller, not the data, each reported as its `errors[].extensions.code`:

CallerError(Exception)        UNAUTHENTICATED unless a subclass says otherwise
    Unauthenticated           UNAUTHENTICATED: no token, or one refused
    Forbidden                 FORBIDDEN: the caller may not touch what it asked for
"""

from __future__ import annotations

__all__ = ["CallerError", "Forbidden", "Unauthenticated"]


class CallerError(Exception):
    """A refusal about the caller, not the data: reported as `errors[].extensions.code`."""

    code = "UNAUTHENTICATED"


class Unauthenticated(CallerError):
    code = "UNAUTHENTICATED"


class Forbidden(CallerError):
    code = "FORBIDDEN"
