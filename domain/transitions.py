"""The status transition table (SPEC §5) as data, and the one engine that applies it.

The source document's diagram is mandatory: PENDING -> ACHSENT -> {COMPLETED, RETRY, RETURNED},
RETRY -> FAILED. The other rows place the statuses the diagram leaves out (our decision). `RULES`
is the table; docs/api.md shows it, and `tests/test_docs.py` checks the page against it.

A presentment (a try at the payments service) adds one to the attempts, and is allowed only while
the attempts are below the maximum (a setting, default 3). SKIPPED, FAILED, RETURNED and
CHARGED_BACK are terminal. Any other move is refused. ACH payments also follow NACHA's return
rules (`domain.ach_returns`): only R01/R09 returns become RETRY (whatever the attempts and the
date), re-presentment ends 180 days after the first presentment, and a late return has its window.
A payment in RETRY that can no longer be presented leaves for FAILED: retried as far as allowed,
where RETURNED means a return that is not retried.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from domain import ach_returns, validation
from domain.enums import PaymentMethod, PaymentStatus
from domain.errors import Conflict, InvalidInput, InvalidTransition
from domain.payment import MAX_APPLICATIONS, Application, Payment

__all__ = [
    "RULES",
    "TERMINAL",
    "ApplicationRequest",
    "Requirement",
    "Rule",
    "TransitionRequest",
    "allowed_targets",
    "apply_transition",
]

S = PaymentStatus
ACH = frozenset({PaymentMethod.ACH})
PINLESS = frozenset({PaymentMethod.PINLESS})
ANY = frozenset(PaymentMethod)


class Requirement(Enum):
    CONFIRMATION_ID = "confirmationId"
    APPLICATIONS = "applications"
    RETURN_CODE = "returnCode"


@dataclass(frozen=True, slots=True)
class Rule:
    source: PaymentStatus
    target: PaymentStatus
    methods: frozenset[PaymentMethod]
    presentment: bool = False
    requires: frozenset[Requirement] = frozenset()


_CONF = Requirement.CONFIRMATION_ID
_APPS = Requirement.APPLICATIONS
_CODE = Requirement.RETURN_CODE

RULES: tuple[Rule, ...] = (
    Rule(S.PENDING, S.ACHSENT, ACH, presentment=True, requires=frozenset({_CONF})),
    Rule(S.RETRY, S.ACHSENT, ACH, presentment=True, requires=frozenset({_CONF})),
    Rule(S.ACHSENT, S.COMPLETED, ACH, requires=frozenset({_APPS})),
    Rule(S.ACHSENT, S.RETRY, ACH, requires=frozenset({_CODE})),
    Rule(S.ACHSENT, S.RETURNED, ACH, requires=frozenset({_CODE})),
    Rule(S.COMPLETED, S.RETURNED, ACH, requires=frozenset({_CODE})),
    Rule(S.PENDING, S.COMPLETED, PINLESS, presentment=True, requires=frozenset({_CONF, _APPS})),
    Rule(S.RETRY, S.COMPLETED, PINLESS, presentment=True, requires=frozenset({_CONF, _APPS})),
    Rule(S.PENDING, S.RETRY, PINLESS, presentment=True),
    Rule(S.RETRY, S.RETRY, PINLESS, presentment=True),
    Rule(S.COMPLETED, S.CHARGED_BACK, PINLESS),
    Rule(S.RETRY, S.FAILED, ANY),
    Rule(S.PENDING, S.FAILED, PINLESS, presentment=True),
    Rule(S.PENDING, S.SKIPPED, ANY),
    Rule(S.RETRY, S.SKIPPED, ANY),
)

TERMINAL: frozenset[PaymentStatus] = frozenset({S.SKIPPED, S.FAILED, S.RETURNED, S.CHARGED_BACK})

_BY_MOVE: dict[tuple[PaymentStatus, PaymentStatus], Rule] = {
    (rule.source, rule.target): rule for rule in RULES
}


@dataclass(frozen=True, slots=True)
class ApplicationRequest:
    installment_id: str
    amount_cents: int


@dataclass(frozen=True, slots=True)
class TransitionRequest:
    """What a caller asks for: a target status, why, and what that move may need.

    Made from outside input by `checked` only, where the input enters (the API, the collection
    job); `apply_transition` takes it as valid.
    """

    target: PaymentStatus
    reason: str
    confirmation_id: str | None = None
    applications: Sequence[ApplicationRequest] | None = None
    return_code: str | None = None
    # The version the caller last saw; another one refuses the move (optimistic concurrency).
    expected_version: int | None = None

    @classmethod
    def checked(
        cls,
        target: PaymentStatus,
        reason: str,
        *,
        confirmation_id: str | None = None,
        applications: Sequence[ApplicationRequest] | None = None,
        return_code: str | None = None,
        expected_version: int | None = None,
    ) -> TransitionRequest:
        """The request, or InvalidInput naming the first bad field, whatever the payment."""
        validation.reason("reason", reason)
        if expected_version is not None:
            validation.version("expectedVersion", expected_version)
        if confirmation_id is not None:
            validation.identifier("confirmationId", confirmation_id)
        if return_code is not None:
            validation.return_code("returnCode", return_code)
        if applications is not None and len(applications) > MAX_APPLICATIONS:
            raise InvalidInput(
                "applications", f"apply a payment to at most {MAX_APPLICATIONS} installments"
            )
        for index, application in enumerate(applications or ()):
            validation.identifier(
                f"applications[{index}].installmentId", application.installment_id
            )
            validation.amount_cents(f"applications[{index}].amountCents", application.amount_cents)
        return cls(target, reason, confirmation_id, applications, return_code, expected_version)


def allowed_targets(payment: Payment, *, max_attempts: int, now: datetime) -> list[PaymentStatus]:
    """The statuses this payment may move to now, given the right input, in the table's order."""
    return [
        rule.target
        for rule in RULES
        if rule.source is payment.status
        and payment.method in rule.methods
        and (not rule.presentment or payment.attempts < max_attempts)
        and _ach_refusal(payment, rule, None, max_attempts=max_attempts, now=now) is None
    ]


def apply_transition(
    payment: Payment, request: TransitionRequest, *, max_attempts: int, now: datetime
) -> Payment:
    """The payment as it is after the move, or an error; nothing here touches storage."""
    expected = request.expected_version
    if expected is not None and expected != payment.version:
        raise Conflict(
            payment.status,
            f"the payment is at version {payment.version}, not the expected {expected}; reload it",
            payment=payment,
        )
    rule = _check_move(payment, request.target, max_attempts=max_attempts)
    refusal = _ach_refusal(payment, rule, request.return_code, max_attempts=max_attempts, now=now)
    if refusal is not None:
        raise InvalidTransition(payment.status, rule.target, refusal)
    confirmation_id = _confirmation_id(payment, rule, request)
    applications = _applications(payment, rule, request, now=now)
    return_code = _return_code(rule, request, current=payment.return_code)
    return dataclasses.replace(
        payment,
        status=rule.target,
        attempts=payment.attempts + 1 if rule.presentment else payment.attempts,
        confirmation_id=confirmation_id,
        applications=applications,
        return_code=return_code,
        update_reason=request.reason,
        updated_at=now,
        version=payment.version + 1,
        first_presented_at=(
            now
            if rule.presentment and payment.first_presented_at is None
            else payment.first_presented_at
        ),
        completed_at=now if rule.target is S.COMPLETED else payment.completed_at,
        # A payment from before payment history gets its first event with this move.
        history_from=payment.version + 1 if payment.history_from is None else payment.history_from,
    )


def _check_move(payment: Payment, target: PaymentStatus, *, max_attempts: int) -> Rule:
    current = payment.status
    if current in TERMINAL:
        raise InvalidTransition(current, target, f"{current.value} is a final status")
    rule = _BY_MOVE.get((current, target))
    if rule is None:
        raise InvalidTransition(current, target, "the transition table has no such move")
    if payment.method not in rule.methods:
        methods = " or ".join(sorted(method.value for method in rule.methods))
        raise InvalidTransition(current, target, f"this move is for {methods} payments only")
    if rule.presentment and payment.attempts >= max_attempts:
        raise InvalidTransition(
            current,
            target,
            f"the payment was already presented {payment.attempts} times, the maximum",
        )
    return rule


def _ach_refusal(
    payment: Payment, rule: Rule, return_code: str | None, *, max_attempts: int, now: datetime
) -> str | None:
    """NACHA's word on an ACH move, or None; `return_code` None asks "with the best code"."""
    if payment.method is not PaymentMethod.ACH:
        return None
    if (rule.source, rule.target) == (S.ACHSENT, S.RETRY):
        return ach_returns.retry_refusal(return_code)
    if rule.presentment and rule.source is S.RETRY:
        return ach_returns.representment_refusal(payment, max_attempts=max_attempts, now=now)
    if (rule.source, rule.target) == (S.COMPLETED, S.RETURNED):
        return ach_returns.late_return_refusal(payment, return_code, now=now)
    return None


def _confirmation_id(payment: Payment, rule: Rule, request: TransitionRequest) -> str | None:
    given = request.confirmation_id
    if _CONF in rule.requires:
        if given is None:
            raise InvalidInput("confirmationId", "is required for this move")
        return given
    if given is not None and given != payment.confirmation_id:
        raise InvalidInput("confirmationId", "does not match the payment's confirmation id")
    return payment.confirmation_id


def _applications(
    payment: Payment, rule: Rule, request: TransitionRequest, *, now: datetime
) -> tuple[Application, ...]:
    if _APPS not in rule.requires:
        if request.applications is not None:
            raise InvalidInput("applications", "only a completion applies a payment")
        return payment.applications
    if request.applications is None:
        if payment.intended_installment_id is None:
            raise InvalidInput(
                "applications",
                "are required: the payment has no intended installment to apply it to",
            )
        requested = [ApplicationRequest(payment.intended_installment_id, payment.amount_cents)]
    else:
        requested = list(request.applications)
    if not requested:
        raise InvalidInput("applications", "must not be empty")
    total = sum(application.amount_cents for application in requested)
    if total != payment.amount_cents:
        raise InvalidInput(
            "applications",
            f"add up to {total} cents, but the payment is {payment.amount_cents} cents",
        )
    return tuple(
        Application(payment.payment_id, application.installment_id, application.amount_cents, now)
        for application in requested
    )


def _return_code(rule: Rule, request: TransitionRequest, *, current: str | None) -> str | None:
    if _CODE in rule.requires:
        if request.return_code is None:
            raise InvalidInput("returnCode", "is required for this move")
        return request.return_code
    if request.return_code is not None:
        raise InvalidInput("returnCode", "is taken only by moves that record an ACH return")
    return current
