"""Expected failures are part of the schema: `PaymentResult` is the payload or a `UserError`.

Unexpected failures go to `errors[]`, masked (see `schema.public_errors`).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, cast

import strawberry

from domain import errors
from schema.enums import PaymentStatus
from schema.types import PaymentType

__all__ = [
    "InvalidInputError",
    "NotFoundError",
    "PaymentPayload",
    "PaymentResult",
    "UnavailableError",
    "user_error",
]


@strawberry.enum(description="Why a mutation did not happen (or, UNAVAILABLE, may not have).")
class ErrorCode(Enum):
    NOT_FOUND = strawberry.enum_value(
        "NOT_FOUND",
        description=(
            "No such payment, loan, webhook endpoint or event, or another user's (never "
            "FORBIDDEN). Check the ids: sent again unchanged, it answers the same."
        ),
    )
    INVALID_TRANSITION = strawberry.enum_value(
        "INVALID_TRANSITION",
        description=(
            "The payment's status does not allow the move, or its presentments are spent, or a "
            "return window has closed. Read its `status` and `allowedTransitions` again; sent "
            "again unchanged, it answers the same."
        ),
    )
    CONFLICT = strawberry.enum_value(
        "CONFLICT",
        description=(
            "Another writer changed the payment between this request's read and its write, or "
            "it is not at the `expectedVersion` sent. Look at `currentPayment`, decide again, "
            "and send the move with its `version` if it still applies."
        ),
    )
    INVALID_INPUT = strawberry.enum_value(
        "INVALID_INPUT",
        description=(
            "A value was refused, and `field` names it (e.g. `confirmationId` when another "
            "payment of the user holds that id). Correct it before sending again."
        ),
    )
    IDEMPOTENCY_MISMATCH = strawberry.enum_value(
        "IDEMPOTENCY_MISMATCH",
        description=(
            "The `idempotencyKey` was used within 24 hours with a different request. Send a new "
            "request with a new key; to retry the earlier one, send it unchanged."
        ),
    )
    UNAVAILABLE = strawberry.enum_value(
        "UNAVAILABLE",
        description=(
            "The storage did not answer in time: the write may or may not have happened. Send "
            "the same request again, with the same `idempotencyKey`, after a short wait."
        ),
    )


@strawberry.interface(
    description=(
        "An expected failure, answered in place of the payload: nothing was written (after "
        "UNAVAILABLE, the write may have happened: send the same request again, with its "
        "`idempotencyKey`)."
    )
)
class UserError:
    code: ErrorCode = strawberry.field(
        description="What went wrong, and what to do about it: switch on this, not on `message`."
    )
    message: str = strawberry.field(
        description="What went wrong, in English, for developers and logs; not for customers."
    )


@strawberry.type(description="NOT_FOUND: no such payment, loan, webhook endpoint or event.")
class NotFoundError(UserError):
    pass


@strawberry.type(description="INVALID_INPUT: a value was refused; `field` names it.")
class InvalidInputError(UserError):
    field: str = strawberry.field(description="The input field that was refused.")


@strawberry.type(
    description="INVALID_TRANSITION: the move is not allowed from the payment's status now."
)
class InvalidTransitionError(UserError):
    current_status: PaymentStatus = strawberry.field(description="The status the payment is in.")
    target_status: PaymentStatus = strawberry.field(description="The status the move asked for.")


@strawberry.type(
    description=(
        "CONFLICT: another writer changed the payment first, or it is not at `expectedVersion`."
    )
)
class ConflictError(UserError):
    found_status: PaymentStatus | None = strawberry.field(
        description="The status another writer left the payment in."
    )
    current_payment: PaymentType | None = strawberry.field(
        default=None, description="The payment as it is now, when the refused move read it."
    )


@strawberry.type(
    description="IDEMPOTENCY_MISMATCH: the idempotency key was used with a different request."
)
class IdempotencyMismatchError(UserError):
    pass


@strawberry.type(description="The storage did not answer in time; the same request may be retried.")
class UnavailableError(UserError):
    pass


@strawberry.type(
    description="The payment a mutation wrote, or (`replayed`) had written with the same key."
)
class PaymentPayload:
    payment: PaymentType = strawberry.field(description="The payment as it is now.")
    replayed: bool = strawberry.field(
        default=False,
        description=(
            "True when an earlier request with the same idempotency key had written this, and "
            "this one wrote nothing."
        ),
    )


# The codes a UserError may carry (each member's name is its value); any other (INTERNAL) is
# no caller's to handle.
_CODES = frozenset(ErrorCode.__members__)

PaymentResult = Annotated[
    PaymentPayload
    | NotFoundError
    | InvalidInputError
    | InvalidTransitionError
    | ConflictError
    | IdempotencyMismatchError
    | UnavailableError,
    strawberry.union(
        "PaymentResult",
        description=(
            "The payment (`PaymentPayload`), or a `UserError` that says why nothing was written: "
            "select `__typename` and `... on UserError { code message }`."
        ),
    ),
]


def user_error(error: errors.PaymentsError) -> PaymentResult:
    """The union member for a domain error. An error with no member (a `PaymentsError` itself,
    code INTERNAL: DynamoDB refused a request we built) is unexpected: raised again as it is,
    for `errors[]`, where it is masked as INTERNAL and logged."""
    if error.code not in _CODES:
        raise error
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
