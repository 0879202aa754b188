"""Errors of the payments domain.

    PaymentsError
     ├── InvalidInput            a field's value is refused (names the field)
     │    └── InvalidCursor      a pagination cursor was altered or belongs elsewhere
     ├── NotFound                no such payment, or not the caller's
     ├── InvalidTransition       the transition table forbids the move
     ├── Conflict                another writer changed the payment first
     ├── IdempotencyMismatch     an idempotency key reused with a different request
     └── StorageUnavailable      DynamoDB did not answer in time (retryable)

Every error carries a stable ``code`` that the GraphQL layer exposes as ``ErrorCode``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domain.enums import PaymentStatus

__all__ = [
    "Conflict",
    "IdempotencyMismatch",
    "InvalidCursor",
    "InvalidInput",
    "InvalidTransition",
    "NotFound",
    "PaymentsError",
    "StorageUnavailable",
]


class PaymentsError(Exception):
    code = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(PaymentsError):
    code = "INVALID_INPUT"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class InvalidCursor(InvalidInput):
    def __init__(
        self, message: str = "the cursor is not valid for this list", *, field: str = "after"
    ) -> None:
        super().__init__(field, message)


class NotFound(PaymentsError):
    code = "NOT_FOUND"

    def __init__(self, message: str = "payment not found") -> None:
        super().__init__(message)


class InvalidTransition(PaymentsError):
    code = "INVALID_TRANSITION"

    def __init__(self, current: PaymentStatus, target: PaymentStatus, why: str) -> None:
        super().__init__(f"cannot move a {current.value} payment to {target.value}: {why}")
        self.current = current
        self.target = target


class Conflict(PaymentsError):
    code = "CONFLICT"

    def __init__(
        self,
        found: PaymentStatus | None,
        message: str | None = None,
        *,
        payment: object | None = None,
    ) -> None:
        found_text = found.value if found is not None else "unknown"
        default = f"the payment was changed by another writer (now {found_text}); reload it"
        super().__init__(message or default)
        self.found = found
        # The payment (a `domain.payment.Payment`) as the refused write found it, when it was
        # read. Typed `object` here: errors are below payments in the domain's imports.
        self.payment = payment


class IdempotencyMismatch(PaymentsError):
    code = "IDEMPOTENCY_MISMATCH"

    def __init__(self) -> None:
        super().__init__("this idempotency key was already used with a different request")


class StorageUnavailable(PaymentsError):
    code = "UNAVAILABLE"

    def __init__(self, message: str = "the payments store is busy; retry shortly") -> None:
        super().__init__(message)
