"""The domain's enums as GraphQL enums; schema modules import them from here, decorated once.

The domain holds no Strawberry, so each value's description is given here, by member, rather
than with `strawberry.enum_value` in the enum's own class.
"""

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

import strawberry

from domain.audit import ActorKind
from domain.enums import PaymentMethod, PaymentProcess, PaymentStatus
from engine import describe_values

E = TypeVar("E", bound=Enum)

FINAL = "Final: no move leaves it."


def _expose(enum: type[E], description: str, values: Mapping[E, str]) -> None:
    """`enum` as a GraphQL enum described by `description`, each value by `values` (all of
    them: a value left out is a KeyError at import)."""
    strawberry.enum(enum, description=description)
    describe_values(enum, values)


_expose(
    PaymentStatus,
    "Where a payment is in its lifecycle.",
    {
        PaymentStatus.PENDING: (
            "Created, not presented yet: show it as scheduled. Next it is submitted (ACH), "
            "completed, declined or failed (PINless), or skipped."
        ),
        PaymentStatus.ACHSENT: (
            "An ACH payment presented to the bank, awaiting settlement: show it as processing. "
            "It becomes COMPLETED when it settles, RETRY or RETURNED when the bank returns it."
        ),
        PaymentStatus.COMPLETED: (
            "Settled and applied to the loan's installments (`applications`): show it as paid. "
            "A late ACH return can still make it RETURNED, a card chargeback CHARGED_BACK."
        ),
        PaymentStatus.RETRY: (
            "Not collected yet, to be presented again: an ACH return for insufficient or "
            "uncollected funds (R01, R09), or a declined card. `retryEligibility` says whether "
            "and until when it may be presented; once it may not, it becomes FAILED."
        ),
        PaymentStatus.SKIPPED: (
            f"Not needed any more (e.g. the loan was already paid): nothing was collected. {FINAL}"
        ),
        PaymentStatus.FAILED: (
            "Given up on after the presentments the rules allow, or a card declined for good: "
            f"nothing was collected; a new payment is needed to collect. {FINAL}"
        ),
        PaymentStatus.CHARGED_BACK: (
            "A completed card payment the cardholder disputed: the card network took the money "
            f"back. {FINAL}"
        ),
        PaymentStatus.RETURNED: (
            "The bank returned the ACH payment for a reason that is not retried (account "
            f"closed, unauthorized, …; `returnCode` says which): nothing was collected. {FINAL}"
        ),
    },
)
_expose(
    PaymentMethod,
    "How the money moves: ACH debit or PINless debit card.",
    {
        PaymentMethod.ACH: (
            "A debit from a bank account, presented in an ACH file (ACHSENT); it settles or is "
            "returned days later."
        ),
        PaymentMethod.PINLESS: (
            "A PINless debit card payment: completed or declined when presented; a completed "
            "one may be charged back."
        ),
    },
)
_expose(
    PaymentProcess,
    "What started the payment.",
    {
        PaymentProcess.MANUAL: (
            "The user, in the app: the only process a customer may create a payment with."
        ),
        PaymentProcess.AUTO: "Autopay (created by services only).",
        PaymentProcess.RETRY: "A retry of a payment that failed before (created by services only).",
    },
)
_expose(
    ActorKind,
    "Who wrote: a customer, a service, or one of the service's own jobs.",
    {
        ActorKind.CUSTOMER: "A customer, through the API, on its own payment.",
        ActorKind.SERVICE: "A service, through the API (a token with the service scope).",
        ActorKind.JOB: (
            "One of the service's own jobs: the collection run (`loc-payments collect`) or the "
            "demonstration data."
        ),
    },
)

__all__ = ["ActorKind", "PaymentMethod", "PaymentProcess", "PaymentStatus"]
