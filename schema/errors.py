"""Expected failures are part of the schema: `PaymentResult` is the payload or a `UserError`.

Unexpected failures go to `errors[]`, masked (see `schema.extensions`).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, cast

import strawberry

from domain import errors
from schema.enums import PaymentStatus
from schema.types import PaymentType


@strawberry.enum(description="Why a mutation did not happen.")
class ErrorCode(Enum):
    NOT_FOUND = "NOT_FOUND"
    INVALID_TRANSITION = "INVALID_TRANSITION"
    CONFLICT = "CONFLICT"
    INVALID_INPUT = "INVALID_INPUT"
    IDEMPOTENCY_MISMATCH = "IDEMPOTENCY_MISMATCH"
    UNAVAILABLE = "UNAVAILABLE"


@strawberry.interface(description="An expected failure: nothing was written.")
class UserError:
    code: ErrorCode
    message: str


@strawberry.type
class NotFoundError(UserError):
    pass


@strawberry.type
class InvalidInputError(UserError):
    field: str = strawberry.field(description="The input field that was refused.")


@strawberry.type
class InvalidTransitionError(UserError):
    current_status: PaymentStatus
    target_status: PaymentStatus


@strawberry.type
class ConflictError(UserError):
    found_status: PaymentStatus | None = strawberry.field(
        description="The status another writer left the payment in."
    )
    current_payment: PaymentType | None = strawberry.field(
        default=None, description="The payment as it is now, when the refused move read it."
    )


@strawberry.type
class IdempotencyMismatchError(UserError):
    pass


@strawberry.type(description="The storage did not answer in time; the same request may be retried.")
class UnavailableError(UserError):
    pass


@strawberry.type
class PaymentPayload:
    payment: PaymentType
    replayed: bool = strawberry.field(
        default=False,
        description=(
            "True when an earlier request with the same idempotency key had written this, and "
            "this one wrote nothing."
        ),
    )


PaymentResult = Annotated[
    PaymentPayload
    | NotFoundError
    | InvalidInputError
    | InvalidTransitionError
    | ConflictError
    | IdempotencyMismatchError
    | UnavailableError,
    strawberry.union("PaymentResult"),
]


def user_error(error: errors.PaymentsError) -> PaymentResult:
    """The union member for a domain error; an error with no member is unexpected."""
    code = ErrorCode(error.code)
    match error:
        case errors.InvalidInput():
            return InvalidInputError(code=code, message=error.message, field=error.field)
        case errors.InvalidTransition():
            return InvalidTransitionError(
                code=code,
                message=error.message,
                current_status=error.current,
                target_status=error.target,
            )
        case errors.Conflict():
            return ConflictError(
                code=code,
                message=error.message,
                found_status=error.found,
                current_payment=cast(PaymentType | None, error.payment),
            )
        case errors.NotFound():
            return NotFoundError(code=code, message=error.message)
        case errors.IdempotencyMismatch():
            return IdempotencyMismatchError(code=code, message=error.message)
        case errors.StorageUnavailable():
            return UnavailableError(code=code, message=error.message)
    raise error
